"""FedPALS: "Overcoming label shift with target-aware federated learning" (Listo Zec, Breitholtz,
Johansson, arXiv 2411.03799). Every artifact of shared/papers/targets/fedpals.md.

Algorithms (fedpaper.algorithms): FedPALS aggregation weights eq. (9) (lambda=0: eq. 8), FedAvg
eq. (4), ESS (Sec. 3), lambda by ESS bisection (App. A.1), projection distance (Sec. 5); baselines
FedProx, SCAFFOLD, FedRS, AFL (Sec. 5, App. A.3). This module and its helpers build the paper's
federations and artifacts:

- runs              partitions -> federations, lambda grid, run specs (Sec. 5, App. A.2-A.3)
- train             Table 1, Figs 2c/5c/6b, 7, 8 (run settings, summaries, drawings)
- geometry          Fig 1, the label-marginal panels (Figs 2a/2b/5a/5b/6a), Fig 9 (App. A.5, B.4)
- real              PACS (Fig 3a, Tables 2, 4, Table 1's PACS row) and iWildCam (Fig 3b, Fig 4, Table 3)
- claims            the 32 claims, checked on our committed numbers
- profiles          smoke / quick / paper settings and the shrinkage notes

Choices where the paper is vague (targets/fedpals.md section 4; defaults unless said):
- vague-1: 10 partitions, IDs 0-8 train, ID 9 is the target (the "clients" column reads 10).
- vague-2: sparsity sampling: each partition draws C labels at random; class pools split in equal
  disjoint shards among holders; each partition balanced over its C labels.
- vague-3: T(Y) = partition 9's label marginal; target validation = partition 9's images; target
  test = official test split resampled to T(Y).
- vague-4: LeNet of the authors' prototype (CIFAR conv 6/16, FMNIST conv 6/12).
- vague-5: SGD, no momentum, lr 0.1, batch 32, no weight decay, fresh optimiser each round;
  the paper profile trains SCAFFOLD at lr 0.01 (profiles.RUNS["paper"]["method_lr"]: at lr 0.1 its
  training turns non-finite at full partitions, the fallback vague-5 names).
- vague-6: 150 rounds (FMNIST, CIFAR); PACS 50 rounds, Adam lr 5e-5, batch 32 (Bai et al. config);
  iWildCam 80 rounds, Adam lr 3e-5, batch 16 (vague-16).
- vague-7: Fig 8b E in {1, 2, 5, 10, 20, 40}, T = round(150/E) rounds.
- vague-8: FedPALS lambda chosen per seed from {0, lambda_25, lambda_50, lambda_75} (ESS bisection)
  on target-validation accuracy; Fig 8a lambda = 1000.
- vague-9: FedProx mu 0.01; SCAFFOLD option II, server lr 1; FedRS alpha 0.5; AFL step 0.01.
- vague-10: Oracle = FedAvg on clients of the same sizes drawn i.i.d. from T(Y), out of the training
  split minus the target partition (scaled down when T's labels lack images; recorded).
- vague-11: Dirichlet: equal partition sizes, Multinomial(n, p_i) without replacement (clients get
  fewer images when a class runs out); beta in {0.1, 0.2, 0.5, 1, 10}.
- vague-12: C in {2, ..., 10}; Fig 8c 10/20/50/100 training clients plus the target partition,
  10% participation for 50 and 100.
- vague-13: each seed redraws partition (incl. target), init and data order; std with ddof=1.
- vague-14: PACS: Bai et al. metadata split (or a DomainBed tree with a chosen target domain);
  alphabetical classes; three random thirds; client k drops label k; client 2 cut to 10%; source
  validation = a random 10% of the source images (label 2 removed); ESS relative to final N.
- vague-15: Table 2: lambda 0, eps ~ N(0, I) drawn per seed, perturbed T only for the weights.
- vague-16/-17: iWildCam clients = camera locations grouped into 100 clients (no mixing: Bai et
  al.'s maximal heterogeneity); T(Y) from the OOD test split; model selection on the OOD val
  split (macro F1); Fig 4 lambda = 600, 2500, 5800, first seed.
- vague-18: Fig 9: fixed means; delta in {0, 0.1, ..., 1}; logistic regression, full-batch GD,
  lr 0.1, 100 rounds, E=1; lambda from {0, l25, l50, l75} on 500 validation points; 5 runs.
- vague-19: best target-validation round (accuracy; macro F1 for iWildCam).
- vague-20/-21: curves: Table 1 methods (quick: FedPALS, FedAvg, Oracle); Fig 8: FedPALS, FedAvg,
  FedProx, SCAFFOLD.
- vague-22: per-channel standardisation, no augmentation (PACS/iWildCam: resized to 224 px,
  standardised with the source images' statistics).
- vague-24: Fig 1 panel A = the synthetic task's clients with T = [0, .5, .5]; panel B = four
  clients with T inside their hull.
- vague-25: d(T,S) panels: mean ± std over the seeds' partitions, full (uncapped) partitions.
"""
from __future__ import annotations


