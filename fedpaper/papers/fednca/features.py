"""Feature figures (Sec. 5.4, App. B.1; targets vague-15, -16): t-SNE of test features (figs 3, 6),
cosine similarity of class-wise mean features (figs 4, 7) and LADM attention maps (fig 5).

The models are the Table 5 / 7 variants (row 1: FC classifier, no LADM; row 3: LADM + ETF
classifier; row 6: full FedNCA-ML) of the profile's first seed: runs in the results store like
the tables' runs, trained with the engine's best-round snapshot (TrainConfig.keep_best): the global
model at the round of peak validation macro-AUC (the tables' selection rule, runs.SELECT_BY), with
its BatchNorm statistics.

Features: LADM models give one point per (test image, positive class) h_ic coloured by that class;
pooled models one point per image (its pooled feature), coloured by its first label and marked by
its label count. Class prototype = mean of the features of that class (h_ic over positives, or
pooled features of the images containing c); the heat map is their pairwise cosine similarity.
"""
from __future__ import annotations

import numpy as np
import torch

from fedpaper.runs.experiment import Execution, train_config

from fedpaper.papers.fednca import runs
from fedpaper.blocks.data.multilabel import CORNERS
from fedpaper.blocks.models import build_model

ROWS = {"a": ("none", "FC classifier, no LADM"), "b": ("ETF-Clf+LADM", "LADM + ETF classifier"),
        "c": ("ETF-Clf+LADM+L_Neg+L_Pos", "full FedNCA-ML (+ L_Neg, L_Pos)")}
MODEL_NOTE = ("features of the best-validation global model (round of peak validation macro-AUC, parameters and "
              "BatchNorm statistics), first seed")


def variant_spec(p: dict, table: str, label: str):
    """The feature model's run: the Table 5 / 7 run of variant `label` and the profile's first
    seed, keeping its global model at the round of peak runs.SELECT_BY (TrainConfig.keep_best)."""
    seed = p["seeds"][0]
    spec = next(s for k, s in runs.component_specs({**p, "seeds": [seed]}, table) if k["components"] == label)
    return spec.with_(training={"keep_best": runs.SELECT_BY})


def round_note(net, p: dict) -> str:
    return f"feature model: global model of round {getattr(net, 'best_round', '?')} of {p['rounds']}"


def model(spec, result: dict, pools):
    """The model of a `variant_spec` run (on the CPU, in eval mode) with its stored snapshot's
    parameters and buffers loaded; net.best_round is the snapshot's round."""
    cfg = train_config(spec.training, pools, Execution(device="cpu"))
    snap = result["snapshot"]
    net = build_model(cfg.model, **cfg.model_kwargs)
    net.load_state_dict({**snap["params"], **snap["buffers"]}, strict=True)
    net.best_round = snap["round"]
    return net.eval()


def _rows_for(net, pool, rows) -> torch.Tensor:
    """Pool rows (standardised floats) on the device of `net` (a cached model loads on the CPU;
    the pools live on the run's device, e.g. a GPU)."""
    return pool[torch.as_tensor(np.asarray(rows))].to(next(net.parameters()).device)


@torch.no_grad()
def test_features(net, pools, max_images: int = 2000, seed: int = 0):
    """(features [n, d], class of each point [n], label count of its image [n], image row [n])."""
    y = pools.y_test.cpu().numpy()
    rows = np.sort(np.random.default_rng(seed).permutation(len(y))[:max_images])
    feats, cls, count, img = [], [], [], []
    for i in range(0, len(rows), 256):
        r = rows[i:i + 256]
        out = net(_rows_for(net, pools.x_test, r))
        f = out["features"].float().cpu().numpy()
        for j, row in enumerate(r):
            pos = np.flatnonzero(y[row] > 0.5)
            if f.ndim == 3:  # LADM: one point per positive class
                for c in pos:
                    feats.append(f[j, c]), cls.append(c), count.append(len(pos)), img.append(row)
            elif len(pos):
                feats.append(f[j]), cls.append(pos[0]), count.append(len(pos)), img.append(row)
    return np.array(feats), np.array(cls), np.array(count), np.array(img)


