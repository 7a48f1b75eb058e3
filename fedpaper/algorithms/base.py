"""The algorithm seam: what the trainer calls, and nothing else it knows about a method.

A federated algorithm is an `Algorithm`: a composition of `Part`s (FedJAX's "a few small pure
functions"; Flower's "one class per aggregation rule") over stacked slots (run x client):

- client objective: `Objective`, the mean row loss (CE, or BCE for multi-hot labels) over the
  model's outputs (a tensor of logits, or a dict holding "logits" and auxiliary tensors), after the
  parts' logit restrictions (`restrict`), plus the parts' penalties (`penalty`);
- client data: per-round data (`prepare_round`, e.g. pseudo-labels), extra steps per epoch
  (`min_steps`), per-epoch draws (`begin_epoch`) and batch transforms (`augment`, e.g. mixup);
- broadcast (`broadcast`: what a client receives) and a gradient correction (`grad_correction`);
- the aggregator: exactly one part gives the weights (`weights`), the weighted sum is formed, then
  every part's `aggregate` may replace rows of it or update its own state (per-label rows,
  control variates, mixtures, server momentum);
- after-round server steps (`server_step`: server training, central tuning);
- declared state (`init_state`, kept in `state[part.key]` across rounds: per-run or per-client
  tensors such as control variates), and parameters that never train (`frozen`).

Hooks see a frozen `Context` (the runs' layout, label counts, the round and its learning rate, a
few engine functions), never the trainer, and return new values instead of mutating the trainer.
Parts compose in order; each algorithm module (fedprox, scaffold, fedrs, afl, fedpals, privlabels,
tuning, server_training, semisup) defines one or two parts and cites the equation it implements. FedAvg's weight rule
(`FedAvgWeights`) is here: it is every algorithm's default.
"""
from __future__ import annotations

import functools
import inspect
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fedpaper.blocks.models import logits_of
from fedpaper.algorithms import weights as W

if TYPE_CHECKING:  # annotations only
    from fedpaper.engine.types import Federation, Pools, TrainConfig


Params = dict[str, torch.Tensor]  # parameter name -> tensor stacked over runs [R, ...] or slots [G, ...]
Slots = np.ndarray                 # [G, 2] int: the rows (run, client) trained together
State = dict[str, Any]             # the algorithm's declared state, one entry per part key


@dataclass(frozen=True, kw_only=True)
class Context:
    """What the hooks may read: the runs trained together, the round, and a few engine functions.

    Frozen, made by keyword: the driver builds one before the first round (round 0: `check`,
    `init_state`) and a new one per round with `dataclasses.replace(ctx, round=r, lr=...)`, so a
    part reads the round it is in (`round`, 1-based: 1..cfg.rounds, as the history's "round"
    column and the lr schedule count) and never counts rounds itself; what a part keeps across
    rounds lives in its declared state (`Part.init_state`), not here.

    counts [R, M, K] (numpy) label counts per client; sizes [R, M] their sums; present [R, M, K]
    (bool tensor) each client's label set; classifier: the names of the classifier's weight and
    bias; predict(params, x_pool, rows, train=False, buffers=None) -> per-model logits;
    train_slots(params, rows, present, rngs, algorithm, epochs, buffers) -> (params, anchor,
    steps, loss), the clients' local training applied to any stacked models (server training);
    init_params: the runs' initial global params [R, ...] (shapes and layouts for declared state);
    lr: the clients' learning rate in this round (the lr schedule's value at `round`);
    run_grads(gfn, params, args, masks, gens) -> {name: [R, ...]}: each run's gradient of a part's
    own loss, computed as the runs' backend computes the clients' steps (engine.gradients);
    grouped_forward() -> a GroupedForward of the template when the runs' gradients go in one
    grouped pass, else None. A part never asks which backend trains it."""

    cfg: TrainConfig | None
    pools: Pools | None
    feds: Sequence[Federation]
    R: int
    M: int
    K: int
    device: torch.device
    counts: np.ndarray
    sizes: np.ndarray
    present: torch.Tensor
    classifier: tuple[str, str]
    template: nn.Module | None
    buffers: Params
    has_batchnorm: bool
    init_params: Params
    predict: Callable[..., list[torch.Tensor]] | None
    train_slots: Callable[..., tuple] | None
    round: int = 0
    lr: float | None = None
    run_grads: Callable[..., Params] | None = None
    grouped_forward: Callable[[], Any] | None = None