import numpy as np
import pandas as pd

from fedpaper.outputs.pipeline import ArtifactJob, artifact_function
from fedpaper.claims.catalog import load_reported
from fedpaper.papers.fedpals.claims import CLAIMS  # noqa: F401  (a table registry.load_papers reads)
from fedpaper.papers.fedpals import geometry as G, real as RL
from fedpaper.papers.fedpals import profiles as P
from fedpaper.papers.fedpals import runs as R
from fedpaper.papers.fedpals import train as TR
from fedpaper.blocks.data import load_dataset
from fedpaper.blocks.partition import Partition
from fedpaper.runs.experiment import PoolsBuilder

#: Modules of this package that only read results; every other file here is part of the cache key
#: of this paper's runs (fedpaper.runs.versions.paper_files), so an edit to them keeps the cached runs.
RESULTS_READ_ONLY = ("claims", "ladder")

PAPER = "fedpals"
NB = "notebooks/fedpals/{}.ipynb"
_DATA = ["fashion-mnist", "cifar10"]


#: The names a row or method setting may take (overrides are checked against them before any run).
CHOICES = {"table1_rows": [[d, R.label_setting(s)] for d, s in TR.TABLE1_SETTINGS],
           **{k: R.TABLE1_METHODS for k in ("shift_methods", "fig7_methods", "fig8_methods")}}


def _settings(profile: str, section: str | None = None, pacs: bool = False, **extra) -> dict:
    """The profile's settings (`profiles.settings`; plus Table 1's PACS row's when `pacs`). The
    pipeline settles them (the overrides, checked against CHOICES; their seed settings `seeds`,
    `marginal_seeds`, `pacs.seeds`, counts here, made lists, explicit seeds replacing every one)."""
    p = P.settings(profile, section)
    p.update(extra)
    if pacs:
        RL.add_table1_pacs(p, profile)
    return p


def _where(profile: str) -> str:
    return f"the {PAPER} {profile} profile"


def _job(aid, p, compute, draw, datasets, where):
    return ArtifactJob(aid, p, compute, draw, tuple(datasets), where=where, choices=CHOICES)


def _runs_job(aid, p, draw, datasets, specs, summarise, desc, where, named=()):
    """An artifact whose runs are declared (`specs(q)`), one sweep per setting (TR.setting_label);
    `datasets` a list or a callable of the settled settings."""
    return ArtifactJob(aid, p, None, draw, datasets if callable(datasets) else tuple(datasets), specs=specs,
                       summarise=summarise, execution=R.execution(), max_batch=TR.runs_per_engine_call(), desc=desc,
                       split_by=TR.setting_label(*named), where=where, choices=CHOICES)


