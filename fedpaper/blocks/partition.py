"""Client partitions of a labelled data set, as the four papers build them.

Every partitioner takes a label array (int labels, or a multi-hot matrix for FedNCA-ML), an integer
seed (``np.random.default_rng(seed)``; same seed -> same output) and returns a :class:`Partition`
whose clients hold disjoint int64 indices into that label array. Impossible requests raise
BadParameterError naming the parameter, its value and the allowed range; no partitioner returns
fewer samples than asked without saying so in ``Partition.meta`` (and in the log).

Partitioners (paper section in brackets):
- sparsity_partition          FedPALS Sec. 5 "sparsity sampling" (McMahan shards; targets vague-2)
- dirichlet_partition         FedPALS Sec. 5 / App. B.2 "Dirichlet sampling" (vague-11)
- private_label_partition     Private label sets, Sec. 5 and App. A (vague-5, vague-6)
- privlabels_split            Private label sets, App. A 80/20 split + unlabeled server set (vague-3, -4)
- class_presence_partition    FedNCA-ML Sec. 5.2 / App. C, Dirichlet + class-presence cap (vague-2)
- fedmt_partition             FedMT Sec. 4.1 / App. C.1.1 server + IID / non-IID clients (vague-12)
- resample_to_marginal        FedPALS target test set resampled to T(Y) (vague-3)
- oracle_partition            FedPALS App. A.3 Oracle: clients drawn i.i.d. from T(Y) (vague-10)
- thin_partition              a common fraction of every client's images per label (scaled-down profiles)
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from fedpaper.ground.errors import BadParameterError, check_range

log = logging.getLogger(__name__)

__all__ = [
    "Partition", "sparsity_partition", "dirichlet_partition", "dirichlet_marginals",
    "private_label_partition", "privlabels_split", "class_presence_partition", "fedmt_partition",
    "cifar100_correspondence_matrix", "resample_to_marginal", "oracle_partition", "round_counts",
    "thin_partition",
]


# =========================================================================== Partition
@dataclass
class Partition:
    """Disjoint client subsets of a data set.

    client_indices: one sorted int64 array per client, indices into the label array given.
    counts: [M, K] per-client label counts (for multi-hot labels: images per class, so a row may
        sum to more than the client's size).
    meta: the scheme name, every parameter, the seed and scheme-specific facts (JSON-friendly).
    """

    client_indices: list
    counts: np.ndarray
    meta: dict = field(default_factory=dict)

    @property
    def num_clients(self) -> int:
        return len(self.client_indices)

    @property
    def num_classes(self) -> int:
        return int(self.counts.shape[1])

    @property
    def sizes(self) -> np.ndarray:
        """Samples per client, int64 [M]."""
        return np.array([ix.size for ix in self.client_indices], dtype=np.int64)

    @property
    def marginals(self) -> np.ndarray:
        """Per-client label proportions [M, K] (rows of an empty client are zeros)."""
        tot = self.counts.sum(axis=1, keepdims=True).astype(float)
        return np.divide(self.counts, tot, out=np.zeros(self.counts.shape), where=tot > 0)

    @property
    def label_sets(self) -> list:
        """The labels present on each client (int64 arrays)."""
        return [np.flatnonzero(row > 0) for row in self.counts]

    def all_indices(self) -> np.ndarray:
        """Every assigned index, concatenated over clients."""
        return np.concatenate(self.client_indices) if self.client_indices else np.zeros(0, np.int64)

    def is_disjoint(self) -> bool:
        """True when no index is assigned twice."""
        idx = self.all_indices()
        return np.unique(idx).size == idx.size

    def to_frame(self, class_names=None):
        """The counts as a pandas DataFrame (clients x classes)."""
        import pandas as pd

        cols = list(class_names) if class_names is not None else list(range(self.num_classes))
        return pd.DataFrame(self.counts, columns=cols, index=pd.Index(range(self.num_clients), name="client"))

    def plot(self, ax=None, title=None, class_names=None, normalize: bool = True, horizontal: bool = False,
             target: int | None = None, client_names=None, legend: bool = True):
        """Stacked bar chart of each client's label distribution (FedPALS Figs 2b, 5b; FedNCA Figs 9-12).

        One bar per client, one colour per class, stacked proportions (``normalize=True``) or counts.
        ``target`` marks one client as the target (its tick reads "9 (target)"). Returns the Axes.
        """
        import matplotlib.pyplot as plt

        m, k = self.counts.shape
        if ax is None:
            width = max(4.0, 0.42 * m + 2.4)
            _, ax = plt.subplots(figsize=(width, 3.2) if not horizontal else (5.5, max(2.5, 0.3 * m + 1)))
        values = self.marginals if normalize else self.counts.astype(float)
        names = list(class_names) if class_names is not None else [f"Label {c}" for c in range(k)]
        colors = _class_colors(k)
        pos = np.arange(m)
        base = np.zeros(m)
        bar = ax.barh if horizontal else ax.bar
        for c in range(k):
            kw = {"left": base} if horizontal else {"bottom": base}
            bar(pos, values[:, c], 0.8, color=colors[c], edgecolor="white", linewidth=0.4, label=names[c], **kw)
            base = base + values[:, c]
        ticks = [str(i) for i in range(m)] if client_names is None else [str(s) for s in client_names]
        if target is not None:
            ticks[target] = f"{ticks[target]}\n(target)" if not horizontal else f"{ticks[target]} (target)"
        step = max(1, m // 25)
        (ax.set_yticks if horizontal else ax.set_xticks)(pos[::step], ticks[::step])
        client_axis, value_axis = (ax.set_ylabel, ax.set_xlabel) if horizontal else (ax.set_xlabel, ax.set_ylabel)
        client_axis("Client")
        value_axis("Label proportion" if normalize else "Number of samples")
        if normalize:
            (ax.set_xlim if horizontal else ax.set_ylim)(0, 1)
        (ax.set_ylim if horizontal else ax.set_xlim)(-0.6, m - 0.4)
        if horizontal:
            ax.invert_yaxis()
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        if legend:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8,
                      ncol=max(1, math.ceil(k / 20)), handlelength=1.0, title="Class", title_fontsize=8)
        if title:
            ax.set_title(title)
        return ax


def _class_colors(k: int) -> list:
    import matplotlib.pyplot as plt

    if k <= 10:
        return [plt.get_cmap("tab10")(i) for i in range(k)]
    if k <= 20:
        return [plt.get_cmap("tab20")(i) for i in range(k)]
    cmap = plt.get_cmap("turbo")
    return [cmap(i / max(1, k - 1)) for i in range(k)]


# =========================================================================== helpers
def _as_labels(labels) -> np.ndarray:
    y = np.asarray(labels)
    if y.ndim != 1:
        raise BadParameterError(f"labels has shape {y.shape}; expected a 1-D array of integer labels")
    if y.size and (not np.issubdtype(y.dtype, np.integer) or y.min() < 0):
        raise BadParameterError("labels must be non-negative integers")
    return y.astype(np.int64, copy=False)


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise BadParameterError(f"seed={seed!r} is not allowed; pass an int (partitions are seeded)")
    return int(seed)


def _num_classes(y: np.ndarray, num_classes) -> int:
    k = int(y.max()) + 1 if y.size else 0
    if num_classes is None:
        return k
    return check_range("num_classes", int(num_classes), max(k, 1))


def _restrict(y: np.ndarray, pool) -> tuple[np.ndarray, np.ndarray | None]:
    """Labels of the pool (indices into y) and the pool itself, checked for duplicates."""
    if pool is None:
        return y, None
    pool = np.asarray(pool, dtype=np.int64)
    if pool.ndim != 1 or (pool.size and (pool.min() < 0 or pool.max() >= y.size)):
        raise BadParameterError(f"pool must be a 1-D array of indices in [0, {y.size - 1}]")
    if np.unique(pool).size != pool.size:
        raise BadParameterError("pool contains repeated indices; every sample may be used once")
    return y[pool], pool


def _class_pools(y: np.ndarray, k: int, rng: np.random.Generator) -> list:
    """For each class, its indices in a random order (one permutation + stable sort; no Python loop over samples)."""
    order = rng.permutation(y.size)
    order = order[np.argsort(y[order], kind="stable")]
    bounds = np.concatenate([[0], np.cumsum(np.bincount(y, minlength=k))])
    return [order[bounds[c]:bounds[c + 1]] for c in range(k)]


def _label_counts(y: np.ndarray, clients: list, k: int) -> np.ndarray:
    return np.stack([np.bincount(y[ix], minlength=k) for ix in clients]) if clients else np.zeros((0, k), np.int64)


def _finish(clients: list, y: np.ndarray, k: int, pool, meta: dict) -> Partition:
    """Sort each client's indices, map them through `pool`, count labels, build the Partition."""
    clients = [np.sort(np.asarray(ix, dtype=np.int64)) for ix in clients]
    counts = _label_counts(y, clients, k)
    if pool is not None:
        clients = [np.sort(pool[ix]) for ix in clients]
    return Partition(client_indices=clients, counts=counts, meta=meta)


def round_counts(n: int, p) -> np.ndarray:
    """Integer counts summing to n, proportional to probability vector p (largest-remainder rounding)."""
    p = _check_marginal(p, "marginal")
    raw = p * n
    counts = np.floor(raw).astype(np.int64)
    short = int(n - counts.sum())
    counts[np.argsort(-(raw - counts), kind="stable")[:short]] += 1
    return counts


def _check_marginal(p, name: str) -> np.ndarray:
    p = np.asarray(p, dtype=float)
    if p.ndim != 1 or p.size == 0 or (p < 0).any() or not np.isclose(p.sum(), 1.0, atol=1e-6):
        raise BadParameterError(f"{name}={np.round(p, 4).tolist()} must be a probability vector (entries >= 0, sum 1)")
    return p / p.sum()


def _draw_label_sets(rng: np.random.Generator, m: int, k: int, c: int) -> np.ndarray:
    """[m, c] sorted label sets: each row c distinct labels uniformly at random, rows independent."""
    return np.sort(rng.random((m, k)).argsort(axis=1)[:, :c], axis=1)


def _equal_shards(pools: list, label_sets: np.ndarray, name: str) -> list:
    """Split each class pool into equal disjoint shards among the clients holding the class.

    Returns shards[i][j]: the shard of client i for its j-th label. Leftover samples of a class
    (pool size mod holders) stay unused. A zero-size shard is an error.
    """
    m = label_sets.shape[0]
    shards = [[None] * label_sets.shape[1] for _ in range(m)]
    for c, pool in enumerate(pools):
        rows, cols = np.nonzero(label_sets == c)
        if rows.size == 0:
            continue
        size = pool.size // rows.size
        if size == 0:
            raise BadParameterError(
                f"{name}: label {c} has {pool.size} samples for {rows.size} clients holding it; "
                f"use fewer clients or labels per client, or more data"
            )
        for j, (i, col) in enumerate(zip(rows, cols)):
            shards[i][col] = pool[j * size:(j + 1) * size]
    return shards


# =========================================================================== FedPALS: sparsity
def sparsity_partition(labels, num_clients: int, C: int, seed: int, num_classes: int | None = None,
                       samples_per_label: int | None = None, pool=None) -> Partition:
    """FedPALS "sparsity sampling" (Sec. 5, after McMahan et al. 2017; targets/fedpals.md vague-2).

    Each partition (the target included) draws C distinct labels uniformly at random, independently
    of the others. Each class's images are split into equal, disjoint shards among the partitions
    that hold the class (pool size // holders each; the remainder is unused). Each partition keeps
    the same number of images for each of its labels, the smallest of its shards, so it is balanced
    over its C labels. ``samples_per_label`` instead takes exactly that many per label (for quick
    profiles); it must not exceed any partition's balanced count. ``pool`` restricts the partition
    to those indices of ``labels`` (returned indices still index ``labels``).
    """
    seed = _check_seed(seed)
    y_all = _as_labels(labels)
    y, pool = _restrict(y_all, pool)
    k = _num_classes(y_all, num_classes)
    check_range("num_clients", num_clients, 1)
    check_range("C", C, 1, k)
    if samples_per_label is not None:
        check_range("samples_per_label", samples_per_label, 1)
    rng = np.random.default_rng(seed)
    label_sets = _draw_label_sets(rng, num_clients, k, C)
    pools = _class_pools(y, k, rng)
    shards = _equal_shards(pools, label_sets, f"C={C}, num_clients={num_clients}")
    balanced = np.array([min(s.size for s in row) for row in shards], dtype=np.int64)
    if samples_per_label is not None and samples_per_label > balanced.min():
        raise BadParameterError(
            f"samples_per_label={samples_per_label} is out of range; it must lie in [1, {int(balanced.min())}] "
            f"(the smallest balanced per-label count over the clients for this seed)"
        )
    per_label = balanced if samples_per_label is None else np.full(num_clients, samples_per_label)
    clients = [np.concatenate([s[:per_label[i]] for s in row]) for i, row in enumerate(shards)]
    meta = {
        "scheme": "sparsity", "num_clients": num_clients, "C": C, "seed": seed, "num_classes": k,
        "samples_per_label": samples_per_label, "label_sets": label_sets.tolist(),
        "per_label": per_label.tolist(), "source": "FedPALS Sec. 5 sparsity sampling; targets vague-2",
    }
    return _finish(clients, y, k, pool, meta)


# =========================================================================== FedPALS: Dirichlet
def _dirichlet(rng: np.random.Generator, beta: float, m: int, k: int) -> np.ndarray:
    p = rng.dirichlet(np.full(k, float(beta)), size=m)
    bad = ~np.isfinite(p).all(axis=1) | (p.sum(axis=1) <= 0)
    if bad.any():  # extremely small beta can underflow: the limit is a one-hot vector
        p[bad] = np.eye(k)[rng.integers(k, size=int(bad.sum()))]
    return p


def dirichlet_marginals(num_clients: int, num_classes: int, beta: float, seed: int) -> np.ndarray:
    """p_i ~ Dir_K(beta) for each client i, [M, K] (FedPALS Sec. 5 / App. B.2).

    The same seed gives the same p as the first draw of ``dirichlet_partition``.
    """
    seed = _check_seed(seed)
    check_range("num_clients", num_clients, 1)
    check_range("num_classes", num_classes, 1)
    _check_beta(beta)
    return _dirichlet(np.random.default_rng(seed), beta, num_clients, num_classes)


def _check_beta(beta: float) -> None:
    if not (np.isfinite(beta) and beta > 0):
        raise BadParameterError(f"beta={beta!r} is out of range; it must be > 0 (the Dirichlet concentration)")


def _fill(rng, n: int, p: np.ndarray, left: np.ndarray, redraw: bool) -> tuple[np.ndarray, int]:
    """Label counts for n draws from p, capped by what is left, and how many draws were re-drawn.

    With redraw, the deficit is re-drawn from p restricted to classes that still have images
    (renormalised; uniform over them if p gives them no mass)."""
    got = np.minimum(rng.multinomial(n, p), left)
    deficit = n - got.sum()
    first_deficit = int(deficit)
    while redraw and deficit > 0 and (left - got).sum() > 0:
        room = left - got
        q = np.where(room > 0, p, 0.0)
        q = q / q.sum() if q.sum() > 0 else (room > 0) / (room > 0).sum()
        got += np.minimum(rng.multinomial(deficit, q), room)
        deficit = n - got.sum()
    return got, first_deficit if redraw else 0


def dirichlet_partition(labels, num_clients: int, beta: float, seed: int, samples_per_client: int | None = None,
                        num_classes: int | None = None, on_shortfall: str = "reduce", rounds: int = 10,
                        pool=None) -> Partition:
    """FedPALS "Dirichlet sampling" (Sec. 5, App. B.2; targets/fedpals.md vague-11).

    For every partition i (the target included) p_i ~ Dir_K(beta) and the client's label counts are
    Multinomial(n, p_i), n = samples_per_client (default len(labels) // num_clients), drawn without
    replacement so partitions are disjoint. The draws are interleaved: in each of ``rounds`` rounds
    every client (in a random order) draws its next n / rounds samples, so clients that favour the
    same class share it instead of the first one taking all (without exhaustion this is exactly
    Multinomial(n, p_i)). When a class runs out, ``on_shortfall`` decides:
    - "reduce" (default, vague-11): the client gets fewer images; its label marginal stays close to
      p_i. Recorded per client in ``meta["shortfall"]`` (and logged at INFO level). With the default
      n = len(labels) // num_clients the clients together ask for every image, so at small beta
      shortfalls are the rule (beta=0.1 on CIFAR-10: client sizes of roughly 1,500 to 5,000);
    - "redraw": the missing draws are re-drawn from p_i restricted to the classes that still have
      images, so every client gets exactly n, at the price of marginals less concentrated than p_i
      (``meta["redrawn"]`` counts the re-drawn samples per client);
    - "error": raise BadParameterError.
    ``meta["p"]`` holds the drawn p_i (the same as ``dirichlet_marginals`` with this seed).
    """
    seed = _check_seed(seed)
    y_all = _as_labels(labels)
    y, pool = _restrict(y_all, pool)
    k = _num_classes(y_all, num_classes)
    check_range("num_clients", num_clients, 1, max(1, y.size))
    _check_beta(beta)
    check_range("on_shortfall", on_shortfall, allowed={"redraw", "reduce", "error"})
    check_range("rounds", rounds, 1)
    n = y.size // num_clients if samples_per_client is None else samples_per_client
    check_range("samples_per_client", n, 1, y.size // num_clients)
    rng = np.random.default_rng(seed)
    p = _dirichlet(rng, beta, num_clients, k)
    pools = _class_pools(y, k, rng)
    left = np.array([pl.size for pl in pools])
    counts = np.zeros((num_clients, k), dtype=np.int64)
    wanted = np.zeros(num_clients, dtype=np.int64)
    redrawn = np.zeros(num_clients, dtype=np.int64)
    chunks = np.diff(np.linspace(0, n, min(rounds, n) + 1).round().astype(np.int64))
    for chunk in chunks:
        for i in rng.permutation(num_clients):
            got, again = _fill(rng, int(chunk), p[i], left, on_shortfall == "redraw")
            counts[i] += got
            redrawn[i] += again
            left -= got
            wanted[i] += chunk
    shortfall = wanted - counts.sum(axis=1)
    if shortfall.any():
        msg = (f"dirichlet_partition(beta={beta}, seed={seed}): classes ran out, so clients "
               f"{np.flatnonzero(shortfall).tolist()} got {shortfall[shortfall > 0].tolist()} fewer than n={n}")
        if on_shortfall == "error":
            raise BadParameterError(f"samples_per_client={n} is too large for on_shortfall='error': {msg}")
        log.info(msg)
    clients = _take_sequential(pools, counts, "label", "samples_per_client", n)
    meta = {
        "scheme": "dirichlet", "num_clients": num_clients, "beta": float(beta), "seed": seed, "num_classes": k,
        "samples_per_client": int(n), "on_shortfall": on_shortfall, "rounds": int(chunks.size), "p": p.tolist(),
        "shortfall": shortfall.tolist(), "redrawn": redrawn.tolist(),
        "source": "FedPALS Sec. 5 Dirichlet sampling; targets vague-11",
    }
    return _finish(clients, y, k, pool, meta)


# =========================================================================== private label sets
def private_label_partition(labels, num_clients: int, L: int, samples_per_client: int = 2000, *, seed: int,
                            num_classes: int | None = None, pool=None) -> Partition:
    """Clients with private label sets (Breitholtz et al., Sec. 5 and App. A; targets/privlabels.md vague-5, -6).

    Each client draws L distinct labels uniformly at random, independently (no coverage guarantee).
    Each label's pool is split into equal, disjoint shards among the clients holding it; each
    client's union of shards is then subsampled uniformly at random (not stratified) to
    ``samples_per_client``. A client with fewer samples keeps all of them; this is logged and
    recorded in ``meta["short_clients"]`` ({client: size}). Pass ``pool`` = the client pool of
    ``privlabels_split`` to keep validation and server images out.
    """
    seed = _check_seed(seed)
    y_all = _as_labels(labels)
    y, pool = _restrict(y_all, pool)
    k = _num_classes(y_all, num_classes)
    check_range("num_clients", num_clients, 1)
    check_range("L", L, 1, k)
    check_range("samples_per_client", samples_per_client, 1)
    rng = np.random.default_rng(seed)
    label_sets = _draw_label_sets(rng, num_clients, k, L)
    pools = _class_pools(y, k, rng)
    shards = _equal_shards(pools, label_sets, f"L={L}, num_clients={num_clients}")
    clients, short = [], {}
    for i, row in enumerate(shards):
        union = np.concatenate(row)
        if union.size > samples_per_client:
            union = rng.choice(union, size=samples_per_client, replace=False)
        elif union.size < samples_per_client:
            short[i] = int(union.size)
        clients.append(union)
    if short:
        log.warning("private_label_partition(L=%s, seed=%s): clients %s have fewer than %s samples; kept all",
                    L, seed, short, samples_per_client)
    meta = {
        "scheme": "private_labels", "num_clients": num_clients, "L": L, "seed": seed, "num_classes": k,
        "samples_per_client": samples_per_client, "label_sets": label_sets.tolist(), "short_clients": short,
        "source": "Private label sets Sec. 5 / App. A; targets vague-5, vague-6",
    }
    return _finish(clients, y, k, pool, meta)


def privlabels_split(labels, val_fraction: float = 0.2, server_size: int | None = None, *,
                     seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split the official training set as the private-label-sets paper does (App. A; vague-3, vague-4).

    A stratified split into (1 - val_fraction) training part and val_fraction validation set; the
    unlabeled server set (``server_size``, default 10% of len(labels): 5,000 for CIFAR-10, 6,000 for
    Fashion-MNIST) is drawn uniformly from the training part. Returns sorted int64 arrays
    ``(client_pool, val_idx, server_idx)``, pairwise disjoint; ``client_pool`` is the training part
    without the server set, to be passed as ``pool`` to ``private_label_partition``.
    """
    seed = _check_seed(seed)
    y = _as_labels(labels)
    if not 0 < val_fraction < 1:
        raise BadParameterError(f"val_fraction={val_fraction!r} is out of range; it must lie in (0, 1)")
    rng = np.random.default_rng(seed)
    pools = _class_pools(y, _num_classes(y, None), rng)
    n_val = [int(round(val_fraction * pl.size)) for pl in pools]
    val = np.concatenate([pl[:nv] for pl, nv in zip(pools, n_val)] or [np.zeros(0, np.int64)])
    train = np.concatenate([pl[nv:] for pl, nv in zip(pools, n_val)] or [np.zeros(0, np.int64)])
    if server_size is None:
        server_size = int(round(0.1 * y.size))
    check_range("server_size", server_size, 0, train.size)
    server = rng.choice(train, size=server_size, replace=False)
    client_pool = np.setdiff1d(train, server, assume_unique=True)
    return np.sort(client_pool), np.sort(val), np.sort(server)


# =========================================================================== FedNCA-ML
def _allowed_sets(rng, m: int, k: int, n_allowed: int, max_tries: int) -> np.ndarray:
    for _ in range(max_tries):
        mask = np.zeros((m, k), dtype=bool)
        np.put_along_axis(mask, rng.random((m, k)).argsort(axis=1)[:, :n_allowed], True, axis=1)
        if mask.any(axis=0).all():
            return mask
    raise BadParameterError(f"could not cover all {k} classes in {max_tries} draws; raise gamma or num_clients")


def class_presence_partition(label_matrix, num_clients: int, beta: float, gamma: float, seed: int,
                             negatives: str = "spread", max_tries: int = 1000) -> Partition:
    """FedNCA-ML multi-label partition: Dirichlet(beta) skew plus a class-presence cap gamma (Sec. 5.2, App. C).

    Follows targets/fednca.md vague-2: (i) each client gets an allowed set of round(gamma * K)
    classes at random (the paper says "at most gamma x K": 5 of 10, 5 of 7 at gamma=0.71, 10 of 20,
    7 of 14), redrawn until every class is allowed somewhere; (ii) for each class c, proportions
    p_c ~ Dir(beta) over the clients allowed c; (iii) each image with at least one positive label
    goes to a client drawn with probability proportional to the product of p_c over its labels,
    among the clients whose allowed set contains all its labels; images with no such client are
    dropped (``meta["n_dropped"]``); (iv) all-negative images (ChestX-ray14 "No Finding") are
    shuffled and split into num_clients equal parts (``negatives="spread"``) or left out ("drop").
    ``counts`` are images per class per client; ``meta["negatives_per_client"]`` the all-negative ones.
    """
    seed = _check_seed(seed)
    ymat = np.asarray(label_matrix)
    if ymat.ndim != 2 or not np.isin(ymat, (0, 1)).all():
        raise BadParameterError(f"label_matrix has shape {ymat.shape}; expected an [N, K] multi-hot 0/1 matrix")
    n, k = ymat.shape
    ymat = ymat.astype(bool)
    check_range("num_clients", num_clients, 1)
    _check_beta(beta)
    if not 0 < gamma <= 1:
        raise BadParameterError(f"gamma={gamma!r} is out of range; it must lie in (0, 1]")
    check_range("negatives", negatives, allowed={"spread", "drop"})
    n_allowed = max(1, int(math.floor(gamma * k + 0.5)))
    if n_allowed * num_clients < k:
        raise BadParameterError(
            f"gamma={gamma} allows {n_allowed} of {k} classes per client, too few for num_clients={num_clients} "
            f"to cover every class; gamma must be at least about {math.ceil(k / num_clients) / k:.3g}"
        )
    rng = np.random.default_rng(seed)
    allowed = _allowed_sets(rng, num_clients, k, n_allowed, max_tries)
    logp = np.full((k, num_clients), -np.inf)
    for c in range(k):
        holders = np.flatnonzero(allowed[:, c])
        logp[c, holders] = np.log(np.maximum(rng.dirichlet(np.full(holders.size, float(beta))), 1e-300))
    positive = np.flatnonzero(ymat.any(axis=1))
    assign = np.full(n, -1, dtype=np.int64)
    patterns, inverse = np.unique(ymat[positive], axis=0, return_inverse=True)
    inverse = inverse.ravel()
    for j, pat in enumerate(patterns):
        ok = allowed[:, pat].all(axis=1)
        if not ok.any():
            continue
        lw = logp[pat].sum(axis=0)[ok]
        w = np.exp(lw - lw.max())
        members = positive[inverse == j]
        assign[members] = np.flatnonzero(ok)[rng.choice(ok.sum(), size=members.size, p=w / w.sum())]
    n_dropped = int((assign[positive] < 0).sum())
    negative = np.flatnonzero(~ymat.any(axis=1))
    neg_parts = np.array_split(rng.permutation(negative), num_clients) if negatives == "spread" else None
    clients = []
    for i in range(num_clients):
        ix = np.flatnonzero(assign == i)
        clients.append(np.sort(np.concatenate([ix, neg_parts[i]]) if neg_parts is not None else ix))
    counts = np.stack([ymat[ix].sum(axis=0) for ix in clients]).astype(np.int64)
    if n_dropped:
        log.warning("class_presence_partition: %d images have no client allowed all their labels; dropped", n_dropped)
    meta = {
        "scheme": "class_presence", "num_clients": num_clients, "beta": float(beta), "gamma": float(gamma),
        "seed": seed, "num_classes": k, "classes_per_client": n_allowed, "negatives": negatives,
        "allowed_sets": [np.flatnonzero(r).tolist() for r in allowed], "n_dropped": n_dropped,
        "negatives_per_client": [int(p.size) for p in neg_parts] if neg_parts is not None else [0] * num_clients,
        "n_negative": int(negative.size), "source": "FedNCA-ML Sec. 5.2 / App. C; targets vague-2",
    }
    return Partition(client_indices=clients, counts=counts, meta=meta)


# =========================================================================== FedMT
def cifar100_correspondence_matrix(fine_to_coarse) -> np.ndarray:
    """The J x K correspondence matrix M, M[j, k] = 1 if fine class k is in superclass j (FedMT App. C.1.1).

    For CIFAR-100 J = 20, K = 100; float32.
    """
    f2c = _as_labels(fine_to_coarse)
    m = np.zeros((int(f2c.max()) + 1, f2c.size), dtype=np.float32)
    m[f2c, np.arange(f2c.size)] = 1.0
    return m


def _take_sequential(pools: list, demand: np.ndarray, what: str, param: str, value) -> list:
    """Split each pool among clients by demand[client, pool] (without replacement, in client order)."""
    avail = np.array([pl.size for pl in pools])
    total = demand.sum(axis=0)
    if (total > avail).any():
        c = int(np.argmax(total - avail))
        raise BadParameterError(
            f"{param}={value} is too large: {what} {c} would need {int(total[c])} images but only "
            f"{int(avail[c])} remain"
        )
    ends = np.cumsum(demand, axis=0)
    starts = ends - demand
    return [np.concatenate([pools[c][starts[i, c]:ends[i, c]] for c in range(len(pools))])
            for i in range(demand.shape[0])]


def fedmt_partition(fine_labels, n_server_per_class: int, num_clients: int, samples_per_client: int,
                    iid: bool = True, gamma: float | None = None, *, seed: int, fine_to_coarse=None
                    ) -> tuple[np.ndarray, Partition]:
    """FedMT data split (Sec. 4.1, App. C.1.1; targets/fedmt.md "Data splits" and vague-12).

    The server gets ``n_server_per_class`` random images of every fine class (labelled in the fine
    space). The rest goes to ``num_clients`` clients with ``samples_per_client`` images each (clients
    only see superclass labels; the unused remainder stays unused, ``meta["n_unused"]``):
    - IID: balanced in fine classes, samples_per_client // K per class plus one extra image for
      (samples_per_client mod K) random classes per client;
    - non-IID (Lu et al. 2021, vague-12): over the J superclasses every class gets a prior
      U[0.35, 0.55]; client c's majority superclasses 2c, 2c+1 (mod J) get prior 4 / (1 - gamma);
      priors are normalised and the client's superclass counts are Multinomial(samples_per_client,
      prior); images are drawn without replacement, uniformly within a superclass.
    Returns ``(server_idx, partition)``; partition.counts are over the fine classes and
    ``meta["coarse_counts"]`` over the superclasses.
    """
    seed = _check_seed(seed)
    y = _as_labels(fine_labels)
    k = _num_classes(y, None)
    per_class = np.bincount(y, minlength=k)
    check_range("n_server_per_class", n_server_per_class, 0, int(per_class.min()))
    check_range("num_clients", num_clients, 1)
    check_range("samples_per_client", samples_per_client, 1)
    f2c = None if fine_to_coarse is None else _as_labels(fine_to_coarse)
    if not iid:
        if f2c is None or f2c.size != k:
            raise BadParameterError(f"fine_to_coarse must map all {k} fine classes to superclasses when iid=False")
        if gamma is None or not 0 <= gamma < 1:
            raise BadParameterError(f"gamma={gamma!r} is out of range; it must lie in [0, 1) when iid=False")
    rng = np.random.default_rng(seed)
    pools = _class_pools(y, k, rng)
    server = np.sort(np.concatenate([pl[:n_server_per_class] for pl in pools]))
    rest = [pl[n_server_per_class:] for pl in pools]
    meta = {"scheme": "fedmt", "n_server_per_class": n_server_per_class, "num_clients": num_clients,
            "samples_per_client": samples_per_client, "iid": iid, "gamma": gamma, "seed": seed, "num_classes": k,
            "source": "FedMT Sec. 4.1 / App. C.1.1; targets vague-12"}
    if iid:
        demand = np.full((num_clients, k), samples_per_client // k, dtype=np.int64)
        extra = samples_per_client % k
        if extra:
            extra_cls = rng.random((num_clients, k)).argsort(axis=1)[:, :extra]
            np.put_along_axis(demand, extra_cls, demand[0, 0] + 1, axis=1)
        clients = _take_sequential(rest, demand, "fine class", "samples_per_client", samples_per_client)
    else:
        j = int(f2c.max()) + 1
        prior = rng.uniform(0.35, 0.55, size=(num_clients, j))
        major = np.stack([(2 * np.arange(num_clients)) % j, (2 * np.arange(num_clients) + 1) % j], axis=1)
        np.put_along_axis(prior, major, 4.0 / (1.0 - gamma), axis=1)
        prior /= prior.sum(axis=1, keepdims=True)
        demand = np.stack([rng.multinomial(samples_per_client, pr) for pr in prior])
        coarse_pools = []
        for s in range(j):
            members = np.concatenate([rest[c] for c in np.flatnonzero(f2c == s)])
            coarse_pools.append(rng.permutation(members))
        clients = _take_sequential(coarse_pools, demand, "superclass", "samples_per_client", samples_per_client)
        meta.update(priors=prior.tolist(), majority_superclasses=major.tolist())
    part = _finish(clients, y, k, None, meta)
    if f2c is not None:
        m = cifar100_correspondence_matrix(f2c)
        meta["coarse_counts"] = (part.counts @ m.T.astype(np.int64)).tolist()
    meta["n_unused"] = int(y.size - server.size - part.sizes.sum())
    return server, part


# =========================================================================== FedPALS targets and Oracle
def _max_fitting_n(p: np.ndarray, avail: np.ndarray) -> int:
    """The largest n with round_counts(n, p) <= avail elementwise."""
    pos = p > 0
    n = int(np.floor(np.min(avail[pos] / p[pos]) + 1e-9))
    while n > 0 and (round_counts(n, p) > avail).any():
        n -= 1
    return n


def resample_to_marginal(labels, marginal, seed: int, n: int | None = None) -> np.ndarray:
    """Indices of a subsample whose label proportions equal ``marginal`` (FedPALS target test set, vague-3).

    Label counts are ``round_counts(n, marginal)`` (exact up to whole samples), images drawn
    uniformly without replacement within each label. With ``n=None`` the largest such subsample
    is taken: for a marginal uniform over some labels with equal test counts (sparsity targets),
    that is every test image of those labels. Returns sorted int64 indices into ``labels``.
    """
    seed = _check_seed(seed)
    y = _as_labels(labels)
    p = _check_marginal(marginal, "marginal")
    if y.size and y.max() >= p.size:
        raise BadParameterError(f"marginal has {p.size} entries but labels go up to {int(y.max())}")
    avail = np.bincount(y, minlength=p.size)
    n_max = _max_fitting_n(p, avail)
    if n is None:
        n = n_max
    check_range("n", n, 1, n_max)
    rng = np.random.default_rng(seed)
    pools = _class_pools(y, p.size, rng)
    counts = round_counts(n, p)
    return np.sort(np.concatenate([pl[:c] for pl, c in zip(pools, counts)]))


def oracle_partition(labels, target_marginal, sizes, seed: int, pool=None, exact: bool = True,
                     scale_to_fit: bool = False) -> Partition:
    """FedPALS Oracle (App. A.3; targets/fedpals.md vague-10): every client distributed like the target.

    Client i gets ``sizes[i]`` images whose labels follow T: counts ``round_counts(sizes[i], T)``
    (``exact=True``) or Multinomial(sizes[i], T) (i.i.d. draws), images drawn without replacement
    so clients are disjoint. If the labels T puts mass on do not have enough images, this raises
    BadParameterError, unless ``scale_to_fit=True``: then all sizes are scaled by the largest common
    factor that fits (logged, ``meta["scale"]``). Pass ``pool`` to exclude e.g. the target's own
    partition.
    """
    seed = _check_seed(seed)
    y_all = _as_labels(labels)
    y, pool = _restrict(y_all, pool)
    p = _check_marginal(target_marginal, "target_marginal")
    if y.size and y.max() >= p.size:
        raise BadParameterError(f"target_marginal has {p.size} entries but labels go up to {int(y.max())}")
    sizes = np.asarray(sizes, dtype=np.int64).ravel()
    if sizes.size < 1 or (sizes < 1).any():
        raise BadParameterError(f"sizes={sizes.tolist()} must be a non-empty list of client sizes >= 1")
    rng = np.random.default_rng(seed)
    avail = np.bincount(y, minlength=p.size)

    def demand_for(sz):
        if exact:
            return np.stack([round_counts(int(s), p) for s in sz])
        return np.stack([rng.multinomial(int(s), p) for s in sz])

    scale = 1.0
    demand = demand_for(sizes)
    if (demand.sum(axis=0) > avail).any():
        fit = _max_fitting_n(p, avail)
        if not scale_to_fit:
            raise BadParameterError(
                f"sizes (total {int(sizes.sum())}) is out of range for this target: its labels hold only enough "
                f"images for a total of about {fit}; reduce sizes or pass scale_to_fit=True"
            )
        lo, hi = 0.0, 1.0
        for _ in range(40):  # bisection on the common scale factor (exact counts)
            mid = (lo + hi) / 2
            sz = np.maximum(1, np.floor(sizes * mid)).astype(np.int64)
            lo, hi = (mid, hi) if (demand_for(sz).sum(axis=0) <= avail).all() else (lo, mid)
        scale = lo
        sizes = np.maximum(1, np.floor(sizes * scale)).astype(np.int64)
        demand = demand_for(sizes)
        while (demand.sum(axis=0) > avail).any():  # multinomial draws may still overshoot
            sizes = np.maximum(1, sizes - 1)
            demand = demand_for(sizes)
        log.warning("oracle_partition: sizes scaled by %.4f to fit the target's labels", scale)
    pools = _class_pools(y, p.size, rng)
    clients = _take_sequential(pools, demand, "label", "sizes", sizes.tolist())
    meta = {"scheme": "oracle", "target_marginal": p.tolist(), "sizes": sizes.tolist(), "seed": seed,
            "exact": exact, "scale_to_fit": scale_to_fit, "scale": scale, "num_classes": int(p.size),
            "source": "FedPALS App. A.3 Oracle; targets vague-10"}
    return _finish(clients, y, int(p.size), pool, meta)


# =========================================================================== scaled-down profiles
def thin_partition(labels, part: Partition, fraction: float, seed: int) -> Partition:
    """Keep the same fraction of every client's images of every label (scaled-down profiles).

    Client i keeps ``round(fraction * n_ic)`` (halves up) of its ``n_ic`` images of label c, drawn
    uniformly without replacement, so each client's label counts are within half an image of
    ``fraction`` times the full ones: its label marginal and the clients' relative sizes (FedAvg's
    n_i / N, eq. 4) are those of ``part`` up to rounding to whole images (a label with a single
    image in a large client may round away; a client that would be left empty keeps one image of
    its largest label). ``fraction=1`` returns ``part`` itself. ``labels`` is the label array
    ``part`` indexes. ``meta`` gains ``data_fraction`` and ``full_sizes`` (the sizes before).
    """
    seed = _check_seed(seed)
    y = _as_labels(labels)
    if isinstance(fraction, bool) or not (isinstance(fraction, (int, float, np.floating)) and 0 < fraction <= 1):
        raise BadParameterError(f"fraction={fraction!r} is out of range; it must lie in (0, 1] "
                                "(the share of each client's images kept per label)")
    if float(fraction) == 1.0:
        return part
    rng = np.random.default_rng([seed, 11])
    clients = []
    for ix in part.client_indices:
        ix = np.asarray(ix, dtype=np.int64)
        labs, cnt = np.unique(y[ix], return_counts=True)
        want = np.floor(fraction * cnt + 0.5).astype(np.int64)
        if cnt.size and want.sum() == 0:
            want[np.argmax(cnt)] = 1
        keep = [rng.choice(ix[y[ix] == c], size=int(w), replace=False) for c, w in zip(labs, want)]
        clients.append(np.sort(np.concatenate(keep)) if keep else np.zeros(0, np.int64))
    k = part.num_classes
    meta = dict(part.meta, data_fraction=float(fraction), full_sizes=part.sizes.tolist())
    return Partition(client_indices=clients, counts=_label_counts(y, clients, k), meta=meta)
