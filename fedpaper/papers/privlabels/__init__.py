"""Private label sets: "Federated Learning with Heterogeneous and Private Label Sets" (Breitholtz,
Listo Zec, Johansson, ECML-PKDD 2025 workshops). Every artifact of shared/papers/targets/privlabels.md.

Methods (fedpaper.algorithms, engine): public FedAvg, FedProx (mu 0.01), FedRS (alpha 0.5), central
tuning with the MSE loss (eq. 6) or the pairwise loss (eq. 5); private setting (Sec 4.1, Algorithm
1): a client receives, trains (softmax over Y_k) and returns only the classifier rows of Y_k, rows
averaged per label with n_k / n'_y, encoders with n_k / n; adapted FedProx without a proximal term
on the classifier; central tuning on top (Sec 4.2). Helpers:

- profiles             smoke / quick / long / paper settings and every shrinkage (notes, subtitles)
- probe                timing / learning probe that sized the quick and long profiles
- runs                 specs, federations (privlabels_split + private_label_partition), summaries
- draw                 line plots over L or E, grouped bars, curves over rounds, table figures
- appendix_b           App B as exact numbers (losses and gradients when label 9 is held by no one)
- config_tables        Tables 1 and 2 from the configuration actually used
- claims               the 20 claims, checked on our committed numbers

Choices where the paper is vague (targets/privlabels.md section 4; the defaults unless said):
- vague-1: m = 10 clients, all participate every round.
- vague-2: CNN Conv3x3(32)-Conv3x3(32)-pool-Conv3x3(64)-Conv3x3(64)-pool-FC512-Dropout(0.5)-Linear
  (the classifier psi); padding 1; "3" of Table 1 read as the kernel size. Quick: 8-8-16-16 / 128.
- vague-3: global stratified 80/20 split of the official training set; the 20% only picks the
  best-validation snapshot of the global (tuned) model.
- vague-4: unlabeled server set drawn from the 80% part (5,000 CIFAR-10 / 6,000 Fashion-MNIST),
  disjoint from clients and validation, labels unused.
- vague-5: each client draws L distinct labels uniformly, independently; no coverage guarantee.
- vague-6: each label's pool split in equal disjoint shards among its holders; each client's union
  subsampled uniformly (not stratified) to samples_per_client.
- vague-7: Tuning-Pairwise is eq. (5) with pairs inside Y_k; the all-pairs variant ("Tuning-Pairwise
  (all pairs)") runs where the profile lists it (paper: every L; quick: L = 2 only, for time) and is
  the form the App B demonstration analyses.
- vague-8: client probabilities as produced (private: softmax over Y_k; public: the full softmax's
  entries on Y_k), central h a softmax over all labels, no renormalisation.
- vague-9: aggregate first, then tune ALL parameters 3 epochs over the server set, Adam lr 1e-3,
  batch 64, fresh optimiser each round, w_k = n_k / n.
- vague-10: client optimiser state reset every round; a row held by no client keeps its value.
- vague-11: per-channel standardisation, no augmentation.
- vague-12: Figs 5-8 at L = 5, test accuracy of the global model after every round, mean and 95%
  CI over seeds; Fig 8 = CIFAR-10 public.
- vague-13: ablation E in {1, 3, 5}, L = 5 for Fig 11, Figs 12/13 over L at E = 5 / 3, methods
  FedAvg, Tuning-MSE, Tuning-Pairwise in both settings, SGD tuning at lr 1e-3, 3 seeds.
- vague-14: 95% percentile bootstrap over seeds, 1000 resamples (fedpaper.blocks.metrics.summarize).
- vague-15: L = 2, ..., 10 (quick: 2, 3, 5, 10).
- vague-16: validation and test accuracy after every round.
Quick-profile shrinkage (2-core CPU): see profiles.NOTES["quick"]; it is on every
figure's subtitle and in every provenance json.
"""
from __future__ import annotations

