"""What the engine takes and returns: the data pools, one run's federation layout, the shared
training configuration and the result."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import numpy as np
import pandas as pd
import torch

from fedpaper.blocks.data.compact import CompactImages
from fedpaper.ground.errors import BadParameterError
from fedpaper.engine.optim import OptimSpec
from fedpaper.engine.evaluate import check_metrics


# ----------------------------------------------------------------------------- data layout
@dataclass
class Pools:
    """The training and test pools, on the device, loaded once.

    x_train/x_test: image pools are fedpaper.blocks.data.compact.CompactImages (uint8 at their native size,
    standardised and resized per batch on the device: `pool[idx]` gives float32 rows), other pools
    (feature vectors) float32 tensors; both are read the same way (`pool[idx]`, `.index_select`,
    `.shape`, `len`). y_train/y_test are the default label space (class indices [N], or multi-hot [N, K]: BCE).
    `labels` may carry further label spaces of the same rows, by name, e.g. {"coarse": (y_train,
    y_test)} or a multi-hot view; `label_space(name)` returns one, "default" being y_train/y_test."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    labels: dict = field(default_factory=dict)  # name -> (y_train, y_test); extra label spaces

    @classmethod
    def from_dataset(cls, ds, device="cpu") -> "Pools":
        """Compact pools of an ImageDataset (standardised with its training images' statistics)."""
        to = dict(device=device)
        return cls(ds.compact(ds.x_train).to(**to), ds.y_train.to(**to),
                   ds.compact(ds.x_test).to(**to), ds.y_test.to(**to), ds.num_classes)

    @classmethod
    def from_arrays(cls, x_train, y_train, x_test, y_test, num_classes, device="cpu", labels=None) -> "Pools":
        """Pools of arrays: x a float array/tensor (kept as float32) or a CompactImages (moved to
        `device`); y class indices [N] (int64) or multi-hot [N, K] (float32: BCE)."""
        t = lambda a, dt: torch.as_tensor(a, dtype=dt, device=device)  # noqa: E731
        tx = lambda x: x.to(device) if isinstance(x, CompactImages) else t(x, torch.float32)  # noqa: E731
        ydt = lambda y: torch.float32 if np.ndim(y) == 2 else torch.int64  # noqa: E731 - multi-hot: BCE
        extra = {name: (t(a, ydt(a)), t(b, ydt(b))) for name, (a, b) in (labels or {}).items()}
        return cls(tx(x_train), t(y_train, ydt(y_train)), tx(x_test), t(y_test, ydt(y_test)), num_classes, extra)

    def __post_init__(self):
        for name, pair in self.labels.items():
            if len(pair) != 2 or len(pair[0]) != len(self.x_train) or len(pair[1]) != len(self.x_test):
                raise BadParameterError(f"label space {name!r} must be (y_train, y_test) with {len(self.x_train)} "
                                        f"and {len(self.x_test)} rows, like x_train and x_test")

    def label_space(self, name: str = "default") -> tuple:
        """(y_train, y_test) of label space `name` ("default": y_train, y_test)."""
        if name == "default":
            return self.y_train, self.y_test
        if name not in self.labels:
            raise BadParameterError(f"unknown label space {name!r}; this pool has {['default', *self.labels]}")
        return self.labels[name]


@dataclass
class Federation:
    """One run's layout: which pool rows each client holds and what the run is evaluated on.

    client_indices index the training pool; val_indices the training pool (e.g. the FedPALS target
    partition or privlabels' 20% split); test_indices the test pool; server_indices the unlabeled
    server set (training pool, labels unused). label_marginals/target_marginal feed FedPALS.
    client_unlabeled_indices (optional) index the training pool: each client's unlabeled rows,
    trained on with pseudo-labels (Method.pseudo_label_threshold); their labels are never read.
    """

    client_indices: list
    test_indices: np.ndarray
    val_indices: np.ndarray | None = None
    server_indices: np.ndarray | None = None
    client_unlabeled_indices: list | None = None  # per client: rows whose labels are never read
    target_marginal: np.ndarray | None = None
    seed: int = 0
    label_sets: list | None = None  # default: the labels present in each client's data

    def sizes(self) -> np.ndarray:
        return np.array([len(i) for i in self.client_indices])


