"""The smoke, quick, long and paper profiles of the private-label-sets artifacts (targets/privlabels.md).

`SETTINGS[profile]` holds everything a run needs (data, partition, model, training, grids);
`NOTES[profile]` lists every shrinkage relative to the paper: it goes into each artifact's
provenance (info["notes"]) and, shortened, into the figure subtitle (`subtitle`).

The paper profile is the paper's setting (App A, Tables 1-2) with the targets file's defaults
where it is vague: m = 10 clients (vague-1), the Keras-like CNN 32-32-64-64 / 512 (vague-2),
global stratified 80/20 split (vague-3), 5,000 / 6,000 unlabeled server images (vague-4), Adam
lr 1e-3, batch 64, E = 1, 100 rounds, FedProx mu 0.01, FedRS alpha 0.5, 3 tuning epochs per
round, 10 seeds (3 for the epoch ablation, vague-13), L = 2..10 (vague-15).

Sizing of the CPU profiles (measured, not guessed). The sweep has about 270 runs
(per data set 54 plain FedAvg/FedProx/FedRS runs and 48 central-tuning runs at L = 2, 3, 5, 10 x 3
seeds, after the L = 10 identities are shared; plus the CIFAR-10 epoch ablation, E = 1, 3, 5 at
L = 5, 6 methods x 3 seeds). A run's cost is set by images x rounds; central tuning adds the 10
client models' predictions on the server set and 3 epochs over it, more than a plain run. Probe
(process CPU seconds of one engine batch per cost class, one round, extrapolated to the sweep's
run counts and rounds; data loading and notebook start-up not included):

    OMP_NUM_THREADS=1 FEDPAPER_DATA=... python -m fedpaper.papers.privlabels.probe --profile quick --rounds 1
    OMP_NUM_THREADS=1 FEDPAPER_DATA=... python -m fedpaper.papers.privlabels.probe --profile long --rounds 1
    ... --learn  (trains L = 10 FedAvg and private L = 2 FedAvg / Tuning-MSE at full size: does it learn?)

The probe's CPU seconds per run and round, the sweep estimates and the `--learn` accuracies are
kept with the benchmark results. What they decided:
- quick (100 images per client, 3 rounds) fits the quick budget but does NOT learn CIFAR-10 (at
  chance) and learns Fashion-MNIST only partly: the whole sweep is about 270 runs, and a CIFAR-10
  run of this CNN needs about 10 rounds at 200 images per client to learn. The quick profile
  produces every artifact; its claims are mostly "not testable at this scale".
- long (200 images per client, 10 rounds) learns CIFAR-10 above chance (public FedAvg, L = 10).
- batch 16 rather than the paper's 64: the step cost here is mostly per-step overhead, and at 200
  images per client batch 64 gives 4 steps per round; batch 16 gives 4x the steps (local and
  tuning) for much less than 4x the CPU.
"""
from __future__ import annotations

import copy
from fedpaper.engine.cpu import resolve_precision
from fedpaper.outputs.parameters import APPLIED_KEY
from fedpaper.runs.experiment import default_device

PAPER_L = [2, 3, 4, 5, 6, 7, 8, 9, 10]  # vague-15

_PAPER = {
    "num_clients": 10,  # vague-1
    "samples_per_client": 2000,  # Sec 5.1 / App A
    "val_fraction": 0.2,  # vague-3
    "server_size": {"cifar10": 5000, "fashion-mnist": 6000},  # vague-4
    "val_eval": None, "test_eval": None,  # None: the whole validation split / official test set
    "widths": [32, 32, 64, 64], "hidden": 512, "dropout": 0.5,  # vague-2
    "optimizer": "adam", "lr": 1e-3, "batch_size": 64, "local_epochs": 1, "rounds": 100,  # Table 2
    "mu": 0.01, "fedrs_alpha": 0.5, "tuning_epochs": 3,  # Table 2, App A
    "seeds": 10, "labels": PAPER_L,
    "pairwise_all_labels": PAPER_L,  # vague-7: the all-pairs variant at every L
    "epochs": {"E": [1, 3, 5], "labels": PAPER_L, "fig11_L": 5, "seeds": 3, "rounds": 100,
               "tuning_optimizer": "sgd", "tuning_lr": 1e-3},  # vague-13
    "rounds_L": 5,  # vague-12
    "eval_batch": 1024,
    "share_L10": False,
    # run the L = 10 identities (private = public FedAvg, FedRS = FedAvg) as real runs (checks)
    "backend": "auto",  # engine backend: speed only, never results
    "precision": "fp32",  # TrainConfig.precision (part of the run key)
}

