"""The FedPALS image-training work of a profile, counted and measured.

Count (no training): unique runs and training sample-steps (client images x local epochs x
participation x rounds) per artifact, in the order `make figures` meets them (a run shared with an
earlier artifact is counted there), and the CPU time they imply at given rates:

    FEDPAPER_DATA=../shared/data python benchmarks/fedpals_cost.py quick --rate-cifar10 4256 --rate-fmnist 7690
    FEDPAPER_DATA=../shared/data python benchmarks/fedpals_cost.py paper --seeds 3 --only table1

Measure (trains): one Table 1 row (all 7 methods, FedPALS's lambda grid of the profile, `--seeds`
seeds) for `--rounds` rounds, in each configuration, interleaved `--repeats` times in this one
process, each time into an empty results store; reports training samples (the same count) per
CPU second of this process, evaluation every round included, the load average and the CPU, and
checks that the configurations give the same results:

    OMP_NUM_THREADS=1 FEDPAPER_DATA=../shared/data python benchmarks/fedpals_cost.py quick --measure \\
        --row cifar10:C=3 --rounds 3 --repeats 2

Configurations: `before` = the sweep as it ran before issue 28 (up to 16 runs per engine call, so
the seeds of a method trained together); `after` = fedpaper.papers.fedpals.train's
runs_per_engine_call() (one run per call on CPU); `all-slots` = `after` with the grouped backend
passing every slot of a call at every step, finished clients too, as before session 16
(`--configs all-slots after` measures what skipping them gives); `bf16` = `after` with every run in bf16
autocast (its own results: the accuracy differences printed are not expected to be 0); `relu-first` = `after` with
the grouped pass in the model's own layer order (engine.grouped.pool_before_relu bypassed: the same numbers); `grouped-convs` = `after` with the
model's convolutions grouped over the slots on every CPU (engine.grouped.per_slot_rule answering "none": on
AVX2-only CPUs the numbers differ by float rounding, on AVX-512 ones they are the same). With `--estimate`, the measured `after` rate of
the row is applied to the counted work of the whole artifact (`--only`, default table1).
"""
import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fedpaper.outputs.pipeline import declared_jobs  # noqa: E402
from fedpaper.papers import fedpals as F  # noqa: E402
from fedpaper.papers.fedpals import runs as R, train as TR  # noqa: E402

RATE_KEYS = {"cifar10": "rate_cifar10", "fashion-mnist": "rate_fmnist"}


def artifact_settings(p: dict) -> dict:
    arts = {"table1": [{"dataset": d, "split": s, "methods": R.TABLE1_METHODS} for d, s in TR.table1_settings(p)]}
    arts.update(TR.shift_settings(p, dict(p)))
    arts["fig7"] = [{"dataset": d, "split": s, "methods": p["fig7_methods"]} for d, s in TR.FIG7_SETTINGS]
    arts.update(TR.fig8_settings(p))
    return arts


def params(profile: str, seeds=None, overrides=None) -> dict:
    """The Fig 8 settings of `profile` as the pipeline settles them (every seed setting a list)."""
    return declared_jobs(F.fig8a, profile=profile, seeds=seeds, overrides=overrides)[0].params


def work(spec, data_root=None) -> float:
    """Training sample-steps of one run: its clients' images x local epochs x participation x rounds
    (the Oracle's clients as built: scaled down where the target's labels lack images)."""
    t = spec.training
    n = sum(len(c) for c in R.federation(spec, data_root=data_root).client_indices)
    return float(n * t["rounds"] * t["local_epochs"] * t["participation"])


def count(p: dict, rate: dict, only=None, data_root=None, quiet=False) -> dict:
    """{artifact: (new runs, sample-steps, CPU s)} and the totals, printed unless quiet."""
    seen, out = set(), {}
    for name, settings in artifact_settings(p).items():
        if only and name not in only:
            continue
        n_new, steps, secs = 0, 0.0, 0.0
        for st in settings:
            for s in R.method_specs(p, st["dataset"], st["split"], st["methods"], p["seeds"], data_root,
                                    **st.get("kw", {})):
                if s.to_json() in seen:
                    continue
                seen.add(s.to_json())
                n_new += 1
                n = work(s, data_root)
                steps += n
                secs += n / rate[R.dataset_of(s.data)]
        out[name] = (n_new, steps, secs)
        if not quiet:
            print(f"{name:8s} new runs {n_new:4d}  train sample-steps {steps / 1e6:8.2f} M  ~{secs:9.0f} CPU s")
    tot = (sum(v[0] for v in out.values()), sum(v[1] for v in out.values()), sum(v[2] for v in out.values()))
    if not quiet:
        print(f"TOTAL {tot[0]} runs, {tot[1] / 1e6:.2f} M sample-steps, ~{tot[2] / 60:.1f} min "
              f"(~{tot[2] / 3600:.1f} h) of 1-thread CPU")
    return {"artifacts": out, "total": tot}


