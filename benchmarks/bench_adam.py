"""The engine's Adam step (engine.optim.opt_step: torch.optim's fused kernel on each active slot)
against the element-wise formula it replaced and against torch.optim.Adam as a plain loop uses it,
on the stacked parameters of 10 slots of a CNN, side by side in one process.

    OMP_NUM_THREADS=1 taskset -c 1 .venv/bin/python benchmarks/bench_adam.py --repeats 7 \
        --out benchmarks/results/adam_fused.md

Contenders, each timed on the same [10, ...] parameters (the grouped/loop backends' stacked layout,
engine.grouped.stacked_layout: channels_last conv weights), gradients drawn afresh per step:
- engine: opt_step(..., consume=True), as the trainer calls it;
- element-wise (before): the formula of opt_step's Adam up to commit c17dc19, written out here as the
  baseline in its whole-tensor form: m = m0 + c1 (g - m0), v = v0 + c2 (g g - v0),
  p - s1 m / (sqrt(v) / s2 + eps), one tensor at a time over all slots (about 15 element-wise passes).
  Up to c17dc19 the engine ran it on CPU in cache-sized pieces, 1.05x a whole paper-CNN round over
  this form (177 -> 74 ms for the 3136 x 512 weight of 10 slots; that benchmark left with that code);
- torch.optim.Adam (foreach), one optimiser per slot, as a plain per-client loop steps its model.
The rate is milliseconds per step (median over repeats; the order of contenders rotates per repeat)
and the ratio is taken per repeat.
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
for p in (str(REPO), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

from machine import cpu_line, loadavg, machine  # noqa: E402

NETS = {"privlabels CNN 32-32-64-64/512 (the paper's)": ("privlabels_cnn", dict(widths=(32, 32, 64, 64), hidden=512)),
        "privlabels CNN 8-8-16-16/128 (quick)": ("privlabels_cnn", dict(widths=(8, 8, 16, 16), hidden=128))}
CONTENDERS = ("engine", "element-wise (before)", "torch.optim.Adam per slot")


def elementwise_adam(params, grads, state, lr, b1=0.9, b2=0.999, eps=1e-8):
    """The replaced formula (all slots active), one tensor at a time."""
    import torch
    t = state["t"] + 1
    bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
    new_p, m_new, v_new = {}, {}, {}
    for k, p in params.items():
        sh = (-1,) + (1,) * (p.dim() - 1)
        g, m0, v0 = grads[k], state["m"][k], state["v"][k]
        c1, c2 = torch.full((p.shape[0],), 1 - b1).view(sh), torch.full((p.shape[0],), 1 - b2).view(sh)
        s2, s1 = bc2.sqrt().view(sh), (lr / bc1).view(sh)
        m = torch.sub(g, m0).mul_(c1).add_(m0)
        v = torch.mul(g, g).sub_(v0).mul_(c2).add_(v0)
        denom = v.sqrt().div_(s2).add_(eps)
        new_p[k] = torch.sub(p, torch.mul(m, s1).div_(denom))
        m_new[k], v_new[k] = m, v
    return new_p, {"m": m_new, "v": v_new, "t": t}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slots", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default=None, help="write a markdown table here (and its .json beside it)")
    a = ap.parse_args(argv)
    import torch

    from fedpaper.engine.grouped import stacked_layout
    from fedpaper.engine.optim import opt_init, opt_step
    from fedpaper.blocks.models import build_model

    m = machine(frameworks=False)
    started, load0 = datetime.now(timezone.utc).isoformat(timespec="seconds"), loadavg()
    G, cells = a.slots, []
    for name, (model, kw) in NETS.items():
        one = build_model(model, in_channels=1, image_size=28, **kw)
        base = {k: stacked_layout(torch.stack([v.detach()] * G)) for k, v in one.named_parameters()}
        n = sum(v.numel() for v in base.values())
        p = {c: {k: v.clone() for k, v in base.items()} for c in CONTENDERS}
        st = {c: opt_init(p[c], "adam") for c in CONTENDERS[:2]}
        slots = [{k: v[i].clone().requires_grad_(True) for k, v in base.items()} for i in range(G)]
        opts = [torch.optim.Adam(list(s.values()), lr=1e-3, foreach=True) for s in slots]
        active = torch.ones(G, dtype=torch.bool)
        times = {c: [] for c in CONTENDERS}

        def step(c):
            g = {k: torch.randn_like(v) for k, v in base.items()}
            t0 = time.perf_counter()
            if c == "engine":
                p[c], st[c] = opt_step(p[c], g, st[c], "adam", 1e-3, active, consume=True)
            elif c == "element-wise (before)":
                p[c], st[c] = elementwise_adam(p[c], g, st[c], 1e-3)
            else:
                for i, (s, o) in enumerate(zip(slots, opts)):
                    for k, v in s.items():
                        v.grad = g[k][i]
                    o.step()
            return time.perf_counter() - t0

        for c in CONTENDERS:  # warm-up
            step(c)
        for r in range(a.repeats):
            order = CONTENDERS[r % 3:] + CONTENDERS[:r % 3]
            for c in order:
                times[c].append(step(c))
        med = {c: statistics.median(times[c]) * 1e3 for c in CONTENDERS}
        ratios = {c: [b / e for b, e in zip(times[c], times["engine"])] for c in CONTENDERS[1:]}
        cells.append({"net": name, "slots": G, "params_per_slot": n // G, "ms_per_step": med,
                      "times_s": times, "ratio_vs_engine": {c: statistics.median(v) for c, v in ratios.items()}})
        print(name, {c: round(v, 1) for c, v in med.items()}, {c: round(statistics.median(v), 2) for c, v in ratios.items()},
              flush=True)
    load1 = loadavg()
    if a.out:
        cmd = "OMP_NUM_THREADS=1 taskset -c 1 .venv/bin/python benchmarks/bench_adam.py " + " ".join(argv or sys.argv[1:])
        out = Path(a.out)
        out.with_suffix(".json").write_text(json.dumps({"started": started, "machine": m, "load_before": load0,
                                                         "load_after": load1, "command": cmd, "cells": cells}, indent=1))
        lines = ["# The engine's Adam step: torch's fused kernel per slot against the element-wise formula it replaced", "",
                 f"Generated by `benchmarks/bench_adam.py` on {started} (UTC); raw numbers in [`{out.with_suffix('.json').name}`]"
                 f"({out.with_suffix('.json').name}):", "", "    " + cmd, "",
                 f"CPU: {cpu_line(m)}; torch {m['torch']}, {torch.get_num_threads()} thread(s); load average (1 min) "
                 f"{load0[0]:.2f} before, {load1[0]:.2f} after. One Adam step on {G} slots' stacked parameters, all active; "
                 f"milliseconds per step, median of {a.repeats} repeats (contender order rotating); ratios per repeat.", "",
                 "| parameters | per slot | engine (fused) ms | element-wise (before) ms | torch.optim.Adam per slot ms "
                 "| before / engine | torch.optim / engine |", "|---|---:|---:|---:|---:|---:|---:|"]
        for c in cells:
            ms, r = c["ms_per_step"], c["ratio_vs_engine"]
            lines.append(f"| {c['net']} | {c['params_per_slot']:,} | {ms['engine']:.1f} | {ms['element-wise (before)']:.1f} | "
                         f"{ms['torch.optim.Adam per slot']:.1f} | {r['element-wise (before)']:.2f}x | "
                         f"{r['torch.optim.Adam per slot']:.2f}x |")
        out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