# Sizes of the CPU profiles (measured: see the module docstring). The precision is what the profile
# asks for; settings() uses it only where bf16 is native (fp32 elsewhere).
QUICK_SPC, QUICK_ROUNDS, QUICK_BATCH, QUICK_PRECISION = 100, 3, 16, "bf16"
LONG_SPC, LONG_ROUNDS, LONG_BATCH, LONG_PRECISION = 200, 10, 16, "bf16"

def paper_ratio_server(samples_per_client: int, num_clients: int = 10) -> dict:
    """Unlabeled server set in the paper's ratio to the clients' data (App A, vague-4): 5,000 per
    10 x 2,000 CIFAR-10 client images (1/4), 6,000 per 20,000 Fashion-MNIST ones (3/10)."""
    n = samples_per_client * num_clients
    return {d: int(round(n * v / (_PAPER["num_clients"] * _PAPER["samples_per_client"])))
            for d, v in _PAPER["server_size"].items()}


def _sized(base: dict, spc: int, rounds: int, batch: int, **kw) -> dict:
    """A CPU profile: `spc` images per client, the server set in the paper's ratio to the clients'
    data, the epoch ablation at L = 5 only (Figs 12/13 then show one L) and at the main sweep's rounds
    (so its E = 1 FedAvg runs are the main sweep's runs, read from the cache)."""
    p = dict(base, samples_per_client=spc, server_size=paper_ratio_server(spc, base["num_clients"]),
             batch_size=batch, rounds=rounds, seeds=3, labels=[2, 3, 5, 10],
             pairwise_all_labels=[2],  # where a label held by no client is likely (App B)
             epochs={"E": [1, 3, 5], "labels": [5], "fig11_L": 5, "seeds": 3, "rounds": rounds,
                     "tuning_optimizer": "sgd", "tuning_lr": 1e-3},
             eval_batch=1024, share_L10=True,
             backend="grouped")  # the fastest backend for this small CNN on the 2-core CPU (engine benchmark)
    p.update(kw)
    return p


_QUICK = _sized(_PAPER, spc=QUICK_SPC, rounds=QUICK_ROUNDS, batch=QUICK_BATCH, val_eval=500, test_eval=1000,
                widths=[8, 8, 16, 16], hidden=128, precision=QUICK_PRECISION)

_LONG = _sized(_PAPER, spc=LONG_SPC, rounds=LONG_ROUNDS, batch=LONG_BATCH, val_eval=1000, test_eval=2000,
               widths=[8, 8, 16, 16], hidden=128, precision=LONG_PRECISION)

_SMOKE = dict(
    _PAPER,
    samples_per_client=16,
    server_size={"cifar10": 32, "fashion-mnist": 32},
    val_eval=40, test_eval=60,
    widths=[2, 2, 4, 4], hidden=16,
    batch_size=16,
    rounds=2, seeds=2, labels=[3, 5],
    pairwise_all_labels=[5],
    epochs={"E": [1, 3], "labels": [3, 5], "fig11_L": 5, "seeds": 2, "rounds": 2,
            "tuning_optimizer": "sgd", "tuning_lr": 1e-3},
    eval_batch=256, share_L10=True, backend="grouped",
    stand_ins={
        "fashion-mnist": {"num_classes": 10, "n_train": 600, "n_test": 100, "shape": [1, 16, 16], "seed": 0},
        "cifar10": {"num_classes": 10, "n_train": 600, "n_test": 100, "shape": [3, 16, 16], "seed": 1},
    },
)