# ----------------------------------------------------------------------------- measure
CONFIGS = {"before": lambda: 16, "after": TR.runs_per_engine_call, "all-slots": TR.runs_per_engine_call,
           "bf16": TR.runs_per_engine_call, "relu-first": TR.runs_per_engine_call,
           "grouped-convs": TR.runs_per_engine_call}


def _all_slots():
    """The grouped backend as it was before it skipped finished slots: every slot of the call is
    passed at every step (engine.backends.GroupedBackend._grouped_active bypassed)."""
    from fedpaper.engine import backends

    return mock.patch.object(backends.GroupedBackend, "_grouped_active",
                             lambda self, params, batch, present, anchor, objective, gens, active:
                             self._grouped(params, batch, present, anchor, objective, gens))


def _relu_first():
    """The grouped pass in the model's own order (ReLU, then max-pool): engine.grouped.pool_before_relu
    bypassed (the same numbers; it only moves the ReLU after the pool)."""
    from fedpaper.engine import grouped

    return mock.patch.object(grouped, "pool_before_relu", list)


def _grouped_convs():
    """The grouped pass with every convolution grouped over the slots on every CPU (engine.grouped.per_slot_rule
    answering "none", as before it ran them slot by slot on AVX2-only CPUs)."""
    from fedpaper.driver import trainer

    return mock.patch.object(trainer, "per_slot_rule", lambda *a, **k: ("none", "convolutions grouped (patched)"))


PATCHES = {"all-slots": _all_slots, "relu-first": _relu_first, "grouped-convs": _grouped_convs}  # configurations that differ in the engine, not in the sweep


def with_precision(spec, precision: str):
    """The run with TrainConfig.precision `precision` (bf16: autocast; fp32 where it is not native)."""
    return dataclasses.replace(spec, training={**spec.training, "precision": precision})


SPEC_CHANGES = {"bf16": lambda spec: with_precision(spec, "bf16")}  # configurations that train other runs (another results key)


def row_specs(p: dict, row: str, rounds: int, data_root) -> list:
    dataset, label = row.split(":")
    split = next(s for d, s in TR.TABLE1_SETTINGS if d == dataset and R.label_setting(s) == label)
    p = dict(p, rounds={**p["rounds"], dataset: rounds})
    return R.method_specs(p, dataset, split, R.TABLE1_METHODS, p["seeds"], data_root)


