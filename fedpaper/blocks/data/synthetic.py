"""Synthetic data: class-structured images for smoke tests, and the FedPALS 2-D Gaussian task.

Nothing here stands in for a paper's data set in a reported result: ``synthetic_images`` is marked
``synthetic=True`` with source "SYNTHETIC (smoke/test only)".
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from fedpaper.ground.errors import BadParameterError, check_range
from fedpaper.blocks.partition import round_counts
from fedpaper.blocks.data.base import ImageDataset

NAME = "synthetic-images"
SOURCE = "SYNTHETIC (smoke/test only)"


def _check_shape(shape) -> tuple[int, int, int]:
    shape = tuple(int(s) for s in shape)
    if len(shape) != 3 or shape[0] not in (1, 3) or min(shape) < 1:
        raise BadParameterError(f"shape={shape!r} is not allowed; use (channels in 1 or 3, height, width)")
    return shape


def _prototypes(rng: np.random.Generator, num_classes: int, shape: tuple[int, int, int]) -> np.ndarray:
    """One fixed blocky pattern per class: random 4x4-pixel blocks in [0, 255], float [K, C, H, W]."""
    c, h, w = shape
    coarse = rng.uniform(0, 255, size=(num_classes, c, -(-h // 4), -(-w // 4)))
    full = coarse.repeat(4, axis=2).repeat(4, axis=3)
    return full[:, :, :h, :w]


def _draw(rng, protos, n: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    k = protos.shape[0]
    y = rng.permutation(np.arange(n) % k).astype(np.int64)  # balanced classes, random order
    x = protos[y] + rng.normal(0.0, noise, size=(n, *protos.shape[1:]))
    return np.clip(np.rint(x), 0, 255).astype(np.uint8), y


def synthetic_images(num_classes: int = 10, n_train: int = 2000, n_test: int = 500,
                     shape=(1, 28, 28), seed: int = 0, noise: float = 40.0) -> ImageDataset:
    """Small class-structured uint8 images that a CNN learns in a few steps (smoke/test data only).

    Each class has a fixed random prototype (4x4-pixel blocks of random grey levels); every image is
    its class prototype plus Gaussian pixel noise (std `noise` grey levels), clipped to [0, 255].
    Classes are balanced. Deterministic for a given seed.
    """
    check_range("num_classes", num_classes, 2)
    check_range("n_train", n_train, num_classes)
    check_range("n_test", n_test, 1)
    check_range("noise", noise, 0.0)
    shape = _check_shape(shape)
    rng = np.random.default_rng(seed)
    protos = _prototypes(rng, num_classes, shape)
    x_train, y_train = _draw(rng, protos, n_train, noise)
    x_test, y_test = _draw(rng, protos, n_test, noise)
    return ImageDataset(
        name=NAME,
        x_train=torch.from_numpy(x_train),
        y_train=torch.from_numpy(y_train),
        x_test=torch.from_numpy(x_test),
        y_test=torch.from_numpy(y_test),
        classes=[f"class {k}" for k in range(num_classes)],
        source=SOURCE,
        synthetic=True,
        lossy=False,
        extra={"seed": seed, "noise": noise},
    )


# --------------------------------------------------------------------------- FedPALS synthetic task
#: Class means of p(X | Y=y) = N(mu_y, I) (FedPALS App. A.5; the plain text drops the minus signs,
#: the LaTeX source keeps them: mu_2 = [1.2, -1.6], mu_3 = [4.6, -5.4]).
GAUSSIAN_MEANS = np.array([[6.0, 4.6], [1.2, -1.6], [4.6, -5.4]])
#: Client label marginals and sizes (FedPALS App. B.4).
S1 = np.array([0.5, 0.5, 0.0])
N1 = 40
S2 = np.array([0.5, 0.0, 0.5])
N2 = 18
#: The two ends of the target path T_delta (App. B.4): T_0 lies in Conv(S), T_1 is farthest from it.
T_NEAR = np.array([0.5, 0.25, 0.25])
T_FAR = np.array([0.0, 0.5, 0.5])


def target_marginal(delta: float) -> np.ndarray:
    """T_delta = (1 - delta) [0.5, 0.25, 0.25] + delta [0, 0.5, 0.5], delta in [0, 1] (FedPALS App. B.4).

    Its squared distance to Conv(S1, S2) is 0.375 delta^2 (the x-axis of Fig. 9, vague-18).
    """
    check_range("delta", delta, 0.0, 1.0)
    return (1.0 - delta) * T_NEAR + delta * T_FAR


def label_counts(label_marginal, n: int) -> np.ndarray:
    """Integer counts summing to n, proportional to the marginal (largest-remainder rounding)."""
    return round_counts(n, label_marginal)


def sample_gaussian(label_marginal, n: int, seed, exact: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """n points of the FedPALS synthetic task: y ~ label_marginal, x | y ~ N(mu_y, I) (App. A.5, B.4).

    With ``exact=True`` (default) the label counts are the marginal times n, rounded (S1 with n=40
    gives 20/20/0); with ``exact=False`` they are Multinomial(n, label_marginal). Rows come in a
    random order. `seed` is an int or a numpy Generator. Returns x float32 [n, 2], y int64 [n].
    """
    check_range("n", n, 0)
    p = np.asarray(label_marginal, dtype=float)
    if p.shape != (len(GAUSSIAN_MEANS),):
        raise BadParameterError(f"label_marginal has {p.size} entries; the task has {len(GAUSSIAN_MEANS)} classes")
    rng = np.random.default_rng(seed)
    counts = label_counts(p, n) if exact else rng.multinomial(n, p / p.sum())
    y = rng.permutation(np.repeat(np.arange(len(p)), counts)).astype(np.int64)
    x = GAUSSIAN_MEANS[y] + rng.standard_normal((n, 2))
    return x.astype(np.float32), y


@dataclass
class GaussianTask:
    """One draw of the FedPALS synthetic task (App. A.5, B.4) at target parameter delta."""

    delta: float
    client_marginals: np.ndarray  # [2, 3]: S1, S2
    target_marginal: np.ndarray  # [3]: T_delta
    clients: list  # [(x [n_i, 2] float32, y [n_i] int64)] for the two clients
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    meta: dict = field(default_factory=dict)


def gaussian_task(delta: float, seed: int, n_test: int = 2000, n_val: int = 500,
                  client_sizes=(N1, N2), exact: bool = True) -> GaussianTask:
    """Build the FedPALS Fig. 9 task: two clients S1 (n=40), S2 (n=18) and a target T_delta.

    Test set: n_test=2000 points from T_delta (App. B.4). Validation set for choosing lambda:
    n_val=500 points from T_delta (the size is not given in the paper; vague-18 default). Each seed
    redraws all samples from independent streams; the class means stay fixed as printed in App. A.5.
    """
    check_range("n_test", n_test, 1)
    check_range("n_val", n_val, 0)
    t = target_marginal(delta)
    streams = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4)]
    clients = [sample_gaussian(s, n, streams[i], exact) for i, (s, n) in enumerate(zip((S1, S2), client_sizes))]
    x_val, y_val = sample_gaussian(t, n_val, streams[2], exact)
    x_test, y_test = sample_gaussian(t, n_test, streams[3], exact)
    return GaussianTask(
        delta=float(delta), client_marginals=np.stack([S1, S2]), target_marginal=t, clients=clients,
        x_val=x_val, y_val=y_val, x_test=x_test, y_test=y_test,
        meta={"seed": seed, "n_test": n_test, "n_val": n_val, "client_sizes": list(client_sizes),
              "exact_counts": exact, "source": "FedPALS App. A.5/B.4 synthetic task"},
    )
