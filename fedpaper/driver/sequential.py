"""The sequential reference backend: one client at a time, an ordinary nn.Module and a
torch.optim optimiser, written the plain way. It draws the same minibatches as the batched engine
(`epoch_batches` with the run's generator), so the two must agree to float tolerance; tests check
this for FedAvg, FedProx and SCAFFOLD, and for the "l2" penalty, which here is the optimiser's own
weight_decay (an independent implementation of the same gradient). It is also the "fedpaper sequential" line of the benchmark.
"""
from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F

from fedpaper.algorithms import weights as W
from fedpaper.algorithms.base import FedAvgWeights
from fedpaper.algorithms.fedprox import Penalty
from fedpaper.algorithms.scaffold import ControlVariates
from fedpaper.engine.batching import epoch_batches
from fedpaper.engine.evaluate import autocast
from fedpaper.engine.types import Federation, Pools, TrainConfig
from fedpaper.ground.errors import BadParameterError
from fedpaper.blocks.models import build_model


def _plain(method) -> dict | None:
    """What the reference reads of a method's parts (its algorithm): FedProx's mu (0: none), the "l2"
    weight decay (0: none) and whether SCAFFOLD's control variates are on; None when the algorithm
    has any other part (FedAvg's weights, the "prox" and "l2" penalties and SCAFFOLD are supported)."""
    out = {"mu": 0.0, "weight_decay": 0.0, "scaffold": False}
    for p in method.algorithm().parts:
        if isinstance(p, Penalty) and p.name in ("prox", "l2") and not p.skip_classifier:
            out["mu" if p.name == "prox" else "weight_decay"] = p.coef
        elif type(p) is ControlVariates:
            out["scaffold"] = True
        elif type(p) is not FedAvgWeights:
            return None
    return out


def _optimizer(cfg: TrainConfig, params, weight_decay=0.0):
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, weight_decay=weight_decay)
    return torch.optim.Adam(params, lr=cfg.lr, weight_decay=weight_decay)


def train_sequential(method, cfg: TrainConfig, pools: Pools, fed: Federation) -> dict:
    """Train one run for cfg.rounds rounds (full participation); return the final global state_dict.

    FedAvg (McMahan et al. 2017), FedProx (Li et al. 2020, eq. 2) and SCAFFOLD (Karimireddy et
    al. 2020, Alg. 1, option II) with sample-size weights n_i/N (fedpals eq. 4), optionally with
    the "l2" penalty as the optimiser's weight_decay. cfg.precision "bf16" autocasts each forward
    pass and loss (fp32 parameters and optimiser state), as the batched engine does."""
    plain = _plain(method)
    if plain is None or (plain["mu"] and plain["scaffold"]):
        raise BadParameterError(f"the sequential reference runs FedAvg, FedProx and SCAFFOLD only, not {method.name!r}")
    torch.manual_seed(fed.seed)
    global_model = build_model(cfg.model, **cfg.model_kwargs)
    rng = np.random.default_rng([fed.seed, 7919])
    n = np.array([len(c) for c in fed.client_indices], dtype=float)
    weights = W.fedavg_weights(n)
    names = [k for k, _ in global_model.named_parameters()]
    c_glob = {k: torch.zeros_like(p) for k, p in global_model.named_parameters()}
    c_loc = [{k: torch.zeros_like(p) for k, p in global_model.named_parameters()} for _ in n]
    for _ in range(cfg.rounds):
        states, deltas_c = [], []
        for i, rows in enumerate(fed.client_indices):
            model = copy.deepcopy(global_model)
            anchor = {k: p.detach().clone() for k, p in model.named_parameters()}
            opt = _optimizer(cfg, model.parameters(), plain["weight_decay"])
            steps = 0
            for _ in range(cfg.local_epochs):
                brows, bmask = epoch_batches([np.asarray(rows)], cfg.batch_size, [rng])
                for s in range(brows.shape[1]):
                    idx = brows[0, s][bmask[0, s]]
                    if len(idx) == 0:
                        continue
                    x, y = pools.x_train[idx], pools.y_train[idx]
                    with autocast(cfg.precision, x.device):  # bf16: forward + loss; weights stay fp32
                        loss = F.cross_entropy(model(x), y).float()
                    if plain["mu"]:
                        loss = loss + 0.5 * plain["mu"] * sum(((p - anchor[k]) ** 2).sum()
                                                           for k, p in model.named_parameters())
                    opt.zero_grad()
                    loss.backward()
                    if plain["scaffold"]:
                        for k, p in model.named_parameters():
                            p.grad += c_glob[k] - c_loc[i][k]
                    opt.step()
                    steps += 1
            if plain["scaffold"]:
                new_c = {k: c_loc[i][k] - c_glob[k] + (anchor[k] - p.detach()) / (max(steps, 1) * cfg.lr)
                         for k, p in model.named_parameters()}
                deltas_c.append({k: new_c[k] - c_loc[i][k] for k in names})
                c_loc[i] = new_c
            states.append({k: p.detach() for k, p in model.named_parameters()})
        avg = {k: sum(w * s[k] for w, s in zip(weights, states)) for k in names}
        global_model.load_state_dict(avg, strict=False)
        if plain["scaffold"]:
            for k in names:
                c_glob[k] = c_glob[k] + sum(d[k] for d in deltas_c) / len(n)
    return {k: p.detach() for k, p in global_model.named_parameters()}
