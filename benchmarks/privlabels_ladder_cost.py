"""Runs and training sample-steps of each rung of the privlabels compute ladder
(fedpaper/papers/privlabels/ladder.py), counted from the specs its artifact function builds (Figs. 2
and 3: runs.main_specs of both data sets, the L = 10 runs shared as `runs.sweep` shares them), no
training:

    python benchmarks/privlabels_ladder_cost.py quick long

Sample-steps of a run: clients x images per client x local epochs x rounds, plus, for a central-tuning
method, server images x tuning epochs x rounds. CPU s at the rates of
benchmarks/results/privlabels_quick_sizing.md (150 images per client, batch 16, CNN 8-8-16-16/128,
per run and round: CIFAR-10 FedAvg 0.60 CPU s, Tuning-MSE 1.72; Fashion-MNIST 0.39 / 1.55), i.e.
client images 2,500 (CIFAR-10) / 3,846 (Fashion-MNIST) per CPU s and server tuning images 1,004 /
1,164 per CPU s.
"""
import sys

from fedpaper.papers.privlabels import runs
from fedpaper.papers.privlabels.ladder import LADDER

RATED_WIDTHS = [8, 8, 16, 16]  # the CNN the rates below were measured with
CLIENT_RATE = {"cifar10": 10 * 150 / 0.60, "fashion-mnist": 10 * 150 / 0.39}
TUNING_RATE = {"cifar10": 3 * 375 / (1.72 - 0.60), "fashion-mnist": 3 * 450 / (1.55 - 0.39)}


def count(p: dict) -> tuple:
    p = dict(p, seeds=list(range(p["seeds"])) if isinstance(p["seeds"], int) else p["seeds"])
    n_runs, steps, secs = 0, 0.0, 0.0
    for ds in ("cifar10", "fashion-mnist"):
        uniq = dict.fromkeys(runs.canonical(s, p) for s in runs.main_specs(p, ds, p["labels"]))
        for s in uniq:
            client = p["num_clients"] * p["samples_per_client"] * p["local_epochs"] * p["rounds"]
            tune = p["server_size"][ds] * p["tuning_epochs"] * p["rounds"] if "Tuning" in s.tags["display"] else 0
            n_runs += 1
            steps += client + tune
            secs += client / CLIENT_RATE[ds] + tune / TUNING_RATE[ds]
    return n_runs, steps, secs


if __name__ == "__main__":
    for profile in sys.argv[1:] or ["quick", "long"]:
        base, rungs = LADDER.rungs[profile]
        for r in rungs:
            p = dict(LADDER.rung_settings(profile, r), profile=base)
            n, steps, secs = count(p)
            rated = p["widths"] == RATED_WIDTHS
            print(f"{profile} {r.name} {r.overrides or 'profile itself'}: {n} runs, {steps / 1e6:.2f} M sample-steps, "
                  + (f"~{secs:.0f} CPU s" if rated else f"CNN {p['widths']}: no rate (the rates are the "
                     f"{RATED_WIDTHS} CNN's; ladder.py's docstring has the measured cost of each rung)"))
