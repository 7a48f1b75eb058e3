"""FedNCA-ML: "Neural Collapse-Inspired Multi-Label Federated Learning under Label-Distribution
Skew" (Peng et al.). Artifacts of shared/papers/targets/fednca.md.

Model and methods: fedpaper.blocks.nets (simplex ETF, LADM with 2-D sine-cosine embedding), the parts
algorithms.fednca_loss (eqs. 10-14), fedcurv, spherefed, frozen; this package composes them
(methods), builds the multi-label composites and the class-presence partition (data), enumerates
the runs (runs) at the profiles' settings (profiles), draws (draw) and checks the claims (claims).

Regenerated: tables 1, 2, 5-8 (CIFAR-10 / DermaMNIST composites; FedLGT column empty: CLIP text
embeddings unavailable), figs 3, 4, 6, 7 (t-SNE and cosine maps of the ablation models), fig5
(LADM attention maps), fig8 (composite examples), figs 9-12 (per-client class counts; VOC 2007
and ChestX-ray14 from their real label tables). Not regenerated: tables 3-4 (VOC / ChestX-ray14
images absent; their loaders and pools builders are tested on generated stand-ins). Figs 3-7 use
the best-validation model (peak validation macro-AUC) of the first seed (features.MODEL_NOTE).
ImageNet weights are not available offline: quick and long profiles train from random
initialisation with a small CNN backbone, named on every figure and in provenance.
"""
from __future__ import annotations

from fedpaper.outputs.pipeline import ArtifactJob, artifact_function

from fedpaper.claims.catalog import load_reported

from fedpaper.papers.fednca import data as data
from fedpaper.papers.fednca import figures
from fedpaper.papers.fednca import methods as methods
from fedpaper.papers.fednca import runs as runs
from fedpaper.papers.fednca.profiles import backbone_name, settings, subtitle, where
from fedpaper.runs.experiment import PoolsBuilder

#: Modules that only read results (not part of the runs' cache key).
RESULTS_READ_ONLY = ("claims", "diagnoses", "draw", "figures", "ladder")

PAPER = "fednca"
TABLE_NOTES = ["numbers compared with the paper: over the whole test set (mean, std); the official code's "
               "per-batch average (batches of 32) is the batch_mean column",
               "FedLGT not regenerated: " + methods.NOT_REGENERATED[methods.FEDLGT]]


def _settings(profile: str) -> dict:
    """The profile's settings (the pipeline settles them: the overrides; its seeds, a count here,
    made a list)."""
    p = settings(profile)
    p["profile"] = profile
    return p


def _info(p, dataset, data_root, **extra) -> dict:
    pl = runs.pools(p, dataset, data_root)
    return {"datasets": [dict(pl.description, name=dataset)], "seeds": p["seeds"], "notes": list(p["notes"]),
            "device": pl.x_train.device.type, "backbone": backbone_name(p), **extra}


def _table(table_id: str, rows_fn, row_keys, data_root, p):
    from fedpaper.papers.fednca import draw  # matplotlib.pyplot (0.7 s): imported when a table is drawn, not with the package

    aid = f"{PAPER}/{table_id}"

    def dataset(pp):
        return pp["settings"][table_id]["dataset"]

    def specs(pp):
        return [s for _, s in rows_fn(pp, table_id)]

    def summarise(specs, res, pp):
        rows = rows_fn(pp, table_id)  # the same specs, with their row keys
        tab = runs.summarise(runs.per_seed(rows, res))
        tab["our_backbone"] = backbone_name(pp)
        ds = dataset(pp)
        info = _info(pp, ds, data_root, composite_counts=runs.pools(pp, ds, data_root).composite_counts)
        info["notes"] += TABLE_NOTES
        return tab, info

    def draw_fn(tab, pp):
        return draw.results_table(tab, load_reported(aid), row_keys, f"FedNCA-ML {table_id}", subtitle(pp, dataset(pp)),
                                  pp.get("notes", []) + TABLE_NOTES)

    return ArtifactJob(aid, p, None, draw_fn, lambda pp: (dataset(pp),), specs=specs, summarise=summarise,
                       execution=runs.execution, where=where(p))


def _main_rows(p, table_id):
    return runs.main_specs(p, table_id, [m for m in methods.TABLE_METHODS if m not in methods.NOT_REGENERATED])


@artifact_function
def table1(*, profile="smoke", data_root=None):
    """Table 1: multi-label CIFAR-10, beta 0.5 / 0.1, gamma 0.5, every method."""
    return _table("table1", _main_rows, ["beta", "method"], data_root, _settings(profile))