# ============================================================================= Fig 1
@artifact_function
def fig1(*, profile="smoke", data_root=None):
    """Fig 1: ternary simplex, T outside (A) / inside (B) Conv(S) (Sec 3, eq. 8; vague-24)."""
    def compute(p):
        return G.fig1_table(), {"notes": ["illustrative label marginals (vague-24); exact, no data"]}

    def draw(tab, p):
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(9, 4))
        titles = {"A": "A: M < K, T outside Conv(S): α⁰S = projection of T",
                  "B": "B: T inside Conv(S): α⁰S = T"}
        for ax, (name, sub) in zip(axes, tab.groupby("panel")):
            G.draw_fig1_panel(ax, sub, titles[name])
        axes[1].legend(fontsize=7, loc="upper right", frameon=False)
        return fig

    return ArtifactJob("fedpals/fig1", {}, compute, draw, ("none",))


# ============================================================================= label marginals
def _partitions(p, dataset, split, seeds, data_root):
    data = R.data_spec(dataset, p)
    nc = p["num_clients"]
    frac = R.data_fraction(p, dataset) if p.get("stand_ins") else None  # real data: full partitions
    return [R.partition(data, split, nc, frac, s, data_root) for s in seeds]


def _class_names(p, dataset, data_root):
    if p.get("stand_ins"):
        return [f"class {k}" for k in range(10)]
    return load_dataset(dataset, root=data_root).classes


def _dist_artifact(aid, dataset, scheme, profile, data_root):
    xname = "C" if scheme == "sparsity" else "beta"
    grid_key = "marginal_C" if scheme == "sparsity" else "marginal_beta"

    def compute(p):
        ss = p["marginal_seeds"]  # a list (parameters.resolve_seeds): the profile's, or the explicit seeds
        parts = {x: _partitions(p, dataset, {"scheme": scheme, xname: x}, ss, data_root) for x in p[grid_key]}
        tab = pd.DataFrame(G.distance_rows(parts, R.DISPLAY[dataset], xname))
        return tab, dict(TR.info(p, [dataset], data_root, p["marginal_notes"]), seeds=ss)  # the seeds used

    def draw(tab, p):
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(4.6, 3.3))
        ax.errorbar(tab[xname], tab["mean"], yerr=tab["std"], marker="o", capsize=3)
        ax.set_xscale("log" if scheme == "dirichlet" else "linear")
        ax.set_xlabel(xname + (" (labels per client)" if scheme == "sparsity" else " (Dirichlet concentration)"))
        ax.set_ylabel("Projection distance d(T, S)")
        ax.set_title(f"{R.DISPLAY[dataset]}: target (client 9) vs Conv(clients 0-8)", fontsize=9)
        ax.grid(alpha=0.3)
        TR.subtitle(fig, {"notes": p["marginal_notes"]})
        return fig

    p = _settings(profile, marginal_notes=_marginal_notes(profile))
    return _job(aid, p, compute, draw, [dataset], _where(profile))


def _marginal_notes(profile):
    if profile == "smoke":
        return P.notes("smoke")
    return ["full (uncapped) partitions of the training split, exact from the partition code; "
            f"{P.GRIDS[profile]['marginal_seeds']} seeds"]


def _bars_artifact(aid, dataset, split, profile, data_root):
    def compute(p):
        part = _partitions(p, dataset, split, [0], data_root)[0]
        rows = G.marginal_rows(part, R.DISPLAY[dataset], R.label_setting(split), _class_names(p, dataset, data_root))
        return pd.DataFrame(rows), dict(TR.info(p, [dataset], data_root, p["marginal_notes"] + ["seed 0's draw"]),
                                        seeds=[0])

    def draw(tab, p):
        import matplotlib.pyplot as plt


        counts = tab.pivot(index="client", columns="class", values="count").to_numpy()
        part = Partition([np.zeros(int(c)) for c in counts.sum(1)], counts)
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
        names = list(dict.fromkeys(tab["class_name"]))
        part.plot(ax=ax, target=len(counts) - 1, class_names=names,
                  title=f"{R.DISPLAY[dataset]}, {R.label_setting(split)}: label marginals (seed 0)")
        return fig

    p = _settings(profile, marginal_notes=_marginal_notes(profile))
    return _job(aid, p, compute, draw, [dataset], _where(profile))


