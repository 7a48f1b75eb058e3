"""glibc's malloc thresholds and one training step of a 224 px ResNet-18 (the paper profile's FedNCA-ML
backbone), side by side in one invocation:

    .venv/bin/python benchmarks/bench_allocator.py --out benchmarks/results/allocator_224px.md

Each contender runs in a fresh Python process (mallopt settings last for a process), builds
torchvision's ResNet-18 (channels_last, as the engine's CPU layout), and times forward + backward
(torch.autograd.grad, as the loop backend) of one batch of --batch 224x224 images, --steps steps after
one warm-up step. Contenders:

- `mmap-4MiB`: trim 8 MiB, mmap 4 MiB: what the engine set for large steps before (every buffer over
  4 MiB freshly mmapped and page-faulted in);
- `glibc-default`: no mallopt call (dynamic mmap threshold, 128 KiB rising to at most 32 MiB);
- `raised` (the engine's cpu.RAISED_THRESHOLDS: trim and mmap 1 GiB, every buffer from the heap).

Per contender: wall ms per step, user and system CPU seconds per step, minor page faults per step,
peak RSS, achieved GFLOP/s (FLOP per step counted by torch.utils.flop_counter: 1 multiply-add = 2
FLOP), its speed relative to `mmap-4MiB` (the baseline) and relative to this machine's fp32 ceiling
(the best of a 2048 x 2048 matrix product and a 3x3 convolution through oneDNN, all threads,
measured in the same invocation: `ceilings`).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

BENCH = Path(__file__).resolve().parent
for p in (str(BENCH.parent), str(BENCH)):
    if p not in sys.path:
        sys.path.insert(0, p)

from machine import cpu_line, loadavg, machine  # noqa: E402

CONTENDERS = {"mmap-4MiB": (8 << 20, 4 << 20), "glibc-default": None, "raised": (1 << 30, 1 << 30)}
BASELINE = "mmap-4MiB"

_CHILD = r"""
import ctypes, json, resource, sys, time
thresholds, batch, steps = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
if thresholds:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(-1, thresholds[0]); libc.mallopt(-3, thresholds[1])
import torch, torchvision
from torch.utils.flop_counter import FlopCounterMode
torch.manual_seed(0)
m = torchvision.models.resnet18(num_classes=10).to(memory_format=torch.channels_last)
x = torch.randn(batch, 3, 224, 224).to(memory_format=torch.channels_last)
y = torch.randint(0, 10, (batch,))
params = list(m.parameters())
def step():
    loss = torch.nn.functional.cross_entropy(m(x), y)
    torch.autograd.grad(loss, params)
with FlopCounterMode(display=False) as fc:
    step()
walls = []
r0 = resource.getrusage(resource.RUSAGE_SELF)
for _ in range(steps):
    t = time.perf_counter(); step(); walls.append(time.perf_counter() - t)
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"flop": fc.get_total_flops(), "walls": walls, "user": (r1.ru_utime - r0.ru_utime) / steps,
                  "sys": (r1.ru_stime - r0.ru_stime) / steps, "minflt": (r1.ru_minflt - r0.ru_minflt) / steps,
                  "maxrss_kb": r1.ru_maxrss, "threads": torch.get_num_threads()}))
"""


def _rate(fn, flop: float, repeats: int) -> float:
    for _ in range(2):
        fn()
    t = time.perf_counter()
    for _ in range(repeats):
        fn()
    return flop * repeats / (time.perf_counter() - t) / 1e9


def ceilings(repeats: int = 10) -> dict:
    """GFLOP/s of this machine's best fp32 kernels, all threads: a 2048 x 2048 matrix product (MKL)
    and a 3x3 convolution of 256 channels at 56 x 56, batch 16, channels_last (oneDNN, the kernels
    of the ResNet-18's step)."""
    import torch

    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    x = torch.randn(16, 256, 56, 56).to(memory_format=torch.channels_last)
    w = torch.randn(256, 256, 3, 3).to(memory_format=torch.channels_last)
    with torch.no_grad():
        return {"matmul 2048 (MKL)": _rate(lambda: a @ b, 2 * n ** 3, repeats),
                "conv 3x3 256ch 56px (oneDNN)": _rate(lambda: torch.nn.functional.conv2d(x, w, padding=1),
                                                      2 * 16 * 256 * 56 * 56 * 256 * 9, repeats)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32, help="images per step (FedNCA-ML's paper batch: 32)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here (and a .json beside it)")
    args = ap.parse_args(argv)
    m = machine(frameworks=False)
    load0 = loadavg()
    ceil = ceilings()
    ceiling = max(ceil.values())
    rows = {}
    for name, th in CONTENDERS.items():
        out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(th), str(args.batch), str(args.steps)],
                             capture_output=True, text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        r["wall"] = statistics.median(r["walls"])
        r["gflops"] = r["flop"] / r["wall"] / 1e9
        rows[name] = r
        print(f"{name}: {r['wall'] * 1e3:.0f} ms/step, user {r['user']:.2f} s, sys {r['sys']:.2f} s, "
              f"{r['minflt']:.0f} minor faults, {r['gflops']:.0f} GFLOP/s", flush=True)
    load1 = loadavg()
    base = rows[BASELINE]["wall"]
    lines = [f"# One 224 px ResNet-18 training step (batch {args.batch}) under glibc malloc thresholds",
             "", f"`.venv/bin/python benchmarks/bench_allocator.py --batch {args.batch} --steps {args.steps}`, "
             f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC.", "",
             f"Machine: {cpu_line(m)}; torch {m['torch']}, {rows[BASELINE]['threads']} threads; "
             f"load {load0} -> {load1}.", "",
             "Ceiling (the best fp32 kernel measured here, all threads): " + ", ".join(
                 f"{k} {v:.0f} GFLOP/s" for k, v in ceil.items()) + f": **{ceiling:.0f} GFLOP/s**. "
             f"FLOP per step (forward + backward, flop_counter): {rows[BASELINE]['flop'] / 1e9:.0f} G.", "",
             "| thresholds (trim, mmap) | ms per step (median) | user s / step | system s / step | minor faults / step "
             "| peak RSS | GFLOP/s | speed vs mmap-4MiB | share of the ceiling |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        th = CONTENDERS[name]
        label = f"{name} ({th[0] >> 20} MiB, {th[1] >> 20} MiB)" if th else name
        lines.append(f"| {label} | {r['wall'] * 1e3:.0f} | {r['user']:.2f} | {r['sys']:.2f} | {r['minflt']:,.0f} | "
                     f"{r['maxrss_kb'] / 2**20:.2f} GiB | {r['gflops']:.0f} | {base / r['wall']:.2f}x | "
                     f"{r['gflops'] / ceiling:.0%} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps({"machine": m, "ceilings_gflops": ceil, "load": [load0, load1],
                                                             "batch": args.batch, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