SETTINGS = {"paper": _PAPER, "long": _LONG, "quick": _QUICK, "smoke": _SMOKE}


def _shrinkage(p: dict) -> list[str]:
    """Every difference from the paper profile, in words."""
    q, notes = _PAPER, []
    if p["samples_per_client"] != q["samples_per_client"]:
        notes.append(f"{p['samples_per_client']} samples per client instead of 2,000")
    if p["server_size"] != q["server_size"]:
        ratio = " (the paper's ratio to the clients' data)" if p["server_size"] == paper_ratio_server(
            p["samples_per_client"], p["num_clients"]) else ""
        notes.append("unlabeled server set " + ", ".join(f"{k} {v}" for k, v in p["server_size"].items())
                     + f"{ratio} instead of 5,000 (CIFAR-10) / 6,000 (Fashion-MNIST)")
    if p["val_eval"] or p["test_eval"]:
        notes.append("snapshot selection on " + (f"a random {p['val_eval']}-image subset of " if p["val_eval"] else "")
                     + "the 20% validation split, test accuracy on "
                     + (f"a random {p['test_eval']}-image subset of " if p["test_eval"] else "the whole of ")
                     + "the official test set (subsets drawn per seed)" + _se_note(p))
    if (p["widths"], p["hidden"]) != (q["widths"], q["hidden"]):
        notes.append(f"CNN widths {tuple(p['widths'])}, hidden {p['hidden']} instead of (32, 32, 64, 64), 512")
    if p["batch_size"] != q["batch_size"]:
        notes.append(f"batch {p['batch_size']} instead of 64 for local training and central tuning")
    if p.get("precision", "fp32") != q["precision"]:
        notes.append(f"{p['precision']} autocast for forward/backward (fp32 master weights and optimiser state) "
                     "instead of fp32")
    if p["rounds"] != q["rounds"]:
        notes.append(f"{p['rounds']} rounds instead of 100")
    if p["seeds"] != q["seeds"]:
        notes.append(f"{p['seeds']} seeds instead of 10")
    if p.get("share_L10"):
        notes.append("at L = 10 private FedAvg/FedProx/tuning and FedRS reuse the public run of the seed "
                     "(identical by definition: every client holds every label, so private runs train the public "
                     "method)")
    if p["labels"] != q["labels"]:
        notes.append(f"L in {{{', '.join(map(str, p['labels']))}}} instead of 2..10")
    if p["pairwise_all_labels"] != q["pairwise_all_labels"]:
        pa = p["pairwise_all_labels"]
        notes.append("all-pairs pairwise tuning (vague-7) " + (f"only at L in {pa}" if pa else "not run"))
    e, qe = p["epochs"], q["epochs"]
    if e != qe:
        notes.append(f"epoch ablation: E in {e['E']}, L in {e['labels']}, {e['seeds']} seeds, {e['rounds']} rounds "
                     f"(paper: E in {qe['E']}, L 2..10, 3 seeds, 100 rounds)")
    steps, psteps = client_steps(p), client_steps(q)
    if steps != psteps:
        notes.append(f"{steps:,} local steps per client per run instead of {psteps:,}; central tuning "
                     f"{tuning_steps(p, 'cifar10'):,} (CIFAR-10) / {tuning_steps(p, 'fashion-mnist'):,} "
                     f"(Fashion-MNIST) steps per round instead of {tuning_steps(q, 'cifar10'):,} / "
                     f"{tuning_steps(q, 'fashion-mnist'):,}")
    return notes


