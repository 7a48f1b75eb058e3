"""Where the engine's LeNet round goes (bench_engine.py's LeNet workload), and whether the first convolution
has a faster form: the evidence behind issue 28's "LeNet >= 3x Flower" target.

    OMP_NUM_THREADS=1 FEDPAPER_DATA=../shared/data taskset -c 1 python benchmarks/profile_lenet_round.py \
        [--backend grouped] [--rounds 2] [--repeats 2] [--out benchmarks/results/lenet_round_<cpu>.md]

1. The workload of bench_engine.py's `lenet` model (FedAvg, 10 clients x 500 Fashion-MNIST images, Adam
   lr 0.001, batch 64, 1 local epoch; the same `flower_sim.client_rows`): one warm-up round, then the
   process CPU seconds of 3 rounds (samples per CPU second), then torch's profiler over `--rounds` rounds,
   operators grouped by input shape, by self CPU time.
2. The first convolution of the grouped pass (10 one-channel slots, 6 filters each, 5x5, batch 64,
   channels_last), forward and backward to its weights, two ways side by side, interleaved `--repeats`
   times: the grouped convolution the engine runs (oneDNN) and an im2col form (F.unfold, one batched
   matmul per slot): CPU ms per call and the largest difference of outputs and weight gradients.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CLIENTS, SAMPLES, BATCH, SEED = 10, 500, 64, 0


def trainer(backend: str):
    import numpy as np

    from fedpaper.algorithms import get_method
    from fedpaper.blocks.data import load_dataset
    from fedpaper.driver import FederatedTrainer
    from fedpaper.engine import Federation, Pools, TrainConfig
    from flower_sim import client_rows

    ds = load_dataset("fashion-mnist")
    rows = client_rows(ds, CLIENTS, SAMPLES, SEED)
    fed = Federation(rows, np.arange(10), seed=SEED)  # 10 test samples, as bench_engine: evaluation ~free
    cfg = TrainConfig(model="lenet", model_kwargs=dict(in_channels=1, image_size=28), optimizer="adam", lr=0.001,
                      batch_size=BATCH, local_epochs=1, rounds=1, backend=backend, precision="fp32")
    return FederatedTrainer(get_method("FedAvg"), cfg, Pools.from_dataset(ds), [fed], progress=False)


def first_conv_forms():
    """(grouped, im2col, check): closures running conv1's forward and weight backward."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(SEED)
    S, O, K, H = CLIENTS, 6, 5, 28
    Ho = H - K + 1
    x = torch.randn(BATCH, S, H, H).contiguous(memory_format=torch.channels_last)
    w = torch.randn(S * O, 1, K, K, requires_grad=True)
    b = torch.zeros(S * O, requires_grad=True)

    def grouped():
        y = F.conv2d(x, w, b, groups=S)
        y.backward(torch.ones_like(y))
        return y

    def im2col():
        cols = F.unfold(x, K).view(BATCH, S, K * K, Ho * Ho).permute(1, 2, 0, 3).reshape(S, K * K, BATCH * Ho * Ho)
        y = torch.bmm(w.view(S, O, K * K), cols).view(S, O, BATCH, Ho, Ho).permute(2, 0, 1, 3, 4)
        y = (y.reshape(BATCH, S * O, Ho, Ho) + b.view(1, -1, 1, 1)).contiguous(memory_format=torch.channels_last)
        y.backward(torch.ones_like(y))
        return y

    def check():
        out = []
        for f in (grouped, im2col):
            w.grad = b.grad = None
            out.append((f().detach(), w.grad.clone()))
        (y1, g1), (y2, g2) = out
        return float((y1 - y2).abs().max()), float((g1 - g2).abs().max())

    def timed(f, n=20):
        for _ in range(2):
            f()
        w.grad = b.grad = None
        t = time.process_time()
        for _ in range(n):
            f()
            w.grad = b.grad = None
        return (time.process_time() - t) / n * 1e3

    return {"grouped": lambda: timed(grouped), "im2col": lambda: timed(im2col)}, check


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="grouped")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    import torch
    from torch.profiler import ProfilerActivity, profile

    import machine as M

    torch.set_num_threads(1)
    m = M.machine(frameworks=False)
    load0 = list(__import__("os").getloadavg())
    lines = [f"# The engine's LeNet round, profiled (`{' '.join(['python benchmarks/profile_lenet_round.py'] + (argv or sys.argv[1:]))}`)",
             "", f"CPU: {m['cpu_model']} ({m['cpu_family_model']}), flags {' '.join(m['cpu_flags'])}; torch {m['torch']}, "
             f"capability {torch.backends.cpu.get_cpu_capability()}, 1 thread; load average before {load0}", ""]
    tr = trainer(a.backend)
    tr.run()  # warm-up
    t = time.process_time()
    for _ in range(3):
        tr.run()
    cpu = (time.process_time() - t) / 3
    lines += [f"## 1. Round of bench_engine's LeNet workload, backend {tr.backend}", "",
              f"{cpu:.3f} CPU s per round, **{CLIENTS * SAMPLES / cpu:,.0f} samples per CPU second** (3 rounds after a "
              "warm-up; no profiler)", ""]
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(a.rounds):
            tr.run()
    ev = sorted(prof.key_averages(group_by_input_shape=True), key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in ev)
    lines += [f"Profiler over {a.rounds} round(s): self CPU time {total / 1e3:.0f} ms", "",
              "| operator | input shapes | self CPU ms | share |", "|---|---|---:|---:|"]
    for e in ev[:a.top]:
        shapes = ", ".join(str(s) for s in (e.input_shapes or []) if s)[:90]
        lines.append(f"| {e.key} | {shapes} | {e.self_cpu_time_total / 1e3:.1f} | {100 * e.self_cpu_time_total / total:.1f} % |")
    forms, check = first_conv_forms()
    lines += ["", "## 2. The first convolution (10 one-channel slots x 6 filters, 5x5, batch 64), forward + weight "
              "backward, CPU ms per call (20 calls), interleaved", "", "| repeat | grouped (oneDNN) | im2col + bmm | ratio |",
              "|---|---:|---:|---:|"]
    for r in range(a.repeats):
        g, i = forms["grouped"](), forms["im2col"]()
        lines.append(f"| {r} | {g:.2f} | {i:.2f} | {i / g:.2f}x slower |" if i >= g else
                     f"| {r} | {g:.2f} | {i:.2f} | {g / i:.2f}x faster |")
    dy, dg = check()
    lines += ["", f"Max |difference|: output {dy:.3g}, weight gradient {dg:.3g}.",
              f"Load average after: {list(__import__('os').getloadavg())}", ""]
    text = "\n".join(lines)
    print(text)
    if a.out:
        a.out.write_text(text)


if __name__ == "__main__":
    main()