@artifact_function
def label_marginals(*, profile="smoke", data_root=None):
    """Figs 2a, 2b, 5a, 5b, 6a: partition statistics (Sec 5.1, App. B.1-B.2), no training."""
    return [
        _dist_artifact("fedpals/fig2a", "cifar10", "sparsity", profile, data_root),
        _bars_artifact("fedpals/fig2b", "cifar10", {"scheme": "sparsity", "C": 6}, profile, data_root),
        _dist_artifact("fedpals/fig5a", "cifar10", "dirichlet", profile, data_root),
        _bars_artifact("fedpals/fig5b", "cifar10", {"scheme": "dirichlet", "beta": 0.1}, profile, data_root),
        _dist_artifact("fedpals/fig6a", "fashion-mnist", "sparsity", profile, data_root),
    ]


# ============================================================================= Fig 9
@artifact_function
def fig9(*, profile="smoke", data_root=None):
    """Fig 9: synthetic Gaussians, accuracy vs d(T_delta, S) (App. A.5, B.4; vague-18)."""
    def summarise(specs, results, p):
        runs = G.fig9_records(specs, results)
        notes = (["paper scale (App. A.5/B.4, vague-18 defaults; the same at quick, long and paper); features "
                  "standardised with the clients' training statistics (vague-22)"]
                 if profile != "smoke" else P.notes("smoke"))
        tab = G.fig9_table(runs)
        notes += G.fig9_lambda_notes(tab)
        return tab, {"notes": notes, "device": "cpu", "runs": len(runs)}

    def draw(tab, p):
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(4.8, 3.4))
        for m, g in tab.groupby("method"):
            ax.errorbar(g["projection_distance"], g["mean"], yerr=TR.clipped_std(g), marker="o", ms=3, capsize=2,
                        label=m)
        ax.set_xlabel("Projection distance d(T_δ, S)")
        ax.set_ylabel("Target test accuracy (%)")
        ax.set_title("Synthetic 2-D Gaussians, 2 clients, logistic regression", fontsize=9)
        ax.legend(frameon=False, fontsize=8)
        ax.grid(alpha=0.3)
        return fig

    return ArtifactJob("fedpals/fig9", P.settings(profile, group="fig9"), None, draw, ("none",), specs=G.fig9_specs,
                       summarise=summarise, execution=G.FIG9_EXECUTION, max_batch=None, desc="fedpals fig9",
                       where=f"the {PAPER} fig9 settings")


# ============================================================================= Table 1
@artifact_function
def table1(*, profile="smoke", data_root=None):
    """Table 1 (Sec 5.1): target accuracy, FMNIST C=3/2, CIFAR-10 C=3/2/beta=0.1 (+ PACS C=6)."""

    def specs(q):
        return TR.settings_specs(q, TR.table1_run_settings(q), data_root) + RL.table1_pacs_specs(q, data_root)

    def summarise(specs, res, q):
        image = [i for i, s in enumerate(specs) if not RL.is_pacs(s)]
        pacs = [i for i, s in enumerate(specs) if RL.is_pacs(s)]
        tab, inf = TR.table1_summary([specs[i] for i in image], [res[i] for i in image], q, data_root)
        if pacs:
            rows = RL.table1_pacs_rows([specs[i] for i in pacs], [res[i] for i in pacs], q, data_root)
            tab = pd.concat([tab, rows], ignore_index=True)
        else:
            inf["notes"].append("PACS row not run at the smoke profile (the pacs notebook runs PACS on its stand-in)"
                                if q.get("profile") == "smoke" else "PACS row not regenerated: data set missing")
        return tab, inf

    def draw(tab, p):
        return TR.draw_table(tab, p, load_reported("fedpals/table1"),
                             "Table 1: target test accuracy (%), ours ± std (paper)")

    def datasets(q):  # table1_rows may leave one out
        return list(dict.fromkeys(d for d, _ in TR.table1_settings(q))) + ["pacs"]

    # the PACS row's runs train as the pacs notebook's (_real_job), the image rows' as the other image sweeps
    image_how, image_label = (R.execution(), TR.runs_per_engine_call()), TR.setting_label()
    return ArtifactJob("fedpals/table1", _settings(profile, pacs=True), None, draw, datasets, ("pacs",), specs=specs,
                       summarise=summarise, desc="fedpals table1",
                       split_by=lambda s: "PACS C=6" if RL.is_pacs(s) else image_label(s),
                       run_as=lambda s: (RL.execution(s.training["model"]), RL.MAX_BATCH) if RL.is_pacs(s)
                       else image_how, where=_where(profile), choices=CHOICES)


