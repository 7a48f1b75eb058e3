"""Which backbone should FedMT's CPU profiles use? A sizing study at EQUAL CPU-SECONDS (issue 29,
item 3): each backbone trains FedMT (E) (and Single, the server-only baseline) on the profile's
CIFAR-100 split for as many rounds as a fixed CPU-second budget buys, measured on this machine, and
the study reports the 100-class test accuracy each reaches and how many client rows pass the
pseudo-label threshold per round (FedMT's mechanism only runs where they do).

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/fedmt_backbone_study.py --profile long \
        --budget 900 --out benchmarks/results/fedmt_backbone_study

Backbones (--backbones NAME[:json-kwargs]):
- lenet: the LeNet-size CNN of the quick/long profiles (no BatchNorm; grouped backend);
- small_resnet: FedMT's small CIFAR ResNet (fedpaper.blocks.nets.resnet.SmallResNet, BatchNorm);
- bn_convnet: FedNCA-ML's BatchNorm convnet body (fedpaper.blocks.nets.ladm.ConvNet, norm "batch") with a
  linear K-class head (fedpaper.blocks.nets.resnet.BNConvNet; this script registered its own copy until the
  study chose it for the quick and long profiles).

Per backbone: runs of FedMT (E) of 1 and of 3 rounds calibrate the CPU seconds per round (their
difference / 2: process time of this process, one thread, without fixed costs such as loading data); rounds = budget / that, at least 2. A round late in training costs more
than an early one when more client rows pass the threshold (each passing row is trained on), so
the CPU seconds each run used are reported beside the budget. Each run uses a fresh temporary
results store: nothing is read from or written to the cache. Seeds, partitions and every other
setting are the profile's (one seed, --seed).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import loadavg, machine, run_line  # noqa: E402

from fedpaper.runs.executors import run_specs  # noqa: E402
from fedpaper.runs.experiment import Execution  # noqa: E402
from fedpaper.blocks.models import MODELS  # noqa: E402
from fedpaper.outputs.pipeline import declared_jobs  # noqa: E402
from fedpaper.papers import fedmt as F  # noqa: E402
from fedpaper.papers.fedmt import runs as R  # noqa: E402
from fedpaper.runs.store import ResultStore  # noqa: E402


DEFAULT_BACKBONES = ["lenet", 'small_resnet:{"widths": [16, 32, 64]}', 'bn_convnet:{"width": 16, "dim": 64}']


def parse_backbone(arg: str, base_kwargs: dict) -> tuple[str, dict]:
    name, _, kw = arg.partition(":")
    kwargs = dict(base_kwargs) if name == "lenet" else {"in_channels": base_kwargs.get("in_channels", 3)}
    kwargs.update(json.loads(kw) if kw else {})
    return name, kwargs


def train(p: dict, method: str, seed: int, rounds: int) -> dict:
    """One run of `method` at `rounds` rounds; its result, CPU and wall seconds."""
    q = dict(p, rounds=rounds, single_rounds=rounds)
    spec = R.spec(q, method, seed)
    with tempfile.TemporaryDirectory() as d:
        c0, w0 = time.process_time(), time.perf_counter()
        (res,) = run_specs([spec], os.environ.get("FEDPAPER_DATA"), desc=method, execution=Execution(eval_batch=1024),
                           store=ResultStore(d), progress=False, max_batch=1)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return {"result": res, "cpu_s": cpu, "wall_s": wall}


def summary(run: dict, method: str) -> dict:
    hist = run["result"]["history"]
    accs = [100 * h["test_acc"] for h in hist if h.get("test_acc") is not None]
    out = {"final_acc": accs[-1] if accs else None, "best_acc": max(accs) if accs else None,
           "rounds_evaluated": len(accs), "cpu_s": round(run["cpu_s"], 1), "wall_s": round(run["wall_s"], 1),
           "per_round": [{"round": h["round"], "acc": round(100 * h["test_acc"], 2),
                          "fix_clients_share": h.get("fix_clients_share"), "fix_rows_mean": h.get("fix_rows_mean")}
                         for h in hist]}
    out.update({k: round(v, 2) for k, v in R.final_values(run["result"], method).items()})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="long", help="the FedMT profile whose settings the study uses")
    ap.add_argument("--budget", type=float, default=900.0, help="CPU seconds per backbone and method")
    ap.add_argument("--backbones", nargs="+", default=DEFAULT_BACKBONES)
    ap.add_argument("--methods", nargs="+", default=["FedMT (E)", "Single"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-rounds", type=int, default=200)
    ap.add_argument("--out", default=None, help="write OUT.json and OUT.md")
    a = ap.parse_args(argv)
    base = declared_jobs(F.main, profile=a.profile, seeds=[a.seed])[0].params
    m = machine(frameworks=False)
    head = (f"# FedMT backbones at equal CPU seconds ({a.budget:g} s per backbone and method), {a.profile} profile's "
            f"settings (N_c {base['samples_per_client']}, {base['num_clients']} clients, threshold {base['threshold']}), "
            f"seed {a.seed}\n{run_line(m)}")
    print(head, flush=True)
    rows = []
    for arg in a.backbones:
        name, kwargs = parse_backbone(arg, base["backbone_kwargs"])
        p = dict(base, backbone=name, backbone_kwargs=kwargs)
        one, three = train(p, "FedMT (E)", a.seed, 1), train(p, "FedMT (E)", a.seed, 3)
        per_round = max(1e-3, (three["cpu_s"] - one["cpu_s"]) / 2)  # without the fixed costs (data, model build)
        rounds = int(max(2, min(a.max_rounds, a.budget // max(per_round, 1e-9))))
        params = sum(t.numel() for t in MODELS[name](num_classes=100, **kwargs).parameters())
        print(f"{arg}: {params / 1e6:.3f} M parameters, {per_round:.1f} CPU s per FedMT (E) round (3 rounds minus "
              f"1, /2) -> {rounds} rounds", flush=True)
        for method in a.methods:
            run = train(p, method, a.seed, rounds)
            s = summary(run, method)
            row = {"backbone": arg, "params_m": round(params / 1e6, 3), "method": method, "rounds": rounds,
                   "calibration_cpu_s_per_round": round(per_round, 2), **s}
            rows.append(row)
            fix = [(r["fix_clients_share"], r["fix_rows_mean"]) for r in s["per_round"] if r["fix_clients_share"] is not None]
            print(f"  {method}: final {s['final_acc']:.2f} %, best {s['best_acc']:.2f} %, {s['cpu_s']:.0f} CPU s"
                  + (f"; S_fix (share of clients, mean rows) last rounds {fix[-3:]}" if fix else ""), flush=True)
    out = {"machine": m, "head": head, "budget_cpu_s": a.budget, "profile": a.profile, "seed": a.seed, "rows": rows,
           "command": " ".join(sys.argv), "load_after": loadavg()}
    if a.out:
        Path(a.out + ".json").write_text(json.dumps(out, indent=1, default=str))
        lines = [head.replace("# ", "", 1).replace("\n# ", "\n\n"), "",
                 f"Command: `{out['command']}`", "",
                 "| backbone | params (M) | method | rounds | CPU s | final acc % | best acc % | S_fix share / mean rows (last round) |",
                 "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            last = next((x for x in reversed(r["per_round"]) if x["fix_clients_share"] is not None), None)
            fx = f"{last['fix_clients_share']:.2f} / {last['fix_rows_mean']:.1f}" if last else "-"
            lines.append(f"| {r['backbone']} | {r['params_m']} | {r['method']} | {r['rounds']} | {r['cpu_s']:.0f} | "
                         f"{r['final_acc']:.2f} | {r['best_acc']:.2f} | {fx} |")
        Path(a.out + ".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
