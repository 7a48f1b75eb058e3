"""Time data loading (warm parse cache) and the papers' partitions on Fashion-MNIST and CIFAR-10.

    python benchmarks/bench_data.py [--repeats 5] [--out benchmarks/results/data_load.md]

Loads each data set once to warm the cache (parsing if needed), then times, per data set:
- load: load_dataset(name) from the parsed-array cache;
- fedpals: sparsity_partition(C=3, 10 clients) + resample_to_marginal of the test split to the
  target's (client 9's) marginal;
- privlabels: privlabels_split + private_label_partition(L=5, 10 clients, 2000 each).
Reports the median and minimum over repeats; the budget is 5 s for all steps together (medians).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fedpaper.blocks.data import load_dataset  # noqa: E402
from fedpaper.blocks.partition import (  # noqa: E402
    private_label_partition,
    privlabels_split,
    resample_to_marginal,
    sparsity_partition,
)

BUDGET_S = 5.0
DATASETS = ("fashion-mnist", "cifar10")


def timed(fn, repeats: int) -> tuple[float, float, object]:
    """(median seconds, min seconds, last result) of repeated calls."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), out


def fedpals_setting(y_train, y_test, seed=0):
    part = sparsity_partition(y_train, 10, 3, seed=seed)
    target = resample_to_marginal(y_test, part.marginals[9], seed=seed)
    return part, target


def privlabels_setting(y_train, seed=0):
    pool, val, server = privlabels_split(y_train, seed=seed)
    return private_label_partition(y_train, 10, 5, samples_per_client=2000, seed=seed, pool=pool)


def machine() -> dict:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {"nproc": os.cpu_count(), "cpu": model, "python": platform.python_version(),
            "numpy": np.__version__, "load": load}


def run(repeats: int) -> tuple[list, dict]:
    rows, notes = [], {}
    for name in DATASETS:
        t0 = time.perf_counter()
        ds = load_dataset(name)  # warm the cache (parses on the very first run)
        notes[name] = (time.perf_counter() - t0, ds.source, tuple(ds.x_train.shape))
        y_train, y_test = ds.y_train.numpy(), ds.y_test.numpy()
        med, low, _ = timed(lambda: load_dataset(name), repeats)
        rows.append((name, "load (warm cache)", med, low, f"{len(y_train)} + {len(y_test)} images"))
        med, low, (part, target) = timed(lambda: fedpals_setting(y_train, y_test), repeats)
        rows.append((name, "fedpals: sparsity C=3, 10 clients + target test resample", med, low,
                     f"client sizes {part.sizes.min()}-{part.sizes.max()}, target test {len(target)}"))
        med, low, priv = timed(lambda: privlabels_setting(y_train), repeats)
        rows.append((name, "privlabels: 80/20 split + L=5, 10 clients x 2000", med, low,
                     f"sizes {sorted(set(priv.sizes.tolist()))}"))
    return rows, notes


_FRESH = """
import time
t0 = time.perf_counter()
from fedpaper.blocks.data import load_dataset
t1 = time.perf_counter()
load_dataset({name!r})
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def fresh_process(name: str) -> tuple[float, float]:
    """(import seconds, load seconds) of a first load in a new Python process (warm cache)."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", _FRESH.format(name=name)], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1])


def table(rows) -> str:
    lines = ["| data set | step | median (s) | min (s) | check |", "|---|---|---:|---:|---|"]
    lines += [f"| {d} | {s} | {m:.3f} | {lo:.3f} | {c} |" for d, s, m, lo, c in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "data_load.md")
    args = ap.parse_args(argv)
    rows, notes = run(args.repeats)
    total = sum(r[2] for r in rows)
    info = machine()
    text = table(rows)
    verdict = "within" if total < BUDGET_S else "OVER"
    print(text)
    print(f"\ntotal (sum of medians): {total:.2f} s ({verdict} the {BUDGET_S:.0f} s budget)")
    first = "; ".join(f"{n}: {t:.2f} s ({src})" for n, (t, src, _) in notes.items())
    fresh = {n: fresh_process(n) for n in DATASETS}
    fresh_text = "; ".join(f"{n}: load {ld:.2f} s (after {imp:.2f} s to import fedpaper.blocks.data and torch)"
                           for n, (imp, ld) in fresh.items())
    print(f"fresh process: {fresh_text}")
    md = "\n".join([
        "# Data loading and partitioning times",
        "",
        f"Measured {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} by `benchmarks/bench_data.py "
        f"--repeats {args.repeats}` (median and minimum over repeats, after a first load that warms the "
        "parsed-array cache).",
        "",
        f"Machine: {info['nproc']} CPU cores (`nproc`), CPU model `{info['cpu']}`, Python {info['python']}, "
        f"numpy {info['numpy']}. Load average at the end of the run: "
        f"{info['load'][0]:.2f} / {info['load'][1]:.2f} / {info['load'][2]:.2f} (1/5/15 min); the machine is "
        "shared, so times vary with other users' load.",
        "",
        text,
        "",
        f"Total (sum of medians): **{total:.2f} s**, {verdict} the {BUDGET_S:.0f} s budget.",
        "",
        f"First load in this run (cache warm-up or parse): {first}.",
        "",
        f"First load in a new Python process (warm cache, file possibly in the OS page cache): {fresh_text}.",
        "A cold parse of the offline copies (no cache) takes about 1 s for Fashion-MNIST and 5-8 s each for "
        "the CIFAR-10 / CIFAR-100 JPEG zips on this machine; it happens once per source file.",
        "",
    ])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(md)
    print(f"wrote {args.out}")
    return 0 if total < BUDGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