# ============================================================================= accuracy vs shift
@artifact_function
def accuracy_vs_shift(*, profile="smoke", data_root=None):
    """Figs 2c, 6b (accuracy vs C) and 5c (accuracy vs beta) (Sec 5.1, App. B.1-B.2)."""
    p0 = _settings(profile, "shift")
    out = []
    titles = {"fig2c": "CIFAR-10: target accuracy vs labels per client C",
              "fig6b": "Fashion-MNIST: target accuracy vs labels per client C",
              "fig5c": "CIFAR-10: target accuracy vs Dirichlet beta"}
    for name in titles:  # the names of TR.shift_settings
        xcol = "beta" if name == "fig5c" else "C"

        def settings(p, name=name):
            return TR.shift_settings(p, p)[name]

        def datasets(p, settings=settings):
            return [settings(p)[0]["dataset"]]

        def summarise(specs, res, p, datasets=datasets):
            return TR.shift_summary(specs, res), TR.info(p, datasets(p), data_root, p["notes"])

        def draw(tab, p, xcol=xcol, name=name):
            return TR.draw_curve(tab, p, xcol, titles[name], logx=xcol == "beta")

        out.append(_runs_job(f"fedpals/{name}", p0, draw, datasets,
                             lambda p, settings=settings: TR.settings_specs(p, settings(p), data_root), summarise,
                             "fedpals accuracy vs shift", _where(profile)))
    return out


# ============================================================================= Fig 7
@artifact_function
def fig7(*, profile="smoke", data_root=None):
    """Fig 7 (App. B.2): target accuracy over rounds, FMNIST C=6 and CIFAR-10 beta=0.2."""
    return _runs_job("fedpals/fig7", _settings(profile, "fig7"), TR.draw_fig7, _DATA,
                     lambda q: TR.settings_specs(q, TR.fig7_settings(q), data_root),
                     lambda specs, res, q: TR.fig7_summary(specs, res, q, data_root), "fedpals fig7", _where(profile))


# ============================================================================= Fig 8
def _fig8_panel(name, profile, data_root):
    def summarise(specs, res, q):
        return TR.fig8_summary(specs, res), TR.info(q, ["cifar10"], data_root, q["notes"])

    def draw(tab, q):
        return TR.draw_fig8(tab, q, name)

    return _runs_job(f"fedpals/{name}", _settings(profile, "fig8"), draw, ["cifar10"],
                     lambda q: TR.settings_specs(q, TR.fig8_settings(q)[name], data_root), summarise, "fedpals fig8",
                     _where(profile), TR.FIG8_NAMED[name])


@artifact_function
def fig8a(*, profile="smoke", data_root=None):
    """Fig 8a (App. B.3): 100 training clients, 10% participating, lambda = 1000, per label split."""
    return _fig8_panel("fig8a", profile, data_root)


@artifact_function
def fig8b(*, profile="smoke", data_root=None):
    """Fig 8b (App. B.3): local epochs E with T = round(150 / E) rounds."""
    return _fig8_panel("fig8b", profile, data_root)


@artifact_function
def fig8c(*, profile="smoke", data_root=None):
    """Fig 8c (App. B.3): 10, 20, 50, 100 training clients (10% participating from 50)."""
    return _fig8_panel("fig8c", profile, data_root)


@artifact_function
def fig8(*, profile="smoke", data_root=None):
    """Fig 8 (App. B.3): 100 clients (a), local epochs (b), number of clients (c), CIFAR-10; each panel
    is also an artifact function of its own (fig8a, fig8b, fig8c: a panel's runs alone)."""
    return [_fig8_panel(name, profile, data_root) for name in ("fig8a", "fig8b", "fig8c")]


