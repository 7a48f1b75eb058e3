"""FedMT's data: CIFAR-100 pools carrying both label spaces, and the federation layout (Sec. 4.1,
App. C.1.1; targets/fedmt.md "Data splits", vague-12/14).

- Pools ("fedmt-cifar100"): x standardised; y_train/y_test the 100 fine labels (the server's and the
  test set's); labels["coarse"] the 20 superclass labels (the clients'); `pools.correspondence` the
  20 x 100 matrix M from the data set's own fine-to-coarse map (M[j, k] = 1 iff fine k is in
  superclass j); `pools.norm` the (mean, std) of the standardisation (RandAugment works on pixels).
  options {"stand_in": {...}} build a synthetic stand-in instead (smoke/tests): synthetic images of K
  classes, fine class k in superclass k // (K / J).
- Layout "fedmt": the server gets n images per fine class, the clients N_c each, IID or the non-IID
  split of App. C.1.1 (gamma) (fedpaper.blocks.partition.fedmt_partition); role "single" puts the server
  rows alone in one client (the Single baseline). Clients' fine labels are never read by the client
  algorithms (they read labels["coarse"]); the partition itself uses fine labels, as the paper's split
  does (balanced in sub-classes), on the experimenter's side.
"""
from __future__ import annotations

import numpy as np
import torch

from fedpaper.engine import Federation, Pools
from fedpaper.ground.errors import BadParameterError
from fedpaper.blocks.partition import cifar100_correspondence_matrix, fedmt_partition
from fedpaper.blocks.data import load_dataset, synthetic_images

ROLES = ("federated", "single")


def stand_in_dataset(num_classes=20, coarse_classes=5, n_train=1200, n_test=200, shape=(3, 16, 16), seed=0):
    """A synthetic stand-in with fine and coarse labels: (ImageDataset, fine_to_coarse)."""

    if num_classes % coarse_classes:
        raise BadParameterError(f"stand-in num_classes={num_classes} must be a multiple of coarse_classes={coarse_classes}")
    ds = synthetic_images(num_classes=num_classes, n_train=n_train, n_test=n_test, shape=tuple(shape), seed=seed)
    f2c = np.arange(num_classes) // (num_classes // coarse_classes)
    return ds, f2c


def pools_with_coarse(ds, fine_to_coarse, device="cpu") -> Pools:
    """Pools of an ImageDataset with the "coarse" label space, M and the standardisation."""
    f2c = np.asarray(fine_to_coarse, dtype=np.int64)
    pools = Pools.from_dataset(ds, device=device)
    to = lambda y: torch.as_tensor(f2c[np.asarray(y.cpu())], device=device)  # noqa: E731
    pools.labels["coarse"] = (to(ds.y_train), to(ds.y_test))
    pools.correspondence = cifar100_correspondence_matrix(f2c)
    pools.fine_to_coarse = f2c
    pools.norm = tuple(t.to(device) for t in ds.channel_stats_cached())
    pools.description = dict(ds.describe(), coarse_classes=int(f2c.max()) + 1)
    return pools


def build_pools(options: dict, data_root, device) -> Pools:
    stand_in = (options or {}).get("stand_in")
    if stand_in:
        ds, f2c = stand_in_dataset(**stand_in)
        return pools_with_coarse(ds, f2c, device)

    ds = load_dataset("cifar100", root=data_root)
    return pools_with_coarse(ds, ds.extra["fine_to_coarse"].numpy(), device)


def split(pools: Pools, part: dict):
    """(server rows, Partition) of a "fedmt" partition spec on these pools."""
    return fedmt_partition(pools.y_train.cpu().numpy(), int(part["n"]), int(part["num_clients"]),
                           int(part["samples_per_client"]), iid=bool(part.get("iid", True)),
                           gamma=part.get("gamma"), seed=int(part["seed"]), fine_to_coarse=pools.fine_to_coarse)


def fedmt_layout(spec, pools, data_root) -> Federation:
    part, ev = spec.partition, spec.evaluation or {}
    role = part.get("role", "federated")
    if role not in ROLES:
        raise BadParameterError(f"role={role!r}; choose one of {ROLES}")
    server, p = split(pools, part)
    n_test = len(pools.y_test)
    cap = ev.get("test_cap")
    test = np.arange(n_test) if not cap or cap >= n_test else \
        np.sort(np.random.default_rng([int(part["seed"]), 17]).choice(n_test, int(cap), replace=False))
    clients = [server] if role == "single" else [np.asarray(c, dtype=np.int64) for c in p.client_indices]
    return Federation(client_indices=clients, test_indices=test, server_indices=server, seed=int(part["seed"]))
