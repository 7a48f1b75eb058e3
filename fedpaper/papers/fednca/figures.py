"""FedNCA-ML data figures: composite examples (fig 8) and per-client class counts (figs 9-12).

Figs 9-10 partition the profile's training composites (the rows the runs train on); figs 11-12
partition the real VOC 2007 trainval and ChestX-ray14 label tables (the paper's VOC is 2012, whose
labels are not here; ChestX-ray14 on the patient-wise split of data.label_tables, "No Finding"
images spread evenly over the clients). Smoke: synthetic label matrices of the same shapes."""
from __future__ import annotations

import numpy as np

from fedpaper.outputs.pipeline import ArtifactJob
from fedpaper.blocks.data import label_tables as lt
from fedpaper.blocks.partition import Partition, class_presence_partition

from fedpaper.papers.fednca import features as F
from fedpaper.papers.fednca import runs
from fedpaper.papers.fednca.data import build_composites, train_labels
from fedpaper.papers.fednca.profiles import subtitle, where

PAPER = "fednca"
SETTINGS = {"cifar10": ("fig9", [0.5, 0.1], 0.5), "dermamnist": ("fig10", [0.5, 0.1], 0.71),
            "voc2007": ("fig11", [0.05, 0.01], 0.5), "chestxray14": ("fig12", [0.5, 0.1], 0.5)}
#: the csv rows (client "all") of figs 12a/12b that record the label table's split: images and "No
#: Finding" images of the training and test splits (claim-24 reads them from the committed csv)
SPLIT_CLIENT = "all"
SPLIT_CLASS = "(label table, {split}: {what})"
TITLES = {"cifar10": "multi-label CIFAR-10", "dermamnist": "multi-label DermaMNIST", "voc2007": "PASCAL VOC 2007",
          "chestxray14": "ChestX-ray14"}


