"""Side-by-side accuracy of fp32 and bf16 training (issue #14, "Speed first"): the same runs, the
same seeds, only TrainConfig.precision differs.

    OMP_NUM_THREADS=1 FEDPAPER_DATA=/work/shared/data nice -n 10 .venv/bin/python benchmarks/bf16_accuracy.py \
        --task cifar10-cnn --seeds 0 1 2

Tasks (each a small real privlabels-like run through the batched engine, FedAvg, full participation):
- cifar10-cnn: CIFAR-10, 10 clients x 500 training images drawn at random per seed, the privlabels
  CNN (32-32-64-64, hidden 512, dropout 0.5), Adam lr 1e-3, batch 64, 1 local epoch, 10 rounds;
- fmnist-lenet: Fashion-MNIST, the same layout with the FedPALS LeNet, SGD lr 0.01, batch 32.
Final test accuracy on 2,000 test images per seed (drawn per seed). Prints a markdown table: per
seed, fp32 and bf16 accuracy, and the mean +- std over seeds per precision; the difference is
judged against seed noise (|mean difference| <= the larger of the two seed standard deviations,
and a paired t-interval of the per-seed differences).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TASKS = {
    "cifar10-cnn": dict(data="cifar10", model="privlabels_cnn", optimizer="adam", lr=1e-3, batch_size=64),
    "fmnist-lenet": dict(data="fashion-mnist", model="lenet", optimizer="sgd", lr=0.01, batch_size=32),
}


def federations(pools, seeds, clients, per_client, n_test):
    from fedpaper.engine import Federation

    feds = []
    for s in seeds:
        rng = np.random.default_rng([s, 14])
        train = rng.permutation(len(pools.x_train))[: clients * per_client]
        test = np.sort(rng.permutation(len(pools.x_test))[:n_test])
        feds.append(Federation([np.sort(c) for c in np.split(train, clients)], test, seed=s))
    return feds


def run(task, precision, pools, feds, rounds):
    from fedpaper.algorithms.methods import get_method
    from fedpaper.driver import train
    from fedpaper.engine import TrainConfig

    t = TASKS[task]
    kw = dict(in_channels=int(pools.x_train.shape[1]), image_size=int(pools.x_train.shape[-1]), num_classes=10)
    cfg = TrainConfig(model=t["model"], model_kwargs=kw, optimizer=t["optimizer"], lr=t["lr"],
                      batch_size=t["batch_size"], rounds=rounds, eval_every=rounds, precision=precision)
    t0 = time.perf_counter()
    res = train(get_method("FedAvg"), cfg, pools, feds, progress=False)
    h = res.history
    acc = {int(r.seed): float(r.test_acc) for r in h[h["round"] == rounds].itertuples()}
    return acc, time.perf_counter() - t0, res.log["backend"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=sorted(TASKS), default="cifar10-cnn")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--per-client", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--test", type=int, default=2000)
    args = ap.parse_args(argv)

    import torch

    from fedpaper.blocks.data.registry import load_dataset
    from fedpaper.engine import Pools

    ds = load_dataset(TASKS[args.task]["data"], root=os.environ.get("FEDPAPER_DATA"))
    pools = Pools.from_dataset(ds)
    feds = federations(pools, args.seeds, args.clients, args.per_client, args.test)
    out = {}
    for precision in ("fp32", "bf16"):
        out[precision] = run(args.task, precision, pools, feds, args.rounds)
        acc = ", ".join(f"seed {k} {v:.4f}" for k, v in out[precision][0].items())
        print(f"# {precision}: {out[precision][1]:.0f} s train+eval ({out[precision][2]} backend); test acc {acc}",
              flush=True)
    fp, bf = out["fp32"][0], out["bf16"][0]
    print(f"\n{args.task}: {args.clients} clients x {args.per_client} images, {args.rounds} rounds, FedAvg, "
          f"test {args.test} images/seed, torch {torch.__version__}, threads {torch.get_num_threads()}\n")
    print("| seed | fp32 acc | bf16 acc | bf16 - fp32 |\n|---|---|---|---|")
    diffs = []
    for s in args.seeds:
        diffs.append(bf[s] - fp[s])
        print(f"| {s} | {fp[s]:.4f} | {bf[s]:.4f} | {diffs[-1]:+.4f} |")
    m = {p: (statistics.mean(a.values()), statistics.stdev(a.values()) if len(a) > 1 else float("nan"))
         for p, a in (("fp32", fp), ("bf16", bf))}
    print(f"| mean +- std | {m['fp32'][0]:.4f} +- {m['fp32'][1]:.4f} | {m['bf16'][0]:.4f} +- {m['bf16'][1]:.4f} "
          f"| {statistics.mean(diffs):+.4f} |")
    noise = max(m["fp32"][1], m["bf16"][1])
    if len(diffs) > 1:
        from scipy import stats

        half = stats.t.ppf(0.975, len(diffs) - 1) * statistics.stdev(diffs) / len(diffs) ** 0.5
        print(f"\npaired difference bf16 - fp32: {statistics.mean(diffs):+.4f}, 95% t-interval (n={len(diffs)}) "
              f"[{statistics.mean(diffs) - half:+.4f}, {statistics.mean(diffs) + half:+.4f}]")
    within = abs(m["bf16"][0] - m["fp32"][0]) <= noise
    print(f"|mean difference| {abs(m['bf16'][0] - m['fp32'][0]):.4f} vs seed std {noise:.4f}: "
          f"{'within' if within else 'OUTSIDE'} seed noise")


if __name__ == "__main__":
    main()