@artifact_function
def table2(*, profile="smoke", data_root=None):
    """Table 2: multi-label DermaMNIST, beta 0.5 / 0.1, gamma 0.71, every method."""
    return _table("table2", _main_rows, ["beta", "method"], data_root, _settings(profile))


@artifact_function
def table5(*, profile="smoke", data_root=None):
    """Table 5: component ablation on DermaMNIST (beta 0.1, gamma 0.71)."""
    return _table("table5", runs.component_specs, ["components"], data_root, _settings(profile))


@artifact_function
def table6(*, profile="smoke", data_root=None):
    """Table 6: LADM query ablation on DermaMNIST."""
    return _table("table6", runs.query_specs, ["query_type", "query_init"], data_root,
                  _settings(profile))


@artifact_function
def table7(*, profile="smoke", data_root=None):
    """Table 7: component ablation on CIFAR-10 (beta 0.5, gamma 0.5)."""
    return _table("table7", runs.component_specs, ["components"], data_root, _settings(profile))


@artifact_function
def table8(*, profile="smoke", data_root=None):
    """Table 8: LADM query ablation on CIFAR-10."""
    return _table("table8", runs.query_specs, ["query_type", "query_init"], data_root,
                  _settings(profile))


@artifact_function
def fig8(*, profile="smoke", data_root=None):
    return figures.composite_figure(_settings(profile), data_root)


@artifact_function
def fig9(*, profile="smoke", data_root=None):
    return figures.counts_figures("cifar10", _settings(profile), data_root)


@artifact_function
def fig10(*, profile="smoke", data_root=None):
    return figures.counts_figures("dermamnist", _settings(profile), data_root)


@artifact_function
def fig11(*, profile="smoke", data_root=None):
    return figures.counts_figures("voc2007", _settings(profile), data_root)


@artifact_function
def fig12(*, profile="smoke", data_root=None):
    return figures.counts_figures("chestxray14", _settings(profile), data_root)


@artifact_function
def fig3_fig4(*, profile="smoke", data_root=None):
    """Figs 3a-c (t-SNE) and 4a-c (cosine maps): DermaMNIST, Table 5 variants 1, 3, 6."""
    return figures.feature_figures("table5", "fig3", "fig4", _settings(profile), data_root)


@artifact_function
def fig6_fig7(*, profile="smoke", data_root=None):
    """Figs 6a-c (t-SNE) and 7a-c (cosine maps): CIFAR-10, Table 7 variants 1, 3, 6."""
    return figures.feature_figures("table7", "fig6", "fig7", _settings(profile), data_root)


@artifact_function
def fig5(*, profile="smoke", data_root=None):
    """Fig. 5: LADM attention maps of FedNCA-ML on DermaMNIST composites."""
    return figures.attention_figure(_settings(profile), data_root)


# ------------------------------------------------------------------ registration (outputs.registry.load_papers)
_IMAGES_ABSENT = ("images absent (PASCAL VOC and ChestX-ray14: the offline copies contain only the label tables; "
                  "get the images with torchvision VOCDetection / the NIH ChestX-ray release)")
NOTEBOOKS = {
    **{f"{PAPER}/{t}": f"notebooks/{PAPER}/{t}.ipynb"
       for t in ("table1", "table2", "table5", "table6", "table7", "table8", "fig5", "fig8")},
    f"{PAPER}/scaling": f"notebooks/{PAPER}/ladder.ipynb",  # the compute ladder (ladder.py)
    **{f"{PAPER}/{f}{panel}": f"notebooks/{PAPER}/{f}.ipynb" for f in ("fig9", "fig10", "fig11", "fig12") for panel in "ab"},
    **{f"{PAPER}/{f}{panel}": f"notebooks/{PAPER}/{nb}.ipynb"
       for f, nb in (("fig3", "fig3_fig4"), ("fig4", "fig3_fig4"), ("fig6", "fig6_fig7"), ("fig7", "fig6_fig7"))
       for panel in "abc"},
}
NOT_IMPLEMENTED = {f"{PAPER}/table3": _IMAGES_ABSENT, f"{PAPER}/table4": _IMAGES_ABSENT}
LAYOUTS = {"fednca": data._federated, "fednca-central": data._central}
POOLS_BUILDERS = {"fednca-cifar10": PoolsBuilder(data._cifar10, reads="cifar10"),
                  "fednca-dermamnist": PoolsBuilder(data._dermamnist, reads="dermamnist"),
                  "fednca-synthetic": PoolsBuilder(data._synthetic),
                  "fednca-voc": PoolsBuilder(data._voc, reads="voc2007"),
                  "fednca-chestxray14": PoolsBuilder(data._cxr, reads="chestxray14")}

from fedpaper.papers.fednca.claims import CLAIMS  # noqa: E402, F401  (a table registry.load_papers reads)