def _synthetic_labels(k: int, n: int = 400, negatives: float = 0.0, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y = (rng.random((n, k)) < 1.5 / k).astype(int)
    y[y.sum(1) == 0, rng.integers(k)] = 1
    y[: int(negatives * n)] = 0
    return y


def label_matrix(dataset: str, p: dict, data_root) -> tuple[np.ndarray, list, dict]:
    """(multi-hot training labels, class names, description) a figure partitions."""
    smoke = p["profile"] == "smoke"
    if dataset in ("cifar10", "dermamnist"):
        pl = runs.pools(p, dataset, data_root)
        return train_labels(pl), list(pl.classes), dict(pl.description, name=dataset)
    if dataset == "voc2007":
        if smoke:
            return _synthetic_labels(20), list(lt.VOC_CLASSES), {"name": "voc2007", "synthetic": True}
        y, names = lt.voc2007_labels(data_root)
        return y, names, {"name": "voc2007", "source": "voc2007-labels.csv.gz (trainval, labels only)",
                          "n_train": int(len(y)), "lossy": False}
    if smoke:
        return _synthetic_labels(14, negatives=0.5), list(lt.CXR_CLASSES), {"name": "chestxray14", "synthetic": True}
    d = lt.chestxray14_labels(data_root)
    return d["train"], d["classes"], {"name": "chestxray14", "source": "Data_Entry_2017.csv.gz (labels only)",
                                      "split": d["split_note"], "n_train": int(len(d["train"])), "lossy": False}


def _counts_table(part, names, beta, gamma, dataset):
    import pandas as pd

    df = part.to_frame(names).reset_index().melt(id_vars="client", var_name="class", value_name="images")
    df.insert(0, "gamma", gamma)
    df.insert(0, "beta", beta)
    df.insert(0, "dataset", TITLES[dataset])
    neg = pd.DataFrame({"dataset": TITLES[dataset], "beta": beta, "gamma": gamma, "client": range(part.num_clients),
                        "class": "(no label: No Finding)", "images": part.meta["negatives_per_client"]})
    return pd.concat([df, neg], ignore_index=True) if part.meta["n_negative"] else df


def split_rows(dataset: str, beta, gamma, data_root) -> list:
    """Rows (client SPLIT_CLIENT) with the ChestX-ray14 label table's image and "No Finding" counts
    per split (train, test) of the patient-wise split the figure partitions."""
    d = lt.chestxray14_labels(data_root)
    rows = []
    for split in ("train", "test"):
        y = np.asarray(d[split])
        for what, n in (("images", len(y)), ("No Finding", int((y.sum(axis=1) == 0).sum()))):
            rows.append({"dataset": TITLES[dataset], "beta": beta, "gamma": gamma, "client": SPLIT_CLIENT,
                         "class": SPLIT_CLASS.format(split=split, what=what), "images": n})
    return rows


def counts_figures(dataset: str, p: dict, data_root) -> list:
    """figXa / figXb: per-client class counts at the paper's two beta values."""
    from fedpaper.papers.fednca import draw  # matplotlib.pyplot (slow to import): imported when a figure is drawn, not with the package

    fig_id, betas, gamma = SETTINGS[dataset]
    needs = {"voc2007": ["voc2007:labels"], "chestxray14": ["chestxray14:labels"]}.get(dataset, [dataset])
    out = []
    for beta, panel in zip(betas, "ab"):
        aid = f"{PAPER}/{fig_id}{panel}"

        def compute(pp, beta=beta):
            y, names, desc = label_matrix(dataset, pp, data_root)
            part = class_presence_partition(y, int(pp["clients"]), beta, gamma, seed=int(pp["partition_seed"]))
            tab = _counts_table(part, names, beta, gamma, dataset)
            label_table = dataset in ("voc2007", "chestxray14") and pp["profile"] != "smoke"
            if dataset == "chestxray14" and label_table:
                import pandas as pd

                tab = pd.concat([tab, pd.DataFrame(split_rows(dataset, beta, gamma, data_root))], ignore_index=True)
            notes = ([] if label_table else list(pp["notes"])) + [f"{part.meta['classes_per_client']} of {len(names)} classes allowed per "
                                         f"client; {part.meta['n_dropped']} images dropped (no client allowed all "
                                         f"their labels); {part.meta['n_negative']} label-free images spread evenly"]
            if dataset == "voc2007":
                notes.append("VOC 2007 trainval labels (the paper's VOC 2012 labels are not in the offline copy)")
            if dataset == "chestxray14" and pp["profile"] != "smoke":
                notes.append(desc.get("split", ""))
            return tab, {"datasets": [desc], "notes": notes, "allowed_sets": part.meta["allowed_sets"]}

        def draw_fn(tab, pp, beta=beta, panel=panel):
            import pandas as pd

            t = tab[(tab["class"] != "(no label: No Finding)") & (tab["client"].astype(str) != SPLIT_CLIENT)]
            t = t.astype({"client": int})
            piv = t.pivot_table(index="client", columns="class", values="images", sort=False, aggfunc="sum")
            part = Partition(client_indices=[np.zeros(0)] * len(piv), counts=piv.to_numpy().astype(int), meta={})
            label_table = dataset in ("voc2007", "chestxray14") and pp["profile"] != "smoke"
            return draw.client_counts([(part, list(piv.columns), f"beta = {beta}, gamma = {gamma}")],
                                      f"FedNCA-ML {fig_id}{panel}: images per class per client, {TITLES[dataset]}",
                                      _sub(pp, dataset), [] if label_table else pp.get("notes", []))

        out.append(ArtifactJob(aid, p, compute, draw_fn, tuple(needs), where=where(p)))
    return out


def _sub(p, dataset):
    if dataset in ("cifar10", "dermamnist"):
        return subtitle(p, dataset).split(",")[0] + " data (partition of the training composites)"
    return f"{p['profile']} profile: real {TITLES[dataset]} label table" if p["profile"] != "smoke" else \
        "smoke profile: synthetic label matrix"


def composite_figure(p: dict, data_root):
    """fig8: example DermaMNIST composites with their label sets (App. C)."""
    from fedpaper.papers.fednca import draw  # matplotlib.pyplot (slow to import): imported when a figure is drawn, not with the package

    held = {}  # the example pixels, kept out of params (params go into the provenance json)

    def compute(pp):
        import pandas as pd

        opts = dict(runs.data_spec(pp, "dermamnist")["options"])
        src = opts.pop("source", "dermamnist")
        built = build_composites(src, opts, data_root)
        sp = built["splits"]["train"]
        comp = np.flatnonzero(sp.parts[:, 1] >= 0)[:6]
        single = np.flatnonzero(sp.parts[:, 1] < 0)[:2]
        rows = np.concatenate([single, comp])
        tab = pd.DataFrame({"row": rows, "labels": ["; ".join(built["classes"][c] for c in np.flatnonzero(sp.y[r]))
                                                    for r in rows],
                            "part_a": sp.parts[rows, 0], "part_b": sp.parts[rows, 1]})
        held["examples"] = (sp.x[rows], sp.y[rows], built["classes"])
        counts = "; ".join(f"{s}: {c['singles']} single + {c['composites']} composites" for s, c in built["counts"].items())
        return tab, {"datasets": [dict(built["data"])], "notes": list(pp["notes"]) + [
            f"composites: two images of different classes in opposite corners of a {sp.x.shape[-1]} px canvas, "
            f"merged by pixel-wise max (targets vague-1); counts {counts}"], "counts": built["counts"]}

    def draw_fn(tab, pp):
        if "examples" not in held:  # re-rendering from committed csv: no pixels
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots(figsize=(6, 2))
            ax.axis("off")
            ax.text(0.5, 0.5, "\n".join(tab["labels"].astype(str)), ha="center", va="center", fontsize=7)
            return fig
        x, y, names = held["examples"]
        return draw.composite_examples(x, y, names, "FedNCA-ML fig8: multi-label DermaMNIST composites",
                                       subtitle(pp, "dermamnist"), pp.get("notes", []))

    return ArtifactJob(f"{PAPER}/fig8", p, compute, draw_fn, ("dermamnist",), where=where(p))


# ------------------------------------------------------------------ feature figures (figs 3, 4, 6, 7)
def _dataset(p: dict, table: str) -> str:
    """The data set of `table`'s setting (a Table 5 / 7 variant's)."""
    return p["settings"][table]["dataset"]


def _feature_job(aid: str, p: dict, table: str, panel: str, summarise, draw_fn, data_root) -> ArtifactJob:
    """A job whose one run is the feature model of variant ROWS[panel] of `table`
    (features.variant_spec), on `table`'s data set; summarise(net, pools, params) -> (table, info)
    reads the model from the run's stored snapshot."""

    def specs(pp):
        return [F.variant_spec(pp, table, F.ROWS[panel][0])]

    def from_results(specs, res, pp):
        pl = runs.pools(pp, _dataset(pp, table), data_root)
        return summarise(F.model(specs[0], res[0], pl), pl, pp)

    return ArtifactJob(aid, p, None, draw_fn, lambda pp: (_dataset(pp, table),), specs=specs, summarise=from_results,
                       execution=runs.execution, where=where(p))


def feature_figures(table: str, tsne_fig: str, cos_fig: str, p: dict, data_root) -> list:
    """<tsne_fig>a-c (t-SNE) and <cos_fig>a-c (cosine maps) of the Table 5 / 7 variants 1, 3, 6."""
    import pandas as pd

    from fedpaper.papers.fednca import draw  # matplotlib.pyplot (slow to import): imported when a figure is drawn, not with the package

    def info(pp, net, extra=()):
        ds = _dataset(pp, table)
        pl = runs.pools(pp, ds, data_root)
        return {"datasets": [dict(pl.description, name=ds)], "seeds": pp["seeds"][:1],
                "notes": list(pp["notes"]) + [F.MODEL_NOTE, F.round_note(net, pp), *extra]}

    out = []
    for panel in "abc":
        label, what = F.ROWS[panel]

        def tsne_table(net, pl, pp, label=label):
            f, cls, count, img = F.test_features(net, pl, max_images=pp.get("tsne_images", 2000))
            xy = F.tsne(f)
            names = list(pl.classes)
            tab = pd.DataFrame({"variant": label, "x": xy[:, 0], "y": xy[:, 1], "class": [names[c] for c in cls],
                                "label_count": count, "image": img})
            return tab, info(pp, net, ["scikit-learn t-SNE, perplexity 30 (fewer points: n/4), PCA init, seed 0"])

        def draw_tsne(tab, pp, panel=panel, what=what):
            return draw.tsne_panel(tab, f"FedNCA-ML {tsne_fig}{panel}: t-SNE of test features, {what}",
                                   subtitle(pp, _dataset(pp, table)), pp.get("notes", []) + [F.MODEL_NOTE])

        out.append(_feature_job(f"{PAPER}/{tsne_fig}{panel}", p, table, panel, tsne_table, draw_tsne, data_root))

        def cos_table(net, pl, pp, label=label):
            names = list(pl.classes)
            S = F.cosine_matrix(F.prototypes(net, pl, len(names)))
            tab = pd.DataFrame([{"variant": label, "class_i": names[i], "class_j": names[j], "cosine": float(S[i, j])}
                                for i in range(len(names)) for j in range(len(names))])
            tab["mean_off_diagonal"] = F.mean_off_diagonal(S)
            return tab, info(pp, net)

        def draw_cos(tab, pp, panel=panel, what=what):
            return draw.cosine_panel(tab, f"FedNCA-ML {cos_fig}{panel}: cosine of class-wise mean features, {what}",
                                     subtitle(pp, _dataset(pp, table)), pp.get("notes", []) + [F.MODEL_NOTE])

        out.append(_feature_job(f"{PAPER}/{cos_fig}{panel}", p, table, panel, cos_table, draw_cos, data_root))
    return out


# ------------------------------------------------------------------ fig 5: LADM attention maps
def attention_figure(p: dict, data_root):
    """fig5: LADM attention of the full FedNCA-ML model (DermaMNIST, Table 5 setting) on two-class
    test composites, per ground-truth class, with the share of attention in that class's quadrant."""
    import pandas as pd

    from fedpaper.papers.fednca import draw  # matplotlib.pyplot (slow to import): imported when a figure is drawn, not with the package

    held = {}  # the composites' pixels and maps for the drawing, kept out of the table

    def attention_table(net, pl, pp):
        opts = dict(runs.data_spec(pp, "dermamnist")["options"])
        built = build_composites(opts.pop("source", "dermamnist"), opts, data_root)
        recs, shown = F.composite_attention(net, pl, built["splits"]["test"], list(pl.classes),
                                            n_images=pp.get("attention_images", 6))
        held["shown"], held["classes"] = shown, list(pl.classes)
        return pd.DataFrame(recs), {"datasets": [dict(pl.description, name="dermamnist")], "seeds": pp["seeds"][:1],
                                    "notes": list(pp["notes"]) + [F.MODEL_NOTE, F.round_note(net, pp), "attention: mean of the 3 largest "
                                              "per-head weights per token, divided by its sum over tokens (targets "
                                              "vague-16 uses a softmax, which flattens the map)"]}

    def draw_fn(tab, pp):
        return draw.attention_panel(held.get("shown", []), held.get("classes", []), tab,
                                    "FedNCA-ML fig5: LADM attention per ground-truth class (two-class composites)",
                                    subtitle(pp, "dermamnist"), pp.get("notes", []) + [F.MODEL_NOTE])

    return _feature_job(f"{PAPER}/fig5", p, "table5", "c", attention_table, draw_fn, data_root)
