"""The grouped pass's convolutions: grouped over the slots, or ordinary ones slot by slot?

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/bench_first_conv.py --out benchmarks/results/first_conv_avx2.md

One training step's forward and backward (loss: summed cross-entropy; gradients of every parameter) of the
engine's own grouped pass (engine.grouped.GroupedForward) for G slots of batch B, built three ways
(its `per_slot` argument, engine.grouped.per_slot_ops): `none` (every convolution one grouped convolution
over the slots), `first` (the first convolution slot by slot, the outputs joined into the grouped layout)
and `features` (every layer up to the Flatten slot by slot, G ordinary convolution stacks; the linear
layers stay batched matrix products). They run interleaved, `--repeats` times `--steps` steps each, in
one process; the table gives the median step time and each one's speed over `none` (> 1: faster). The cases are the models the rule touches: the FedPALS LeNet
on CIFAR-10 (9 slots of 32, a paper-profile pass; 20 slots, the largest pass) and on Fashion-MNIST, and
the privlabels quick CNN (8-8-16-16, batch 16) on both, and a 16-16-32-32 one (the widest the grouped backend
takes in fp32). Also gives the largest |difference| of the gradients against `none` (float rounding).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
for _p in (str(REPO), str(BENCH)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

WAYS = ("none", "first", "features")
# (name, model, model kwargs, slots, batch)
CASES = [
    ("FedPALS LeNet, CIFAR-10 (3x32x32), 9 slots x 32", "lenet", dict(in_channels=3, image_size=32), 9, 32),
    ("FedPALS LeNet, CIFAR-10 (3x32x32), 20 slots x 32", "lenet", dict(in_channels=3, image_size=32), 20, 32),
    ("FedPALS LeNet, Fashion-MNIST (1x28x28), 10 slots x 64", "lenet", dict(in_channels=1, image_size=28), 10, 64),
    ("privlabels CNN 8-8-16-16, CIFAR-10, 10 slots x 16", "privlabels_cnn",
     dict(in_channels=3, image_size=32, widths=(8, 8, 16, 16), dropout=0.0), 10, 16),
    ("privlabels CNN 8-8-16-16, Fashion-MNIST, 10 slots x 16", "privlabels_cnn",
     dict(in_channels=1, image_size=28, widths=(8, 8, 16, 16), dropout=0.0), 10, 16),
    ("privlabels CNN 16-16-32-32, CIFAR-10, 10 slots x 16", "privlabels_cnn",
     dict(in_channels=3, image_size=32, widths=(16, 16, 32, 32), dropout=0.0), 10, 16),
]


def measure_case(model: str, kw: dict, G: int, B: int, repeats: int, steps: int) -> dict:
    import torch
    import torch.nn.functional as F

    from fedpaper.blocks.models import build_model
    from fedpaper.engine.grouped import GroupedForward, stacked_layout

    torch.manual_seed(0)
    net = build_model(model, num_classes=10, **kw)
    shape = (kw["in_channels"], kw["image_size"], kw["image_size"])
    passes = {k: GroupedForward.build(net, shape, k) for k in WAYS}
    assert [passes[k].n_per_slot > 0 for k in WAYS] == [False, True, True]
    params = {k: stacked_layout(torch.stack([v.detach() * (1 + 0.05 * g) for g in range(G)])).requires_grad_(True)
              for k, v in net.named_parameters()}
    x, y = torch.randn(G, B, *shape), torch.randint(0, 10, (G, B))

    def step(name):
        out = passes[name](params, x)
        loss = F.cross_entropy(out.reshape(G * B, -1), y.reshape(-1), reduction="sum")
        return torch.autograd.grad(loss, list(params.values()))

    ref = step("none")
    diff = {k: max(float((a - b).abs().max()) for a, b in zip(ref, step(k))) for k in WAYS[1:]}
    times = {k: [] for k in passes}
    for _ in range(repeats):
        for name in passes:
            step(name)  # warm
            t = time.process_time()
            for _ in range(steps):
                step(name)
            times[name].append((time.process_time() - t) / steps)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"slots": G, "batch": B, "step_cpu_s": times, "median_step_cpu_s": med,
            "samples_per_cpu_s": {k: G * B / v for k, v in med.items()},
            "speed_over_none": {k: med["none"] / med[k] for k in WAYS[1:]},
            "per_repeat_speed_over_none": {k: [a / b for a, b in zip(times["none"], times[k])] for k in WAYS[1:]},
            "max_abs_grad_diff_vs_none": diff}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--out", default=str(BENCH / "results" / "first_conv.md"))
    a = ap.parse_args(argv)
    import torch

    from machine import cpu_line, loadavg, machine

    m = machine(frameworks=False)
    cap = torch.backends.cpu.get_cpu_capability()
    load0, t0 = loadavg(), time.perf_counter()
    rows = []
    for name, model, kw, G, B in CASES:
        r = measure_case(model, kw, G, B, a.repeats, a.steps)
        r["case"] = name
        rows.append(r)
        print(f"{name}: " + ", ".join(f"{k} {r['median_step_cpu_s'][k] * 1e3:.1f} ms" for k in WAYS) + "; over none: "
              + ", ".join(f"{k} {r['speed_over_none'][k]:.2f}x" for k in WAYS[1:]), flush=True)
    from fedpaper.engine.grouped import per_slot_rule

    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": m, "cpu_capability": cap,
            "threads": torch.get_num_threads(), "load_before": load0, "load_after": loadavg(),
            "wall_s": round(time.perf_counter() - t0, 1), "repeats": a.repeats, "steps": a.steps,
            "rule_here": {c: per_slot_rule(c, "cpu")[1] for c in (1, 3)}, "argv": sys.argv[1:]}
    out = Path(a.out)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    lines = [
        "# The grouped pass's convolutions: grouped over the slots, or slot by slot", "",
        f"Generated by `benchmarks/bench_first_conv.py` on {meta['date']} (UTC); raw: "
        f"[`{out.with_suffix('.json').name}`]({out.with_suffix('.json').name}). Command:", "",
        f"    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/bench_first_conv.py {' '.join(sys.argv[1:])}", "",
        f"- CPU: {cpu_line(m)}; torch {m['torch']}, CPU capability {cap}, {meta['threads']} thread(s)",
        f"- Load average (1, 5, 15 min) before {load0}, after {meta['load_after']}; wall {meta['wall_s']} s",
        f"- The rule on this machine: 1-channel images: {meta['rule_here'][1]}; 3-channel: {meta['rule_here'][3]}", "",
        "One training step (forward, summed cross-entropy, backward to every parameter) of the engine's grouped "
        "pass, three ways (`per_slot`: none, first convolution, every layer up to the Flatten), interleaved in one process: "
        f"{a.repeats} repeats of {a.steps} steps; process CPU time per step, median over repeats.", "",
        "| case | none ms/step | first ms/step | features ms/step | first / none (per repeat) | features / none (per repeat) | max abs gradient difference vs none (first, features) |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        med = r["median_step_cpu_s"]
        sp, rep, d = r["speed_over_none"], r["per_repeat_speed_over_none"], r["max_abs_grad_diff_vs_none"]
        lines.append(f"| {r['case']} | " + " | ".join(f"{med[k] * 1e3:.1f}" for k in WAYS) + " | "
                     + " | ".join(f"**{sp[k]:.2f}x** ({', '.join(f'{x:.2f}' for x in rep[k])})" for k in WAYS[1:])
                     + f" | {d['first']:.1e}, {d['features']:.1e} |")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