# fields added after results were first cached: left out of spec() while they hold their defaults
TRAIN_EXTENSION_FIELDS = ("momentum", "nesterov", "weight_decay", "lr_schedule", "keep_best", "precision", "metrics")
PRECISIONS = ("fp32", "bf16")


@dataclass(frozen=True)
class TrainConfig:
    """Training hyperparameters shared by the runs trained together (all go into cache keys).

    optimizer: "sgd", "adam" or "adamw", with lr, momentum/nesterov (sgd), weight_decay and
    lr_schedule ("constant" or "cosine" over the rounds); see engine.optim.OptimSpec.
    keep_best: a history column (e.g. "val_acc", "val_auc"): each run's global parameters and
    buffers at the first evaluated round where that column peaks come back in
    TrainResult.snapshots ("": none kept).
    metrics: further per-split metrics by name (engine.evaluate.EXTRA_METRICS, from fedpaper.blocks.metrics:
    micro-F1, micro/macro AUC), reported as <split>_<name> history columns.
    precision: "fp32", or "bf16" (autocast of the forward/backward; fp32 master weights and
    optimiser state). backend: "auto" picks by a fixed rule (engine.backends.choose_backend)."""

    model: str
    model_kwargs: dict = field(default_factory=dict)
    optimizer: str = "sgd"
    lr: float = 0.1
    batch_size: int = 32
    local_epochs: int = 1
    rounds: int = 10
    participation: float = 1.0
    eval_every: int = 1
    eval_batch: int = 2048
    device: str = "cpu"
    backend: str = "auto"
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    lr_schedule: str = "constant"
    keep_best: str = ""
    precision: str = "fp32"
    metrics: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "metrics", check_metrics((self.metrics,) if isinstance(self.metrics, str)
                                                          else tuple(self.metrics)))
        self.optim()  # validates the optimiser fields
        if self.precision not in PRECISIONS:
            raise BadParameterError(f"precision={self.precision!r}; choose one of {PRECISIONS}")
        if not isinstance(self.keep_best, str):
            raise BadParameterError(f"keep_best={self.keep_best!r}; name the history column that selects the kept "
                                    "round, e.g. keep_best=\"val_acc\" (\"\": keep none)")

    def optim(self) -> OptimSpec:
        return OptimSpec(self.optimizer, self.lr, self.momentum, self.nesterov, self.weight_decay, self.lr_schedule)

    def spec(self) -> dict:
        d = asdict(self)
        d.pop("device"), d.pop("backend"), d.pop("eval_batch")  # do not change results
        for f in fields(self):
            if f.name in TRAIN_EXTENSION_FIELDS and d[f.name] == f.default:
                del d[f.name]
        return d

    def __hash__(self):
        return hash(repr(sorted(self.spec().items(), key=str)))


# ----------------------------------------------------------------------------- result
@dataclass
class TrainResult:
    """history: one row per (run, evaluated round): round, train_loss, test_acc, val_acc, test_f1...
    snapshots (TrainConfig.keep_best): per run, {"round", "params", "buffers"}, its global model
    (parameters and buffers, CPU tensors) at the round `best(by=keep_best)` selects; a run that
    diverged before its first evaluation keeps its last finite model, with round None."""

    history: pd.DataFrame
    final_params: dict
    log: dict
    snapshots: list | None = None
    #: per run, the round it diverged in (a non-finite loss or parameter; its history stops at the
    #: round before and its final and best parameters are its last finite ones), or None
    diverged: list | None = None

    def best(self, by="val_acc", report="test_acc") -> pd.DataFrame:
        """Best-validation snapshot per run: the `report` metric at the round where `by` peaks
        (the earliest such round); without a validation split, the last round."""
        h = self.history
        if by not in h or h[by].isna().all():
            idx = h.groupby("run")["round"].idxmax()
        else:
            idx = h.sort_values(["run", "round"]).groupby("run")[by].idxmax()
        out = h.loc[idx, ["run", "seed", "round", report]].rename(columns={"round": "best_round"})
        return out.reset_index(drop=True)