@torch.no_grad()
def prototypes(net, pools, C: int, max_images: int = 2000, seed: int = 0) -> np.ndarray:
    """Class-wise mean test features [C, d] (h_ic over positives, or pooled features of the images
    that contain c)."""
    y = pools.y_test.cpu().numpy()
    rows = np.sort(np.random.default_rng(seed).permutation(len(y))[:max_images])
    sums, n = None, np.zeros(C)
    for i in range(0, len(rows), 256):
        r = rows[i:i + 256]
        f = net(_rows_for(net, pools.x_test, r))["features"].float().cpu().numpy()
        yy = y[r] > 0.5
        per = np.einsum("bc,bcd->cd", yy, f) if f.ndim == 3 else yy.T.astype(float) @ f
        sums = per if sums is None else sums + per
        n += yy.sum(0)
    return sums / np.maximum(n, 1)[:, None]


def cosine_matrix(P: np.ndarray) -> np.ndarray:
    Pn = P / np.maximum(np.linalg.norm(P, axis=1, keepdims=True), 1e-12)
    return Pn @ Pn.T


def mean_off_diagonal(S: np.ndarray) -> float:
    C = len(S)
    return float((S.sum() - np.trace(S)) / (C * (C - 1)))


def tsne(features: np.ndarray, seed: int = 0) -> np.ndarray:
    """scikit-learn t-SNE (perplexity 30, or n/4 for tiny sets), PCA initialisation, fixed seed."""
    from sklearn.manifold import TSNE

    perp = float(min(30.0, max(2.0, (len(features) - 1) / 4)))
    return TSNE(n_components=2, perplexity=perp, init="pca", random_state=seed).fit_transform(features)


@torch.no_grad()
def attention_maps(net, x: torch.Tensor, top: int = 3) -> np.ndarray:
    """Per image and class, the attention map over the token grid [B, C, H', W']: the mean of the
    `top` largest per-head weights at each token (targets vague-16, the official code), divided by
    its sum over tokens. The code re-normalises by a softmax instead; since the weights lie in
    [0, 1], a softmax makes every map nearly uniform, so the sum is used (a stated deviation)."""
    _, att, (h, w) = net.ladm(x, need_weights=True)  # [B, heads, C, S]
    k = min(top, att.shape[1])
    m = att.topk(k, dim=1).values.mean(1)  # [B, C, S]
    m = m / m.sum(-1, keepdim=True).clamp(min=1e-12)
    return m.reshape(*m.shape[:2], h, w).cpu().numpy()


def quadrant_mass(amap: np.ndarray, corner: str) -> float:
    """Share of an attention map [H, W] (summing to one) inside the canvas quadrant of `corner`
    ("tl", "tr", "bl", "br"): where a composite's part sits (data.multilabel geometry)."""
    h, w = amap.shape
    rows = slice(0, h // 2) if corner[0] == "t" else slice(h - h // 2, h)
    cols = slice(0, w // 2) if corner[1] == "l" else slice(w - w // 2, w)
    return float(amap[rows, cols].sum() / max(amap.sum(), 1e-12))


def composite_attention(net, pools, test_split, classes, n_images: int = 6, seed: int = 0):
    """For up to n_images two-class test composites: per positive class, the attention map and
    its mass in the quadrant of the part holding that class vs the other part's quadrant.
    test_split: the multilabel.CompositeSplit of the test rows (same order as pools.x_test)."""

    comp = np.flatnonzero(test_split.parts[:, 1] >= 0)
    rows = np.sort(np.random.default_rng(seed).permutation(comp)[:n_images])
    maps = attention_maps(net, _rows_for(net, pools.x_test, rows))
    recs, shown = [], []
    y = test_split.y
    for i, r in enumerate(rows):
        pos = np.flatnonzero(y[r] > 0.5)
        src = test_split.parts[r]
        for c in pos:
            # which part holds class c: the one whose single-class label is c (composites join two classes)
            own = 0 if c == pos[0] else 1
            own_corner, other_corner = CORNERS[test_split.corners[r, own]], CORNERS[test_split.corners[r, 1 - own]]
            recs.append({"image": int(r), "class": classes[c], "own_quadrant": own_corner,
                         "mass_own": quadrant_mass(maps[i, c], own_corner),
                         "mass_other": quadrant_mass(maps[i, c], other_corner), "source_rows": f"{src[0]};{src[1]}"})
        shown.append((test_split.x[r], pos, maps[i]))
    return recs, shown
