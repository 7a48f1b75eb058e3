"""Adapter between the reference tests and the engine: the ONLY place they call into fedpaper's trainer.

The reference tests compute what one (or two) full-batch rounds of a method must give with a few
lines of plain torch (`reference_math.py`) and compare it with the engine's result. Every call into
the engine goes through the functions below, so a refactor of the engine's internals means
editing this file only. Public API used: fedpaper.engine.{train, TrainConfig, Pools, Federation},
fedpaper.algorithms.methods.Method, fedpaper.blocks.models.{MODELS, build_model}; the BatchNorm test
also reads the trainer's global buffers (`run_with_buffers`), which TrainResult does not carry.

Reference problems run in float64 (torch's default dtype is switched for the test, so the models
are built in float64), small enough that a comparison at 1e-6 relative is meaningful. Tests marked
`float32` run in float32 (private label sets: the engine's per-label row averaging accumulates in
float32 and cannot take float64 parameters) and are compared at 2e-5 relative.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fedpaper.blocks import models as fp_models
from fedpaper.driver import train
from fedpaper.engine import Federation, Pools, TrainConfig

BACKENDS = ("vmap", "loop", "grouped")


# ----------------------------------------------------------------------------- tiny models
class TinyMLP(nn.Module):
    """features = Linear + ReLU (a shared body), classifier = Linear (one row per label)."""

    def __init__(self, in_features=3, hidden=4, num_classes=5):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU())
        self.classifier = nn.Linear(hidden, num_classes)

    def forward(self, x):
        return self.classifier(self.features(x))


class TinyBN(nn.Module):
    """BatchNorm1d on the inputs, then a linear classifier: running statistics are the inputs' moments."""

    def __init__(self, in_features=3, num_classes=5, momentum=0.1):
        super().__init__()
        self.features = nn.BatchNorm1d(in_features, momentum=momentum)
        self.classifier = nn.Linear(in_features, num_classes)

    def forward(self, x):
        return self.classifier(self.features(x))


# ----------------------------------------------------------------------------- problems
class Problem:
    """A small federated problem: pools (float64 features), client rows, labels, and one Federation."""

    def __init__(self, x, y, client_rows, num_classes, seed=0, test_rows=None, val_rows=None,
                 server_rows=None, target=None, label_sets=None):
        self.x = torch.as_tensor(x, dtype=torch.get_default_dtype())
        self.y = torch.as_tensor(y, dtype=torch.int64)
        self.K = num_classes
        self.client_rows = [np.asarray(r, dtype=np.int64) for r in client_rows]
        test_rows = np.arange(len(y)) if test_rows is None else np.asarray(test_rows)
        self.pools = Pools(self.x, self.y, self.x, self.y, num_classes)
        self.fed = Federation(self.client_rows, test_rows, val_indices=val_rows, server_indices=server_rows,
                              target_marginal=target, seed=seed, label_sets=label_sets)
        self._label_sets = label_sets

    @property
    def sizes(self) -> np.ndarray:
        return np.array([len(r) for r in self.client_rows], dtype=float)

    def client_xy(self, i):
        r = torch.as_tensor(self.client_rows[i])
        return self.x[r], self.y[r]

    def label_sets(self) -> list:
        """Each client's label set Y_k: given explicitly, else the labels in its rows."""
        if self._label_sets is not None:
            return [sorted(s) for s in self._label_sets]
        return [sorted(set(self.y[torch.as_tensor(r)].tolist())) for r in self.client_rows]


def make_problem(sizes_and_labels, K=5, d=3, seed=0, extra_rows=0, **kw) -> Problem:
    """Clients given as [(n_i, labels_i)]: client i holds n_i rows whose labels cycle through labels_i
    (so each label in labels_i occurs). `extra_rows` rows with label 0 follow (server/val rows)."""
    rng = np.random.default_rng(seed + 100)
    ys, rows, start = [], [], 0
    for n, labels in sizes_and_labels:
        ys.extend(labels[j % len(labels)] for j in range(n))
        rows.append(np.arange(start, start + n))
        start += n
    ys.extend(rng.integers(0, K, size=extra_rows).tolist())
    x = rng.normal(size=(len(ys), d))
    x += 0.8 * np.eye(K, d)[np.asarray(ys)]  # labels carry signal: gradients are not all alike
    return Problem(x, np.asarray(ys), rows, K, seed=seed, **kw)


def config(model="logreg", d=3, K=5, **kw) -> TrainConfig:
    """Full-batch SGD (batch_size above every client's size), one local epoch, one round by default."""
    model_kwargs = {"logreg": dict(in_features=d, num_classes=K), "ref_mlp": dict(in_features=d, hidden=4, num_classes=K),
                    "ref_bn": dict(in_features=d, num_classes=K)}[model]
    base = dict(model=model, model_kwargs=model_kwargs, optimizer="sgd", lr=0.5, batch_size=64, local_epochs=1,
                rounds=1, backend="loop")
    base.update(kw)
    return TrainConfig(**base)


# ----------------------------------------------------------------------------- the engine calls
def run(method, problems, cfg: TrainConfig):
    """Train one run per problem (batched together) and return the engine's TrainResult."""
    pools = problems[0].pools
    return train(method, cfg, pools, [p.fed for p in problems], progress=False)


def final_params(method, problem: Problem, cfg: TrainConfig) -> dict:
    """The global parameters after cfg.rounds rounds of one run."""
    res = run(method, [problem], cfg)
    return {k: v[0] for k, v in res.final_params.items()}


def run_with_buffers(method, problem: Problem, cfg: TrainConfig) -> tuple[dict, dict]:
    """(params, buffers) of the global model after training one run (buffers: BatchNorm statistics)."""
    from fedpaper.driver import FederatedTrainer

    tr = FederatedTrainer(method, cfg, problem.pools, [problem.fed], progress=False)
    res = tr.run()
    return ({k: v[0] for k, v in res.final_params.items()},
            {k: v[0].detach().cpu() for k, v in tr.global_buffers.items()})


def initial_params(cfg: TrainConfig, seed: int) -> dict:
    """The run's initial global model: the engine seeds torch with the run's seed and builds the model
    (test_initial_model_is_what_the_engine_starts_from checks this against a 0-learning-rate run)."""
    torch.manual_seed(seed)
    net = fp_models.build_model(cfg.model, **cfg.model_kwargs)
    return {k: v.detach().clone() for k, v in net.named_parameters()}


def initial_buffers(cfg: TrainConfig, seed: int) -> dict:
    torch.manual_seed(seed)
    net = fp_models.build_model(cfg.model, **cfg.model_kwargs)
    return {k: v.detach().clone() for k, v in net.named_buffers()}


def assert_params_close(actual: dict, expected: dict, rtol=None):
    """Equal up to rtol relative to the size of what is compared: 1e-6 in float64 (the engine stores
    aggregation weights in float32, hence not 1e-12), 2e-5 in float32."""
    assert set(actual) == set(expected)
    for k in expected:
        if rtol is None:
            rtol = 2e-5 if actual[k].dtype == torch.float32 else 1e-6
        scale = max(1.0, float(expected[k].abs().max()))
        torch.testing.assert_close(actual[k].to(torch.float64), expected[k].to(torch.float64),
                                   rtol=0, atol=rtol * scale, msg=lambda m, k=k: f"{k}: {m}")


def max_diff(a: dict, b: dict) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def result_from_history(rows: list):
    """A TrainResult holding the given history rows (for best-snapshot selection)."""
    import pandas as pd

    from fedpaper.engine import TrainResult

    return TrainResult(pd.DataFrame(rows), {}, {})
