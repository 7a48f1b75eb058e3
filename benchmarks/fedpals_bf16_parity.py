"""Does bf16 change FedPALS's results? fp32 against bf16 autocast on real runs of the LeNet, side by side
(issue 28: bf16 only for models whose parity with fp32 is shown on a real run).

    OMP_NUM_THREADS=1 FEDPAPER_DATA=../shared/data python benchmarks/fedpals_bf16_parity.py quick \
        --out benchmarks/results/fedpals_bf16_parity.md

Every Table 1 row of the profile (all 7 methods, the profile's lambda grid for FedPALS, its seeds) is
trained twice, the specs identical but for TrainConfig.precision ("fp32", the profiles' own, and
"bf16"); runs go through `run_specs` into the results cache (FEDPAPER_CACHE), so the fp32 runs are the
profile's own and are reused where present. For each (row, method, lambda) the per-seed best test
accuracy (at the best target-validation round, as Table 1 reports it) is paired across precisions:
the table gives the fp32 and bf16 means, the mean paired difference and its seed standard deviation,
and the rule: parity when |mean difference| <= the larger of the two precisions' seed standard
deviations (precision.md's rule for the privlabels CNN). Where bf16 is not native (bf16_native),
resolve_precision trains it in fp32 and the script says so instead of comparing.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fedpaper.papers import fedpals as F  # noqa: E402
from fedpaper.papers.fedpals import runs as R, train as TR  # noqa: E402


def with_precision(spec, precision: str):
    return dataclasses.replace(spec, training={**spec.training, "precision": precision})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile", nargs="?", default="quick")
    ap.add_argument("--out", default=None, help="write the markdown table here (and its .json beside it)")
    a = ap.parse_args(argv)
    from machine import cpu_line, machine

    from fedpaper.engine.cpu import bf16_native
    from fedpaper.experiment import run_specs

    native, why = bf16_native("cpu")
    if not native:
        raise SystemExit(f"bf16 is not native here ({why}): the bf16 runs would train in fp32; nothing to compare")
    data_root = os.environ.get("FEDPAPER_DATA")
    p = F._params(a.profile, "table1")
    p["seeds"] = list(range(p["seeds"])) if isinstance(p["seeds"], int) else p["seeds"]  # as the artifacts draw them
    rows, cells = [], []
    t0, c0 = time.perf_counter(), time.process_time()
    for dataset, split in TR.table1_settings(p):
        specs = R.method_specs(p, dataset, split, R.TABLE1_METHODS, p["seeds"], data_root)
        res = {}
        for prec in ("fp32", "bf16"):
            res[prec] = run_specs([with_precision(s, prec) for s in specs], data_root, execution=R.execution(),
                                  desc=f"{dataset} {R.label_setting(split)} {prec}", max_batch=TR.runs_per_engine_call())
        by = {}
        for s, r32, r16 in zip(specs, res["fp32"], res["bf16"]):
            key = (s.tags["method"] + (" (oracle)" if s.partition.get("oracle") else ""), s.tags.get("lam"))
            by.setdefault(key, []).append((100 * r32["best"]["test_acc"], 100 * r16["best"]["test_acc"]))
        for (method, lam), pairs in by.items():
            f32, b16 = [x for x, _ in pairs], [y for _, y in pairs]
            d = [y - x for x, y in pairs]
            sd = max(statistics.stdev(f32), statistics.stdev(b16)) if len(pairs) > 1 else float("nan")
            cell = {"dataset": dataset, "label_split": R.label_setting(split), "method": method, "lam": lam,
                    "fp32": f32, "bf16": b16, "diff_mean": statistics.mean(d),
                    "diff_sd": statistics.stdev(d) if len(d) > 1 else float("nan"), "seed_sd": sd,
                    "parity": abs(statistics.mean(d)) <= sd}
            cells.append(cell)
            print(f"{dataset} {cell['label_split']} {method} lam={lam}: fp32 {statistics.mean(f32):.1f} bf16 "
                  f"{statistics.mean(b16):.1f} diff {cell['diff_mean']:+.2f} (seed sd {sd:.2f}) "
                  f"{'parity' if cell['parity'] else 'OUTSIDE seed noise'}", flush=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n_ok = sum(c["parity"] for c in cells)
    diffs = [c["diff_mean"] for c in cells]
    per_run = sorted(abs(y - x) for c in cells for x, y in zip(c["fp32"], c["bf16"]))
    print(f"# {n_ok} of {len(cells)} cells within seed noise; mean difference over cells {statistics.mean(diffs):+.2f} "
          f"points, median |difference| {statistics.median(abs(x) for x in diffs):.2f}; per run: median "
          f"|bf16 - fp32| {statistics.median(per_run):.2f}, {sum(d <= 1 for d in per_run)} of {len(per_run)} within 1 "
          f"point; {wall:.0f} s wall, {cpu:.0f} s CPU")
    if not a.out:
        return
    m = machine(frameworks=False)
    out = Path(a.out)
    L = ["# FedPALS Table 1 in fp32 and in bf16: parity on real runs (LeNet)", "",
         f"Generated by `benchmarks/fedpals_bf16_parity.py` on {datetime.now(timezone.utc).isoformat(timespec='seconds')} "
         f"(UTC); raw numbers in [`{out.with_suffix('.json').name}`]({out.with_suffix('.json').name}):", "",
         f"    OMP_NUM_THREADS=1 FEDPAPER_DATA=../shared/data python benchmarks/fedpals_bf16_parity.py {a.profile} --out {out}",
         "", f"CPU: {cpu_line(m)}; torch {m['torch']}; bf16 native ({why}). The {a.profile} profile's Table 1 "
         f"({len(p['seeds'])} seeds, its rounds and partition fractions, the lambda grid {p['ess_grid']}); best test "
         f"accuracy at the best target-validation round, per seed, paired. {wall:.0f} s wall, {cpu:.0f} s CPU for "
         "the runs not already cached.", "",
         "| row | method | fp32 (seeds) | bf16 (seeds) | bf16 - fp32, mean (sd) | seed sd | within seed noise |",
         "|---|---|---|---|---|---|---|"]
    for c in cells:
        name = c["method"] + (f" (lambda {c['lam']:g})" if c["lam"] is not None else "")
        L.append(f"| {c['dataset']} {c['label_split']} | {name} | {'/'.join(f'{v:.1f}' for v in c['fp32'])} | "
                 f"{'/'.join(f'{v:.1f}' for v in c['bf16'])} | {c['diff_mean']:+.2f} ({c['diff_sd']:.2f}) | "
                 f"{c['seed_sd']:.2f} | {'yes' if c['parity'] else '**no**'} |")
    L += ["", f"**{n_ok} of {len(cells)} cells within seed noise** (|mean difference| <= the larger seed standard "
          f"deviation); mean difference over cells {statistics.mean(diffs):+.2f} points, median |difference| "
          f"{statistics.median(abs(x) for x in diffs):.2f}. Per run (paired by seed): median |bf16 - fp32| "
          f"{statistics.median(per_run):.2f} points, {sum(d <= 1 for d in per_run)} of {len(per_run)} runs within 1 point, "
          f"largest {per_run[-1]:.1f}. The seed spread of this profile is wide (small partitions, 20 rounds), so the "
          "seed-noise rule is a weak test; the per-run differences say more."]
    out.write_text("\n".join(L) + "\n")
    out.with_suffix(".json").write_text(json.dumps({"machine": m, "profile": a.profile, "cells": cells,
                                                    "wall_s": wall, "cpu_s": cpu}, indent=1, default=str))


if __name__ == "__main__":
    main()