# ============================================================================= PACS, iWildCam
def _real_where(group, profile):
    return f"the {PAPER} {group} {profile} profile"


def _real_info(p, RL, group, data_root):
    if p["data"]["name"] == "synthetic-images":
        desc = dict(RL.pools(p["data"], data_root).description, name=group)
    else:
        desc = {"name": group}
    return {"datasets": [desc], "device": R.default_device(), "notes": list(p["notes"])}


def _real_job(aid, profile, group, specs, table, draw, data_root):
    """A PACS or iWildCam artifact that trains: the group's runs (`specs(q, data_root)`), declared;
    its table made by `table(specs, results, q)` from their results."""
    def summarise(sp, res, q):
        return table(sp, res, q), _real_info(q, RL, group, data_root)

    return ArtifactJob(aid, P.settings(profile, group=group), None, draw, (group,), specs=lambda q: specs(q, data_root),
                       summarise=summarise, execution=lambda q: RL.execution(q["train"]["model"]),
                       max_batch=RL.MAX_BATCH, desc=f"fedpals {group}", where=_real_where(group, profile))


@artifact_function
def pacs(*, profile="smoke", data_root=None):
    """Fig 3a, Table 2, Table 4 (Sec 5.1, App. A.4, A.6): PACS, 3 clients, C=6."""
    def records(sp, res, q):
        return RL.pacs_records(sp, res, q, data_root)

    arts = {
        "fig3a": (lambda sp, res, q: RL.fig3a_table(records(sp, res, q), q, data_root),
                  lambda t, q: draw_rounds(t, q, "PACS: target accuracy")),
        "table2": (lambda sp, res, q: RL.table2_table(records(sp, res, q)),
                   lambda t, q: draw_real_table(t, q, "fedpals/table2", "delta", "Table 2: PACS, perturbed T")),
        "table4": (lambda sp, res, q: RL.table4_table(records(sp, res, q), q),
                   lambda t, q: draw_real_table(t, q, "fedpals/table4", "lambda", "Table 4: PACS, all variants")),
    }
    return [_real_job(f"fedpals/{k}", profile, "pacs", RL.pacs_specs, f, d, data_root) for k, (f, d) in arts.items()]


@artifact_function
def iwildcam(*, profile="smoke", data_root=None):
    """Fig 3b, Fig 4, Table 3 (Sec 5.1, App. A.7): iWildCam, 100 clients."""

    def fig4(q):  # the aggregation weights of the first seed's clients: no training
        return RL.fig4_table(q, data_root), _real_info(q, RL, "iwildcam", data_root)

    return [
        _real_job("fedpals/fig3b", profile, "iwildcam", RL.iwild_specs,
                  lambda sp, res, q: RL.fig3b_table(RL.iwild_records(sp, res, q), q, data_root),
                  lambda t, q: draw_rounds(t, q, "iWildCam: target macro F1", "f1_macro"), data_root),
        ArtifactJob("fedpals/fig4", P.settings(profile, group="iwildcam"), fig4, draw_fig4, ("iwildcam",),
                    where=_real_where("iwildcam", profile)),
        _real_job("fedpals/table3", profile, "iwildcam", RL.iwild_specs,
                  lambda sp, res, q: RL.table3_table(RL.iwild_records(sp, res, q)),
                  lambda t, q: draw_real_table(t, q, "fedpals/table3", "lambda", "Table 3: iWildCam macro F1"),
                  data_root),
    ]


def draw_rounds(tab, p, title, metric="accuracy_pct"):
    import matplotlib.pyplot as plt

    t = tab[(tab["metric"] == metric) & tab["round"].notna()]
    fig, ax = plt.subplots(figsize=(5.6, 3.6))
    for i, ((m, lam), g) in enumerate(t.groupby(["method", t["lambda"].astype(str)], sort=False)):
        lab = m if lam in ("None", "nan") else f"{m} (λ={lam})"
        ax.plot(g["round"], g["mean"], label=lab, color=f"C{i % 10}", ls="--" if m == "Oracle" else "-")
    ax.set_xlabel("Round")
    ax.set_ylabel("Target accuracy (%)" if metric == "accuracy_pct" else "Target macro F1")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6, frameon=False)
    ax.grid(alpha=0.3)
    TR.subtitle(fig, p)
    return fig


