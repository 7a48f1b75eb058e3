"""FedAvg written the way the papers' public code (and most FL tutorials) write it.

This is the "plain PyTorch loop" baseline of benchmarks/bench_engine.py: a torch Dataset that
normalises one sample at a time in __getitem__, a DataLoader(batch_size, shuffle=True) per
client, `copy.deepcopy(global_model)` per client, a fresh torch.optim.Adam per client and round,
`model.train()`, cross-entropy, and sample-size-weighted averaging of the clients' state_dicts.
No channels_last, no torch.compile, no batching across clients: the point is to measure what the
usual code leaves on the table, not to make it fast.

The Flower client (benchmarks/flower_sim.py) trains with the same `local_train` function, so the
Flower-vs-plain ratio measures Flower's own overhead.
"""
from __future__ import annotations

import copy
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class NormalizedImages(Dataset):
    """uint8 images [N, C, H, W] -> float, standardised per channel, one sample at a time
    (as torchvision's ToTensor + Normalize do in the papers' data pipelines)."""

    def __init__(self, x_uint8: torch.Tensor, y: torch.Tensor, mean: torch.Tensor, std: torch.Tensor):
        self.x, self.y = x_uint8, y
        self.mean, self.std = mean.view(-1, 1, 1), std.view(-1, 1, 1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        x = self.x[i].float().div(255)
        return (x - self.mean) / self.std, self.y[i]


def client_loader(ds, rows, batch_size: int, seed: int) -> DataLoader:
    """One client's DataLoader over its rows of the training set (shuffled every epoch)."""
    sub = NormalizedImages(ds.x_train[rows], ds.y_train[rows], *ds.channel_stats_cached())
    g = torch.Generator().manual_seed(seed)
    return DataLoader(sub, batch_size=batch_size, shuffle=True, generator=g)


class StandardisedBatches:
    """One client's shuffled minibatches sliced from pre-standardised tensors: the same float
    tensors the batched engine gathers its rows from (the fair-data variant of client_loader;
    no per-sample normalisation, no collation). Reshuffled every epoch with its own generator."""

    def __init__(self, x_std: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int):
        self.x, self.y, self.batch_size = x_std, y, batch_size
        self.g = torch.Generator().manual_seed(seed)
        self.dataset = y  # len(loader.dataset): the client's sample count

    def __iter__(self):
        perm = torch.randperm(len(self.y), generator=self.g)
        for i in range(0, len(perm), self.batch_size):
            idx = perm[i:i + self.batch_size]
            yield self.x[idx], self.y[idx]

    def __len__(self):
        return -(-len(self.y) // self.batch_size)


def client_batches(x_std: torch.Tensor, ds, rows, batch_size: int, seed: int) -> StandardisedBatches:
    """One client's StandardisedBatches over its rows of the pre-standardised training pool."""
    rows = torch.as_tensor(rows)
    return StandardisedBatches(x_std[rows].contiguous(), ds.y_train[rows], batch_size, seed)


def local_train(model: torch.nn.Module, loader, lr: float, epochs: int, precision: str = "fp32") -> int:
    """Train `model` in place for `epochs` epochs with a fresh Adam; return the samples seen.
    precision "bf16": forward and loss under torch.autocast (bfloat16), the usual way to add it."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    seen = 0
    for _ in range(epochs):
        for x, y in loader:
            opt.zero_grad()
            if precision == "bf16":
                with torch.autocast(x.device.type, dtype=torch.bfloat16):
                    loss = F.cross_entropy(model(x), y)
            else:
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            seen += len(y)
    return seen


def fedavg_round(global_model: torch.nn.Module, loaders: list, lr: float, epochs: int, precision="fp32") -> int:
    """One FedAvg round (McMahan et al. 2017): every client trains a deepcopy of the global model,
    the server averages the state_dicts weighted by client sample counts. Returns samples seen."""
    states, sizes, seen = [], [], 0
    for loader in loaders:
        model = copy.deepcopy(global_model)
        seen += local_train(model, loader, lr, epochs, precision)
        states.append(model.state_dict())
        sizes.append(len(loader.dataset))
    w = np.asarray(sizes, dtype=float) / sum(sizes)
    avg = {k: sum(float(wi) * s[k] for wi, s in zip(w, states)) for k in states[0]}
    global_model.load_state_dict(avg)
    return seen


def time_rounds(global_model, loaders, lr, epochs, rounds: int) -> tuple[list, int]:
    """Per-round wall times (s) of `rounds` FedAvg rounds and the samples per round."""
    times, seen = [], 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        seen = fedavg_round(global_model, loaders, lr, epochs)
        times.append(time.perf_counter() - t0)
    return times, seen