def measure(p: dict, row: str, rounds: int, configs: list, repeats: int, data_root) -> dict:
    from machine import cpu_line, loadavg, machine

    from fedpaper.runs.executors import run_specs
    from fedpaper.runs.store import ResultStore

    specs = row_specs(p, row, rounds, data_root)
    samples = sum(work(s, data_root) for s in specs)
    for s in specs:  # load the pools, draw partitions and build the federations once, before any timing
        s.build(data_root, R.execution())
    m = machine(frameworks=False)
    print(f"# {row}, {len(specs)} runs ({', '.join(R.TABLE1_METHODS)}; FedPALS lambda grid {p['ess_grid']}), "
          f"{len(p['seeds'])} seeds, {rounds} rounds, data fraction {R.data_fraction(p, row.split(':')[0])}, "
          f"test_n {p['test_n']}, eval every {p['eval_every']} round(s): {samples / 1e6:.3f} M training samples")
    print(f"# CPU: {cpu_line(m)}; torch {m['torch']}, {m['torch_threads']} thread(s); "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    rows, results = [], {}
    for rep in range(repeats):
        for name in configs:
            load0 = loadavg()
            with tempfile.TemporaryDirectory() as d, PATCHES.get(name, contextlib.nullcontext)():
                c0, w0 = time.process_time(), time.perf_counter()
                res = run_specs([SPEC_CHANGES.get(name, lambda x: x)(s) for s in specs], data_root, execution=R.execution(), store=ResultStore(d), progress=False,
                                max_batch=CONFIGS[name]())
                cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            results.setdefault(name, res)
            r = {"config": name, "repeat": rep, "runs_per_call": CONFIGS[name](), "cpu_s": round(cpu, 1),
                 "wall_s": round(wall, 1), "samples_per_cpu_s": round(samples / cpu), "load_before": load0,
                 "load_after": loadavg()}
            rows.append(r)
            print(json.dumps(r), flush=True)
    diffs = {}
    base = results[configs[0]]
    for name in configs[1:]:
        d = [abs(a["best"]["test_acc"] - b["best"]["test_acc"]) for a, b in zip(base, results[name])]
        h = [abs(x["test_acc"] - y["test_acc"]) for a, b in zip(base, results[name])
             for x, y in zip(a["history"], b["history"])]
        diffs[name] = {"max_abs_diff_best_test_acc": max(d), "max_abs_diff_history_test_acc": max(h)}
        print(f"# {name} vs {configs[0]}: max |diff| of best test accuracy {max(d):.2e}, of every round's {max(h):.2e}")
    med = {}
    for name in configs:
        v = sorted(r["samples_per_cpu_s"] for r in rows if r["config"] == name)
        med[name] = round(statistics.median(v))
        print(f"# {name}: {med[name]:,} samples per CPU second (median of {len(v)}: {', '.join(f'{x:,}' for x in v)})")
    if len(configs) > 1:
        ratios = sorted(a["samples_per_cpu_s"] / b["samples_per_cpu_s"] for a, b in
                        zip([r for r in rows if r["config"] == configs[-1]], [r for r in rows if r["config"] == configs[0]]))
        print(f"# {configs[-1]} / {configs[0]}: {', '.join(f'{x:.2f}x' for x in ratios)} (per repeat)")
    return {"samples": samples, "rows": rows, "median": med, "diffs": diffs, "machine": m}


def conv_ceiling(dataset: str, slots=(9, 20), batch=32, repeats=20) -> list:
    """Samples/s of the LeNet's two convolutions alone (forward, ReLU, pooling and backward to the
    weights) for `slots` models in one grouped pass, as the engine's grouped backend lays them out
    (channels_last, groups = slots), fp32 and bf16: an upper bound on the whole training rate
    (the linear layers, loss, optimiser, data gathering and evaluation come on top)."""
    import torch
    import torch.nn.functional as Fn

    from fedpaper.blocks.models import build_model

    c2 = {"fashion-mnist": 12, "cifar10": 16}[dataset]  # the profiles' lenet_c2 (vague-4)
    cin, size = (3, 32) if dataset == "cifar10" else (1, 28)
    net = build_model("lenet", in_channels=cin, image_size=size, num_classes=10, c2=c2)
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    out = []
    for G in slots:
        for dt in (torch.float32, torch.bfloat16):
            x = torch.randn(batch, G * cin, size, size).to(dtype=dt, memory_format=torch.channels_last)
            ws = [torch.randn(G * c.out_channels, c.in_channels, *c.kernel_size, dtype=dt)
                  .to(memory_format=torch.channels_last).requires_grad_() for c in convs]

            def step():
                h = x
                for w, c in zip(ws, convs):
                    h = Fn.max_pool2d(Fn.relu(Fn.conv2d(h, w, None, c.stride, c.padding, 1, G)), 2)
                torch.autograd.grad(h.float().sum(), ws)

            step(), step()
            t = time.process_time()
            for _ in range(repeats):
                step()
            rate = repeats * G * batch / (time.process_time() - t)
            out.append({"slots": G, "batch": batch, "dtype": str(dt).split(".")[-1], "samples_per_cpu_s": round(rate)})
            print(json.dumps(out[-1]), flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--seeds", type=int, default=None, help="number of seeds (default: the profile's)")
    ap.add_argument("--only", nargs="+", default=None, help="artifacts to count (default: all)")
    ap.add_argument("--rate-cifar10", type=float, default=4256.0)
    ap.add_argument("--rate-fmnist", type=float, default=7690.0)
    ap.add_argument("--measure", action="store_true", help="train one Table 1 row and measure its rate")
    ap.add_argument("--row", default="cifar10:C=3", help="dataset:label_split of a Table 1 row")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--configs", nargs="+", default=["before", "after"], choices=list(CONFIGS))
    ap.add_argument("--estimate", action="store_true",
                    help="with --measure: the counted work of --only (default table1) at the measured rate")
    ap.add_argument("--conv-ceiling", action="store_true",
                    help="with --measure: also time the LeNet's convolutions alone (an upper bound on the rate)")
    ap.add_argument("--json", default=None, help="also write the measurements here")
    a = ap.parse_args(argv)
    data_root = os.environ.get("FEDPAPER_DATA")
    p = params(a.profile, a.seeds)
    rate = {"cifar10": a.rate_cifar10, "fashion-mnist": a.rate_fmnist}
    if not a.measure:
        count(p, rate, a.only, data_root)
        return
    out = measure(p, a.row, a.rounds, a.configs, a.repeats, data_root)
    if a.conv_ceiling:
        out["conv_ceiling"] = conv_ceiling(a.row.split(":")[0])
    if a.estimate:
        ds = a.row.split(":")[0]
        r = out["median"][a.configs[-1]]
        rate[ds] = r
        print(f"# estimate at {r:,} samples per CPU second for {ds} (the measured {a.configs[-1]} rate)"
              + ("" if len(rate) == 1 else f"; other data sets at the rates given: {rate}"))
        out["estimate"] = count(p, rate, a.only or ["table1"], data_root)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