from fedpaper.outputs.pipeline import ArtifactJob, artifact_function
from fedpaper.papers.privlabels import appendix_b as appb_mod
from fedpaper.papers.privlabels import draw as draw
from fedpaper.papers.privlabels import runs as runs
from fedpaper.papers.privlabels import config_tables as tabs
from fedpaper.papers.privlabels.claims import CLAIMS  # noqa: F401  (a table registry.load_papers reads)
from fedpaper.papers.privlabels.profiles import follow_rounds, settings, subtitle

#: Modules of this package that only read results; every other file here is part of the cache key
#: of this paper's runs (fedpaper.runs.versions.paper_files), so an edit to them keeps the cached runs.
RESULTS_READ_ONLY = ("claims", "draw", "config_tables", "probe", "ladder")

PAPER = "privlabels"
NAMES = {"cifar10": "CIFAR-10", "fashion-mnist": "Fashion-MNIST"}
BARS = {"fig1b": ("cifar10", 5), "fig4": ("fashion-mnist", 3), "fig9": ("fashion-mnist", 5), "fig10": ("cifar10", 3)}
CURVES = {"fig5": ("fashion-mnist", "private"), "fig6": ("fashion-mnist", "public"),
          "fig7": ("cifar10", "private"), "fig8": ("cifar10", "public")}
LINES = {"fig2": "cifar10", "fig3": "fashion-mnist"}
KEYS = ["dataset", "setting", "labels_per_client", "method"]


def _settings(profile: str) -> dict:
    """The profile's settings. The pipeline settles them (the overrides; its seed settings `seeds`,
    `epochs.seeds`, counts here, made lists, explicit seeds replacing both), the epoch ablation's
    rounds then following an override of `rounds` (profiles.follow_rounds: each job's `follow`)."""
    p = settings(profile)
    p["profile"] = profile
    return p


def _where(p) -> str:
    return f"the {PAPER} {p['profile']} profile"


def _info(p, datasets, data_root, **extra) -> dict:
    return {"datasets": runs.dataset_records(datasets, p, data_root), "seeds": p["seeds"],
            "notes": p["notes"], "device": runs.pools(runs.data_spec(datasets[0], p), data_root).x_train.device.type,
            **extra} if datasets else {"notes": p["notes"], **extra}


def _job(name, p, compute, draw_fn, datasets):
    return ArtifactJob(f"{PAPER}/{name}", p, compute, draw_fn, tuple(datasets or ["none"]), where=_where(p),
                       follow=follow_rounds)


def _runs_job(name, p, draw_fn, datasets, grid, summarise, desc):
    """An artifact of a grid of runs: `grid(q)` its specs as the tables name them; the runs it declares
    are their canonical ones (runs.canonical: identical L = 10 runs trained once), and
    `summarise(grid specs, results, q)` sees the grid's specs with their results."""
    return ArtifactJob(f"{PAPER}/{name}", p, None, draw_fn, tuple(datasets),
                       specs=lambda q: [runs.canonical(s, q) for s in grid(q)],
                       summarise=lambda specs, res, q: summarise(grid(q), res, q),
                       execution=runs.execution, desc=desc, where=_where(p), follow=follow_rounds)


def _full_grid(dataset):
    """Every run of the data set's main grid: each figure of it declares the FULL grid, so that
    whichever notebook runs first trains every method's runs in one batch and the others read the
    same cached results."""
    return lambda q: runs.main_specs(q, dataset, q["labels"])


def _seed_table(full, res, labels, methods=None):
    """The runs of the given L (and methods) of the full grid, with their results."""
    keep = [i for i, s in enumerate(full)
            if s.partition["L"] in labels and (not methods or s.tags["display"] in methods)]
    return [full[i] for i in keep], [res[i] for i in keep]