@dataclass
class Aggregation:
    """The inputs of one round's aggregation: new client params [G, ...], what each received
    (anchor), local steps [G] and mean losses [G], the slots (rows of (run, client)), the round's
    participants part [R, m'], and prev, the runs' global params before the round [R, ...]."""

    new: dict
    anchor: dict
    steps: torch.Tensor
    losses: torch.Tensor
    slots: np.ndarray
    part: np.ndarray
    prev: dict


class Part:
    """One piece of an algorithm; every hook is optional (the defaults do nothing)."""

    key = "part"           # where the part's declared state lives in the algorithm's state dict
    frozen: tuple = ()     # parameter names that never train
    unlabeled_weight = None  # weight of the objective's unlabeled-batch term, when the part adds one
    label_loss = None      # (logits, y) -> per-row loss replacing row_loss for the labelled rows, when set

    def __init_subclass__(cls, **kw):
        """Record every part's constructor arguments (its `spec`), so that algorithms.parts can build
        it again from the cache key: the keyword arguments of the outermost __init__, defaults filled."""
        super().__init_subclass__(**kw)
        init = cls.__dict__.get("__init__")
        if init is None:
            return
        sig = inspect.signature(init)
        if any(q.kind in (q.VAR_POSITIONAL, q.VAR_KEYWORD) for q in sig.parameters.values()):
            raise TypeError(f"{cls.__name__}.__init__ takes *args/**kwargs; a part's spec needs named arguments")

        @functools.wraps(init)
        def recorded(self, *args, **kwargs):
            init(self, *args, **kwargs)
            bound = sig.bind(self, *args, **kwargs)
            bound.apply_defaults()
            self._args = {k: v for k, v in list(bound.arguments.items())[1:]}  # the outermost __init__ ends last

        cls.__init__ = recorded

    def spec(self) -> dict:
        """The part's constructor arguments (algorithms.parts.part_of builds it again from them)."""
        return dict(getattr(self, "_args", {}))

    def check(self, ctx: Context) -> None:
        """Raise BadParameterError when the runs cannot train with this part."""

    def init_state(self, ctx: Context) -> Any:
        """Declared state kept across rounds, in state[self.key] (None: none)."""
        return None

    # ---- client side
    def broadcast(self, ctx: Context, state: State, params: Params, slots: Slots) -> Params:
        """What each slot receives (params [G, ...]: its run's global model)."""
        return params

    def restrict(self, logits: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        return logits

    def penalty(self, params: Params, anchor: Params, lead: int, classifier: tuple[str, str]) -> torch.Tensor | None:
        """A per-slot loss term ([] for one slot, [G] for stacked slots: lead 0 or 1), or None."""
        return None

    def batch_loss(self, outputs: Any, batch: dict, params: Params, anchor: Params, lead: int) -> torch.Tensor | None:
        """A per-slot loss term ([] or [G]) that reads the model's outputs (a dict's auxiliary
        tensors, e.g. class-wise features) and the batch (y, mask, entries `augment` added), or None."""
        return None

    def prepare_round(self, ctx: Context, state: State, params: Params, slots: Slots, buffers: Params) -> Any:
        """The round's per-slot data (e.g. pseudo-labels), kept in the round's data under the part's key, or None."""
        return None

    def min_steps(self, data: Any, batch_size: int) -> int | None:
        return None

    def begin_epoch(self, data: Any, steps: int, aug_rngs: list[np.random.Generator], batch_size: int,
                    device: torch.device) -> Any:
        return None

    def augment(self, ctx: Context, batch: dict, mask_np: np.ndarray, aug_rngs: list[np.random.Generator], data: Any,
                epoch: Any, step: int) -> torch.Tensor | None:
        """Change `batch` in place; return a [G] bool tensor of slots made active, or None."""
        return None

    def grad_correction(self, ctx: Context, state: State, slots: Slots) -> Params | None:
        """A term added to every local step's gradients ([G, ...] per parameter), or None."""
        return None

    # ---- hooks added for FedMT (mixed-type labels); the defaults change nothing
    label_space = None     # the pool label space the clients' batches read ("coarse"); None: default
    batch_rows = False     # True: batches carry their pool rows as batch["rows"] (e.g. per-row pseudo-labels)

    def client_objective(self, classifier: tuple[str, str]) -> Callable | None:
        """The clients' objective, replacing `Objective` (same call signature), or None."""
        return None

    def round_rows(self, ctx: Context, data: Any, slots: Slots, rows: list[np.ndarray]) -> list[np.ndarray] | None:
        """The rows each slot trains on this round (e.g. its confident pseudo-labelled rows), or None."""
        return None

    def round_metrics(self, ctx: Context, state: State, glob: Params, bufs: Params) -> list[dict] | None:
        """Extra history values after an evaluated round: one dict per run, or None."""
        return None

    # ---- server side
    def weights(self, ctx: Context, state: State, slots: Slots, part: np.ndarray,
                losses: torch.Tensor) -> np.ndarray | None:
        """Aggregation weight of each slot (numpy [G], summing to one per run), or None."""
        return None

    def aggregate(self, ctx: Context, state: State, agg: Aggregation, glob: Params) -> Params:
        """The runs' new global params [R, ...] (glob: the weighted sum, or the previous part's result)."""
        return glob

    def server_step(self, ctx: Context, state: State, glob: Params, bufs: Params, agg: Aggregation,
                    rngs: list[np.random.Generator]) -> tuple[Params, Params]:
        """After the aggregation: new global params and buffers (server training, central tuning)."""
        return glob, bufs


def row_loss(logits, y):
    """Per-row loss [.., B]: cross-entropy for class indices, BCE summed over classes for multi-hot y."""
    if y.dim() == logits.dim():  # multi-label
        return F.binary_cross_entropy_with_logits(logits, y, reduction="none").sum(-1)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none").view(y.shape)


@dataclass
class Objective:
    """The client objective for one slot (logits [B, K], its params) or stacked slots (logits
    [G, B, K], params [G, ...]); returns the per-slot loss ([] or [G]) and the per-slot sum of the
    rows' losses (reported as the training loss).

    batch: x, y (class indices [.., B] or multi-hot [.., B, K]), mask ([.., B], 1 for real rows);
    with mixup also y2 and lam (loss lam l(y) + (1 - lam) l(y2), Zhang et al. 2018 eq. 1); with an
    unlabeled batch (pseudo-labels) x has B + B_u rows, the last B_u unlabeled, with yu, ukeep and
    umask [.., B_u], adding unlabeled_weight * sum(kept rows' CE) / B_u (FixMatch eq. 4).
    The labelled term is the mean over real rows (of the first part's `label_loss`, else row_loss);
    the parts' restrictions act on the logits first, their penalties and then their batch losses
    (`batch_loss`: terms that read the outputs and the batch) are added last, in the parts' order."""

    parts: tuple = ()
    unlabeled_weight: float = 1.0
    classifier: tuple = ("classifier.weight", "classifier.bias")

    def __call__(self, outputs, batch, present, params, anchor):
        logits = logits_of(outputs)
        for p in self.parts:
            logits = p.restrict(logits, present)
        if "yu" in batch:  # rows after the B labelled ones are the unlabeled batch
            logits, logits_u = logits[..., :batch["mask"].shape[-1], :], logits[..., batch["mask"].shape[-1]:, :]
        label_loss = next((p.label_loss for p in self.parts if p.label_loss is not None), row_loss)
        ce = label_loss(logits, batch["y"])
        if "y2" in batch:
            lam = batch["lam"].unsqueeze(-1)
            ce = lam * ce + (1 - lam) * label_loss(logits, batch["y2"])
        mask = batch["mask"]
        loss = (ce * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        if "yu" in batch:
            lu = (row_loss(logits_u, batch["yu"]) * batch["ukeep"]).sum(-1) / batch["umask"].sum(-1).clamp(min=1)
            loss = loss + self.unlabeled_weight * lu
        terms = [t for t in (p.penalty(params, anchor, logits.dim() - 2, self.classifier) for p in self.parts)
                 if t is not None]
        terms += [t for t in (p.batch_loss(outputs, batch, params, anchor, logits.dim() - 2) for p in self.parts)
                  if t is not None]
        if terms:
            loss = loss + sum(terms[1:], terms[0])
        return loss, (ce * mask).sum(-1).detach()


def per_run_weights(ctx, slots, part, rule) -> np.ndarray:
    """Weights [G] of the slots, run by run: rule(r, clients) for run r's participants part[r]
    (its slots are in that order)."""
    w = np.zeros(len(slots))
    for r in range(ctx.R):
        sel = np.nonzero(slots[:, 0] == r)[0]
        w[sel] = rule(r, part[r])
    return w


class FedAvgWeights(Part):
    """FedAvg's aggregation (McMahan et al. 2017, Alg. 1): theta_{t+1} = sum_i n_i / N theta_i, with N
    the participating clients' total, i.e. alpha_i = n_i / N over the participants (fedpals eq. 4).
    The client side of FedAvg is the plain objective (Objective) with the clients' optimiser. The
    default weight rule of every Algorithm."""

    key = "fedavg"

    def weights(self, ctx, state, slots, part, losses):
        return per_run_weights(ctx, slots, part, lambda r, clients: W.fedavg_weights(ctx.sizes[r, clients]))


@dataclass(eq=False)
class Algorithm:
    """A method as the trainer sees it: an ordered composition of parts (see the module docstring).

    Exactly one part gives aggregation weights (`weights`); `FedAvgWeights` when none is named.
    optimizer: an engine.optim.OptimSpec for the clients, or None for the TrainConfig's.

    This is the one form of a method: its `spec()` (name, parts with their constructor arguments,
    optimiser) is a RunSpec's method and so the results-cache key, and algorithms.parts.algorithm_of
    builds the same algorithm from it. Two algorithms are equal when their specs are."""

    name: str
    parts: tuple = ()
    optimizer: Any = None

    def __post_init__(self):
        self.parts = tuple(self.parts)
        if not any(type(p).weights is not Part.weights for p in self.parts):
            self.parts = (FedAvgWeights(),) + self.parts
        rules = [p for p in self.parts if type(p).weights is not Part.weights]
        if len(rules) != 1:
            raise ValueError(f"algorithm {self.name!r} has {len(rules)} aggregation-weight rules; it needs one")
        keys = [p.key for p in self.parts]
        if len(set(keys)) != len(keys):
            raise ValueError(f"algorithm {self.name!r} has two parts with one state key: {keys}")

    def with_parts(self, *parts, name=None) -> "Algorithm":
        """A new algorithm with `parts` appended (a weight rule among them replaces the current one)."""
        own = self.parts
        if any(type(p).weights is not Part.weights for p in parts):
            own = tuple(p for p in own if type(p).weights is Part.weights)
        return Algorithm(name or self.name, own + tuple(parts), self.optimizer)

    def spec(self) -> dict:
        """{"name", "parts": [[part type, its constructor arguments], ...], "optimizer": OptimSpec
        fields or None}, as JSON values (tuples become lists)."""
        d = {"name": self.name, "parts": [[type(p).__name__, p.spec()] for p in self.parts],
             "optimizer": None if self.optimizer is None else asdict(self.optimizer)}
        return json.loads(json.dumps(d, default=_plain))

    def _key(self) -> str:
        return json.dumps(self.spec(), sort_keys=True)

    def __eq__(self, other):
        return isinstance(other, Algorithm) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return f"Algorithm({self._key()})"

    def algorithm(self) -> "Algorithm":
        return self

    # ---- what the trainer calls
    @property
    def frozen(self) -> tuple:
        return tuple(n for p in self.parts for n in p.frozen)

    @property
    def client_labels(self) -> str:
        """The label space of the clients' batches (Pools.label_space name): the first part's."""
        return next((p.label_space for p in self.parts if p.label_space), "default")

    @property
    def batch_rows(self) -> bool:
        return any(p.batch_rows for p in self.parts)

    def round_rows(self, ctx, data, slots, rows) -> list:
        for p in self.parts:
            r = p.round_rows(ctx, data.get(p.key), slots, rows)
            rows = rows if r is None else r
        return rows

    def round_metrics(self, ctx, state, glob, bufs) -> list:
        out = [{} for _ in range(ctx.R)]
        for p in self.parts:
            for r, d in enumerate(p.round_metrics(ctx, state, glob, bufs) or []):
                out[r].update(d)
        return out

    def objective(self, classifier) -> Objective:
        custom = [o for o in (p.client_objective(classifier) for p in self.parts) if o is not None]
        if custom:
            return custom[0]
        w = [p.unlabeled_weight for p in self.parts if p.unlabeled_weight is not None]
        return Objective(self.parts, w[0] if w else 1.0, tuple(classifier))

    def check(self, ctx):
        for p in self.parts:
            p.check(ctx)

    def init_state(self, ctx) -> dict:
        state = {}
        for p in self.parts:
            s = p.init_state(ctx)
            if s is not None:
                state[p.key] = s
        return state

    def broadcast(self, ctx, state, params, slots):
        for p in self.parts:
            params = p.broadcast(ctx, state, params, slots)
        return params

    def prepare_round(self, ctx, state, params, slots, buffers) -> dict:
        out = {}
        for p in self.parts:
            d = p.prepare_round(ctx, state, params, slots, buffers)
            if d is not None:
                out[p.key] = d
        return out

    def min_steps(self, data, batch_size):
        steps = [s for p in self.parts if p.key in data for s in [p.min_steps(data[p.key], batch_size)]
                 if s is not None]
        return max(steps) if steps else None

    def begin_epoch(self, data, steps, aug_rngs, batch_size, device) -> dict:
        return {p.key: p.begin_epoch(data.get(p.key), steps, aug_rngs, batch_size, device) for p in self.parts}

    def augment(self, ctx, batch, mask_np, aug_rngs, data, epoch, step, active):
        for p in self.parts:
            extra = p.augment(ctx, batch, mask_np, aug_rngs, data.get(p.key), epoch.get(p.key), step)
            if extra is not None:
                active = active | extra
        return active

    def grad_correction(self, ctx, state, slots):
        corr = None
        for p in self.parts:
            c = p.grad_correction(ctx, state, slots)
            if c is not None:
                corr = c if corr is None else {k: corr[k] + c[k] for k in corr}
        return corr

    def aggregate(self, ctx, state, agg: Aggregation) -> dict:
        """sum_i alpha_i theta_i per run (the weight rule's alpha), then the parts' aggregate hooks;
        frozen parameters keep their previous values."""
        w = next(r for p in self.parts for r in [p.weights(ctx, state, agg.slots, agg.part, agg.losses)]
                 if r is not None)
        glob = weighted_sum(torch.as_tensor(w, dtype=torch.float32, device=ctx.device), agg.new, agg.slots,
                            agg.prev)
        for p in self.parts:
            glob = p.aggregate(ctx, state, agg, glob)
        for k in self.frozen:  # never trained: kept exactly (a weighted mean of copies may round)
            glob[k] = agg.prev[k]
        return glob

    def server_steps(self, ctx, state, glob, bufs, agg: Aggregation, rngs):
        for p in self.parts:
            glob, bufs = p.server_step(ctx, state, glob, bufs, agg, rngs)
        return glob, bufs


def _plain(v):
    """numpy scalars and arrays as JSON values (e.g. a lambda read from a numpy grid)."""
    if hasattr(v, "tolist"):
        return v.tolist()
    raise TypeError(f"a part's argument {v!r} ({type(v).__name__}) is not a JSON value")


def weighted_sum(w: torch.Tensor, new: dict, slots: np.ndarray, like: dict) -> dict:
    """Per run r: sum over its slots g of w_g * new[g] ([R, ...] shaped like `like`)."""
    run = torch.as_tensor(slots[:, 0], device=w.device)
    out = {}
    for k, v in new.items():
        wk = w.view(-1, *([1] * (v.dim() - 1)))
        out[k] = torch.zeros_like(like[k]).index_add_(0, run, wk * v)
    return out


def slot_sizes(ctx, slots) -> torch.Tensor:
    """n_i of each slot's client, float32 [G]."""
    return torch.as_tensor(ctx.sizes[slots[:, 0], slots[:, 1]], dtype=torch.float32, device=ctx.device)