def draw_real_table(tab, p, aid, key, title):
    import matplotlib.pyplot as plt

    rep = load_reported(aid)
    cells, labels = [], []
    for _, r in tab.iterrows():
        k = r.get(key)
        labels.append(f"{r['method']}" + ("" if k is None or (isinstance(k, float) and np.isnan(k)) else f" ({key}={k})"))
        q = rep[(rep["method"] == r["method"])] if rep is not None else None
        if q is not None and key in rep.columns and k is not None and not (isinstance(k, float) and np.isnan(k)):
            q = q[q[key].astype(str) == str(k)]
        paper = f"{q['mean'].iloc[0]:g}" if q is not None and len(q) else "–"
        cells.append([f"{r['mean']:.3g} ± {r['std']:.2g}", paper])
    fig, ax = plt.subplots(figsize=(5.2, 0.35 * len(cells) + 1.0))
    ax.axis("off")
    t = ax.table(cellText=cells, rowLabels=labels, colLabels=["ours", "paper"], loc="center", cellLoc="center")
    t.auto_set_font_size(False)
    t.set_fontsize(7)
    ax.set_title(title, fontsize=9)
    TR.subtitle(fig, p)
    return fig


def draw_fig4(tab, p):
    import matplotlib.pyplot as plt

    lams = list(dict.fromkeys(tab["lambda"]))
    fig, axes = plt.subplots(1, len(lams), figsize=(4.2 * len(lams), 3.2), squeeze=False)
    for ax, lam in zip(axes[0], lams):
        g = tab[tab["lambda"] == lam]
        ax.bar(g["rank"], g["weight_fedpals"], color="C0", label="FedPALS α^λ")
        ax.scatter(g["rank"], g["weight_fedavg"], color="C3", s=6, zorder=3, label="FedAvg n_i/N")
        ax.set_title(f"λ={lam}, ESS={g['ess_pct_of_N'].iloc[0]:.0f}% of N", fontsize=9)
        ax.set_xlabel("Client (sorted by sample count)")
        ax.set_ylabel("Aggregation weight")
    axes[0][0].legend(fontsize=7, frameon=False)
    TR.subtitle(fig, p)
    return fig


# ============================================================================= registration (outputs.registry.load_papers)
_GROUPS = {
    "fig1": ["fedpals/fig1"], "fig9": ["fedpals/fig9"], "table1": ["fedpals/table1"], "fig7": ["fedpals/fig7"],
    "label_marginals": ["fedpals/fig2a", "fedpals/fig2b", "fedpals/fig5a", "fedpals/fig5b", "fedpals/fig6a"],
    "accuracy_vs_shift": ["fedpals/fig2c", "fedpals/fig6b", "fedpals/fig5c"],
    "fig8": ["fedpals/fig8a", "fedpals/fig8b", "fedpals/fig8c"],
    "pacs": ["fedpals/fig3a", "fedpals/table2", "fedpals/table4"],
    "iwildcam": ["fedpals/fig3b", "fedpals/fig4", "fedpals/table3"],
}
NOTEBOOKS = {**{aid: NB.format(nb) for nb, ids in _GROUPS.items() for aid in ids},
             "fedpals/scaling": NB.format("ladder")}  # the compute ladder (ladder.py)
LAYOUTS = {"fedpals-label-shift": R.federation, "fedpals-fig9": G._fig9_federation, "fedpals-pacs": RL.pacs_federation,
           "fedpals-iwildcam": RL.iwild_federation}
POOLS_BUILDERS = {"fedpals-fig9": PoolsBuilder(G._fig9_run_pools),
                  "fedpals-iwildcam": PoolsBuilder(RL._iwild_run_pools, reads="iwildcam")}
