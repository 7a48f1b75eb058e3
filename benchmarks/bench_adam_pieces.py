"""The engine's consuming Adam step in pieces (engine.optim.ADAM_PIECE) against the whole-tensor step, side by
side in one process: FedAvg rounds of the privlabels CNN (10 clients x 500 Fashion-MNIST samples, batch 64,
Adam, fp32, the engine benchmark's workload: benchmarks/bench_engine.py), alternating the two forms round by
round; the median round of each and their ratio. Both forms give bitwise the same numbers
(tests/algorithms/test_optim.py), so only the time differs.

    OMP_NUM_THREADS=1 python benchmarks/bench_adam_pieces.py --backends loop,grouped --rounds 4 \\
        --out benchmarks/results/adam_pieces.md
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default="loop,grouped")
    ap.add_argument("--rounds", type=int, default=4, help="timed rounds per form and backend (after one warm-up)")
    ap.add_argument("--out", default="benchmarks/results/adam_pieces.md")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    import bench_engine as be
    from machine import cpu_line, machine
    from fedpaper.algorithms import get_method
    from fedpaper.engine import FederatedTrainer, Federation, Pools, TrainConfig, optim
    from fedpaper.store import atomic_write_text

    w = argparse.Namespace(model="privlabels_cnn", seed=0, clients=10, samples=500, batch=64, lr=1e-3, data="prestd",
                           warmup=1, rounds=1, extra=0, threads=1)
    ds, rows, np, _ = be._setup(w)
    pools, fed = Pools.from_dataset(ds), Federation(rows, np.arange(10), seed=0)
    piece, rows_md = optim.ADAM_PIECE, []
    for backend in args.backends.split(","):
        cfg = TrainConfig(model=w.model, model_kwargs=be.MODELS[w.model], optimizer="adam", lr=w.lr,
                          batch_size=w.batch, local_epochs=1, rounds=1, backend=backend, precision="fp32")
        tr = FederatedTrainer(get_method("FedAvg"), cfg, pools, [fed], progress=False)
        tr.run()  # warm-up
        times = {"pieces": [], "whole": []}
        for _ in range(args.rounds):
            for form in times:
                optim.ADAM_PIECE = piece if form == "pieces" else 1 << 62
                t0 = time.perf_counter()
                tr.run()
                times[form].append(time.perf_counter() - t0)
        optim.ADAM_PIECE = piece
        med = {f: statistics.median(v) for f, v in times.items()}
        ratio = statistics.median(b / a for a, b in zip(times["pieces"], times["whole"]))
        rows_md.append(f"| {backend} | {med['pieces']:.2f} ({', '.join(f'{x:.2f}' for x in times['pieces'])}) | "
                       f"{med['whole']:.2f} ({', '.join(f'{x:.2f}' for x in times['whole'])}) | {ratio:.3f}x |")
        print(rows_md[-1], flush=True)
    m = machine()
    md = ["# Engine Adam in pieces against the whole-tensor step", "",
          f"`OMP_NUM_THREADS=1 python benchmarks/bench_adam_pieces.py --backends {args.backends} --rounds {args.rounds}`"
          f" ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}); {__doc__.split(chr(10) + chr(10))[0]}", "",
          f"- CPU: {cpu_line(m)}; torch {torch.__version__}, 1 thread; load average at the end {list(__import__('os').getloadavg())}",
          f"- ADAM_PIECE = {piece} elements", "",
          "| backend | pieces: s per round (median; each round) | whole tensor: s per round | speed-up (median of paired rounds) |",
          "|---|---|---|---:|", *rows_md, ""]
    atomic_write_text(Path(args.out), "\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