def client_steps(p: dict) -> int:
    """Optimiser steps of one client over a run of the main sweep (E = 1)."""
    return -(-p["samples_per_client"] // p["batch_size"]) * p["local_epochs"] * p["rounds"]


def tuning_steps(p: dict, dataset: str) -> int:
    """Central-tuning steps per round (tuning_epochs over the server set)."""
    return -(-p["server_size"][dataset] // p["batch_size"]) * p["tuning_epochs"]


def _se_note(p: dict) -> str:
    """The standard error the test subset implies for one seed's accuracy (binomial, at 50%: the
    largest), so a reader can tell which differences the subset can separate."""
    n = p["test_eval"] or 10_000
    return f"; a seed's test accuracy has a binomial standard error of at most {50 / n ** 0.5:.1f} points on {n:,} images"


def _notes(profile: str, p: dict) -> list[str]:
    if profile == "paper":
        return []
    if profile == "smoke":
        return ["SMOKE: synthetic 16x16 stand-in images; not a result"] + _shrinkage(p)
    return [f"{profile} profile (2-core CPU): " + n for n in _shrinkage(p)]


NOTES = {profile: _notes(profile, p) for profile, p in SETTINGS.items()}  # as the profiles ask (bf16 where set)


def settings(profile: str) -> dict:
    """A deep copy of the profile's settings, with its notes. A profile that asks for bf16 gets it
    only where bf16 is native (fedpaper.engine.cpu.resolve_precision: AVX-512 BF16 / AMX CPUs, bf16
    GPUs), else fp32, which is then as fast or faster (emulated bf16 is several times slower than
    fp32): "precision" holds the precision actually used (so the run
    key, which omits fp32, is that of an fp32 run) and "precision_rule" (also a note) says why."""
    p = copy.deepcopy(SETTINGS[profile])
    notes = list(NOTES[profile])
    if p.get("precision") == "bf16":

        used, why = resolve_precision("bf16", default_device(), who=f"privlabels {profile} profile")
        p["precision"] = used
        p["precision_rule"] = f"the profile asks for bf16 autocast; {used} used ({why})"
        notes = _notes(profile, p) + ([] if used == "bf16" else [f"fp32 instead of the profile's bf16: {why}"])
    p["notes"] = notes
    return p


def follow_rounds(p: dict) -> dict:
    """`p` (a profile's settings with the overrides applied, changed in place and returned) with the
    epoch ablation's rounds (`epochs.rounds`, Figs 11-13) following an override of `rounds` that
    does not set `epochs.rounds` too. Every profile trains the ablation for the main sweep's rounds
    (the paper's 100; a CPU profile's, so that its E = 1 FedAvg runs are the main sweep's), so a
    researcher who changes `rounds` expects every run, the ablation's included, to train that many;
    an override of `epochs.rounds` (alone or beside `rounds`) sets the ablation's own."""
    applied = p.get(APPLIED_KEY) or {}
    own = "epochs.rounds" in applied or (isinstance(applied.get("epochs"), dict) and "rounds" in applied["epochs"])
    if "rounds" in applied and not own:
        p["epochs"]["rounds"] = p["rounds"]
    return p


def subtitle(p: dict, epochs: bool = False) -> str:
    """One line of shrinkage for a figure (empty at the paper profile)."""
    if p.get("profile") == "paper":
        return ""
    e = p["epochs"]
    parts = [f"{p['profile']} profile: m={p['num_clients']}, {p['samples_per_client']}/client, batch {p['batch_size']}",
             "server set " + "/".join(str(v) for v in p["server_size"].values()),
             f"CNN {'-'.join(map(str, p['widths']))}/{p['hidden']}"
             + (f" {p['precision']}" if p.get("precision", "fp32") != "fp32" else "")]
    n = lambda s: len(s) if isinstance(s, list) else s  # noqa: E731
    if epochs:
        parts += [f"{e['rounds']} rounds", f"{n(e['seeds'])} seeds", "SGD tuning"]
    else:
        parts += [f"{p['rounds']} rounds ({client_steps(p)} local steps/client)", f"{n(p['seeds'])} seeds"]
    if p.get("test_eval") or p.get("val_eval"):
        parts.append(f"val/test subsets {p['val_eval'] or 'all'}/{p['test_eval'] or 'all'}")
    return "; ".join(parts) + (" (paper: 2000/client, server 5000/6000, batch 64, 32-32-64-64/512, 100 rounds "
                               "(3,200 local steps/client), 10 seeds)")