# ------------------------------------------------------------------------ Figs 2, 3 (accuracy vs L)
def _lines_summarise(dataset, data_root):
    def summarise(full, res, p):
        specs, res = _seed_table(full, res, p["labels"])
        tab = runs.summarise(runs.per_seed(specs, res, dataset), KEYS)
        miss = runs.missing_labels(p, dataset, p["labels"], p["seeds"], data_root)
        extra = [{"dataset": dataset, "setting": "both", "labels_per_client": L, "method": "(partition)",
                  "metric": metric, "mean": g[col].mean(), "std": g[col].std(ddof=1) if len(g) > 1 else 0.0,
                  "ci_low": g[col].min(), "ci_high": g[col].max(), "n_seeds": len(g),
                  "interval": f"min-max over n={len(g)} seeds"}
                 for metric, col in (("labels_held_by_no_client", "missing"), ("min_client_size", "min_client_size"))
                 for L, g in miss.groupby("labels_per_client")]
        import pandas as pd

        tab = pd.concat([tab, pd.DataFrame(extra)], ignore_index=True)
        info = _info(p, [dataset], data_root, m=p["num_clients"], participation=1.0,
                     partition_per_seed=miss.to_dict("records"))
        info["notes"] = list(info["notes"]) + [
            "rows with method '(partition)' describe the seeds' partitions (labels held by no client, smallest "
            "client); for them ci_low / ci_high are the min / max over seeds"]
        return tab, info
    return summarise


@artifact_function
def accuracy_vs_labels(*, profile="smoke", data_root=None):
    """Figs 2 (CIFAR-10) and 3 (Fashion-MNIST): test accuracy vs labels per client, private | public."""
    p = _settings(profile)
    out = []
    for name, ds in LINES.items():
        def draw_fn(t, q, ds=ds):
            t = t[t["metric"] == "accuracy"]
            return draw.lines(t, "labels_per_client", f"{NAMES[ds]}: test accuracy vs labels per client",
                              subtitle(q), "labels per client L")
        out.append(_runs_job(name, p, draw_fn, [ds], _full_grid(ds), _lines_summarise(ds, data_root),
                             f"privlabels {ds}"))
    return out


# ------------------------------------------------------------------------ Figs 1b, 4, 9, 10 (bars)
@artifact_function
def bars(*, profile="smoke", data_root=None):
    """Bar plots at one L (the same runs as Figs 2/3): Fig 1b, 4, 9, 10."""
    p = _settings(profile)
    out = []
    for name, (ds, L) in BARS.items():
        def summarise(full, res, q, ds=ds, L=L):
            specs, res = _seed_table(full, res, [L])
            return runs.summarise(runs.per_seed(specs, res, ds), KEYS), _info(q, [ds], data_root)

        def draw_fn(t, q, ds=ds, L=L):
            return draw.bars(t, f"{NAMES[ds]}, L = {L} labels per client", subtitle(q))
        out.append(_runs_job(name, p, draw_fn, [ds], _full_grid(ds), summarise, f"privlabels {ds}"))
    return out


# ------------------------------------------------------------------------ Figs 5-8 (rounds)
@artifact_function
def rounds(*, profile="smoke", data_root=None):
    """Test accuracy per round at L = rounds_L (vague-12), mean and 95% CI band over seeds."""
    p = _settings(profile)
    out = []
    for name, (ds, setting) in CURVES.items():
        def summarise(full, res, q, ds=ds, setting=setting):
            specs, res = _seed_table(full, res, [q["rounds_L"]], methods=runs.ROUNDS_METHODS)
            keep = [i for i, s in enumerate(specs) if s.tags["setting"] == setting]
            pr = runs.per_round([specs[i] for i in keep], [res[i] for i in keep], ds)
            tab = runs.summarise(pr, KEYS + ["round"])
            return tab, _info(q, [ds], data_root)

        def draw_fn(t, q, ds=ds, setting=setting):
            return draw.curves(t, f"{NAMES[ds]}, {setting} label sets, L = {q['rounds_L']}: test accuracy per round",
                               subtitle(q))
        out.append(_runs_job(name, p, draw_fn, [ds], _full_grid(ds), summarise, f"privlabels {ds}"))
    return out


# ------------------------------------------------------------------------ Figs 11-13 (local epochs)
def _epoch_pairs(p, which):
    e = p["epochs"]
    if which == "fig11":
        return [(E, e["fig11_L"]) for E in e["E"]]
    return [(_fig_E(p, which), L) for L in e["labels"]]


def _fig_E(p, which):
    """Fig 12 uses E = 5, Fig 13 E = 3 (App C.3); a smaller grid (smoke) uses its own largest / middle E."""
    grid = p["epochs"]["E"]
    want = 5 if which == "fig12" else 3
    return want if want in grid else (max(grid) if which == "fig12" else grid[len(grid) // 2])


@artifact_function
def epochs(*, profile="smoke", data_root=None):
    """Local-epoch ablation on CIFAR-10 with SGD central tuning (App C.3, vague-13)."""
    p = _settings(profile)
    out = []
    for name in ("fig11", "fig12", "fig13"):
        def grid(q, name=name):
            return runs.epoch_specs(q, "cifar10", _epoch_pairs(q, name), q["epochs"]["seeds"])

        def summarise(specs, res, q):
            df = runs.per_seed(specs, res, "cifar10")
            tab = runs.summarise(df, ["dataset", "setting", "labels_per_client", "local_epochs", "method"])
            info = _info(q, ["cifar10"], data_root)
            info["seeds"] = q["epochs"]["seeds"]
            return tab, info

        def draw_fn(t, q, name=name):
            if name == "fig11":
                L = q["epochs"]["fig11_L"]
                return draw.lines(t, "local_epochs", f"CIFAR-10, L = {L}: test accuracy vs local epochs per round "
                                  "(SGD central tuning)", subtitle(q, epochs=True), "local epochs per round E")
            E = _fig_E(q, name)
            return draw.lines(t, "labels_per_client", f"CIFAR-10, E = {E} local epochs: test accuracy vs labels "
                              "per client (SGD central tuning)", subtitle(q, epochs=True), "labels per client L")
        out.append(_runs_job(name, p, draw_fn, ["cifar10"], grid, summarise, f"privlabels {name}"))
    return out


# ------------------------------------------------------------------------ App B, Tables 1-2
@artifact_function
def appb(*, profile="smoke", data_root=None):
    """App B demonstration: exact losses and gradients when label 9 is held by no client."""
    p = _settings(profile)

    def compute(q):
        return appb_mod.compute(), {"notes": ["exact computation on synthetic probability vectors; identical in "
                                              "every profile"], "label_sets": appb_mod.LABEL_SETS}
    return _job("appB", p, compute, lambda t, q: appb_mod.draw(t), [])


@artifact_function
def tables(*, profile="smoke", data_root=None):
    """Tables 1 and 2: the configuration of this profile next to the paper's."""
    p = _settings(profile)
    t1 = _job("table1", p, lambda q: (tabs.table1(q), {"notes": q["notes"]}),
              lambda t, q: draw.table_figure(t, "Table 1: the CNN (paper's layer list | the model we build)",
                                             subtitle(q)),
              [])
    t2 = _job("table2", p, lambda q: (tabs.table2(q), {"notes": q["notes"]}),
              lambda t, q: draw.table_figure(t, "Table 2: hyperparameters (paper | ours)", subtitle(q)),
              [])
    return [t1, t2]


# ------------------------------------------------------------------------ registration (outputs.registry.load_papers)
_GROUPS = {"tables": ["table1", "table2"], "appB": ["appB"], "accuracy_vs_labels": ["fig2", "fig3"],
           "bars": ["fig1b", "fig4", "fig9", "fig10"], "rounds": ["fig5", "fig6", "fig7", "fig8"],
           "epochs": ["fig11", "fig12", "fig13"]}
NOTEBOOKS = {**{f"{PAPER}/{a}": f"notebooks/{PAPER}/{nb}.ipynb" for nb, ids in _GROUPS.items() for a in ids},
             f"{PAPER}/scaling": f"notebooks/{PAPER}/ladder.ipynb"}  # the compute ladder (ladder.py)
LAYOUTS = {"privlabels": runs._layout}
