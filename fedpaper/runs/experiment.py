"""From run specs to trained groups: one typed RunSpec, one build(), the groups of runs the engine
trains together (`plan_groups`) and the training of one group (`train_group`).

A paper package enumerates its runs as `RunSpec`s (data, partition, method, training,
evaluation) and declares how its clients are laid out (its LAYOUTS table);
fedpaper.runs.executors.run_specs reads finished runs from the results store and trains the rest,
batching runs that share a method, a TrainConfig and a data pool into one engine call.

    results = run_specs(specs, data_root, desc="table1")   # one dict per spec, in order
    results[i]["best"]["test_acc"], results[i]["history"]  # tidy per-round records

The store key of a run is its RunSpec, the copy of the data set that was read
(`fedpaper.blocks.data.data_copy`) and the code version of its paper (`fedpaper.runs.versions.code_version`).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Callable, Iterator, Optional

import torch

from fedpaper.algorithms.base import Algorithm
from fedpaper.algorithms.legacy import is_legacy
from fedpaper.algorithms.parts import algorithm_of
from fedpaper.driver import train
from fedpaper.engine import Federation, Pools, TrainConfig
from fedpaper.ground.errors import BadParameterError, UnknownNameError
from fedpaper.runs.store import spec_json
from fedpaper.blocks.data import data_copy, DATASETS, load_dataset, synthetic_images
from fedpaper.engine.memory import runs_that_fit

#: Models whose input shape (channels, image size) is read from the data set at build time.
IMAGE_MODELS = ("lenet", "privlabels_cnn")


@dataclass(frozen=True)
class RunSpec:
    """Every parameter of one run (with its paper's code and data copy, the results-cache key).

    paper:      the paper package whose code the result depends on ("fedpals", ...).
    data:       {"name": data set of fedpaper.blocks.data or its paper's pools builder, "options": its
                keyword arguments, "stands_for": the real data set a smoke stand-in replaces}.
    partition:  {"layout": a layout of its paper's LAYOUTS table, "seed": int, ...its parameters}.
    method:     the method's Algorithm.spec() (its parts; e.g. `Method(...).algorithm().spec()`).
    training:   TrainConfig fields (model, model_kwargs, optimizer, lr, batch_size, local_epochs,
                rounds, ...); an image model's in_channels/image_size/num_classes are filled in
                from the data when absent.
    evaluation: what the layout evaluates on (e.g. subset sizes, test caps).
    tags:       how the paper names the run in its tables (display name, setting, lambda index);
                not read by build(), but part of the key.
    """

    paper: str
    data: dict
    partition: dict
    method: dict
    training: dict
    evaluation: dict = field(default_factory=dict)
    tags: dict = field(default_factory=dict)

    def __hash__(self):
        return hash(self.to_json())

    @property
    def seed(self) -> int:
        return int(self.partition["seed"])

    def to_json(self) -> str:
        return spec_json(asdict(self))

    def with_(self, **parts) -> "RunSpec":
        """A copy with whole parts replaced, or with keys of a part updated (`tags={"x": 1}`
        merges into tags; pass a full dict under `replace_<part>` to replace it)."""
        d = asdict(self)
        for k, v in parts.items():
            if k.startswith("replace_"):
                d[k.removeprefix("replace_")] = v
            elif isinstance(d.get(k), dict) and isinstance(v, dict):
                d[k] = {**d[k], **v}
            else:
                d[k] = v
        return RunSpec(**d)

    def build(self, data_root=None, execution: Optional["Execution"] = None) -> "RunSetup":
        """The engine's setup of this run: Method, TrainConfig, pools key and Federation."""
        execution = execution or Execution()
        if self.partition["layout"] not in LAYOUTS:  # the paper's tables are not read yet (e.g. a cluster worker)
            _import_paper(self.paper)
        key = pools_key_of(self.data, data_root)
        pools = get_pools(key)
        try:
            lay = LAYOUTS[self.partition["layout"]]
        except KeyError:
            raise UnknownNameError(f"unknown partition layout {self.partition['layout']!r}; registered: "
                                   f"{', '.join(sorted(LAYOUTS))} (a paper declares its layouts in LAYOUTS, "
                                   "fedpaper/papers/<paper>/__init__.py)") from None
        fed = lay(self, pools, data_root)
        return RunSetup(method_of(self.method), train_config(self.training, pools, execution), key, fed)


def _import_paper(paper: str) -> None:
    """Read the LAYOUTS and POOLS_BUILDERS tables of fedpaper.papers.<paper> (register_tables)."""
    import importlib

    try:
        mod = importlib.import_module(f"fedpaper.papers.{paper}")
    except ModuleNotFoundError:
        return  # not a paper package (a test's own layout): the lookup says what is missing
    register_tables(getattr(mod, "LAYOUTS", {}), getattr(mod, "POOLS_BUILDERS", {}))


@dataclass(frozen=True)
class Execution:
    """How runs execute, not what they compute (outside the cache key: backends give the same
    parameters, see tests/driver/test_trainer.py)."""

    backend: str = "auto"
    eval_batch: int = 2048
    device: Optional[str] = None  # None: default_device()


@dataclass
class RunSetup:
    """What the engine needs for one run: method, config, pool key (see `get_pools`) and layout."""

    method: Algorithm
    config: TrainConfig
    pools_key: tuple
    federation: Federation


def default_device() -> str:
    """FEDPAPER_DEVICE if set, else cuda when available, else cpu."""
    return os.environ.get("FEDPAPER_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")


def train_config(training: dict, pools: Pools, execution: Execution) -> TrainConfig:
    t = dict(training)
    kw = dict(t.pop("model_kwargs", {}))
    if t["model"] in IMAGE_MODELS:
        kw.setdefault("in_channels", int(pools.x_train.shape[1]))
        kw.setdefault("image_size", int(pools.x_train.shape[-1]))
    kw.setdefault("num_classes", int(pools.num_classes))
    kw = {k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()}
    return TrainConfig(model_kwargs=kw, device=execution.device or default_device(), backend=execution.backend,
                       eval_batch=execution.eval_batch, **t)


# ---------------------------------------------------------------------------------------------
# Layouts (partition -> Federation) and pools builders: each paper declares them in explicit tables
# (LAYOUTS, POOLS_BUILDERS in fedpaper/papers/<paper>/__init__.py), read here when a run of the paper
# is built (_import_paper) or by fedpaper.outputs.registry.load_papers; a paper's names start with "<paper>",
# so a data name alone finds its paper (get_pools).

LAYOUTS: dict[str, Callable] = {}
POOLS_BUILDERS: dict[str, Callable] = {}


@dataclass(frozen=True)
class PoolsBuilder:
    """`build(options: dict, data_root, device) -> Pools` for a data name that is not one data set of
    fedpaper.blocks.data (e.g. several splits joined); `reads`: the data set of fedpaper.blocks.data it
    reads, if any (for the store key's data copy)."""

    build: Callable
    reads: Optional[str] = None

    def __call__(self, options, data_root, device):
        return self.build(options, data_root, device)


def register_tables(layouts: dict, pools_builders: dict) -> None:
    """Add a paper's tables: {layout name: fn(spec, pools, data_root) -> Federation} and {data name:
    PoolsBuilder} (fedpaper.outputs.registry.load_papers and _import_paper call it; idempotent)."""
    for name, fn in layouts.items():
        LAYOUTS.setdefault(name, fn)
    for name, b in pools_builders.items():
        if not isinstance(b, PoolsBuilder):
            raise TypeError(f"pools builder {name!r} must be an experiment.PoolsBuilder, not {type(b).__name__}")
        POOLS_BUILDERS.setdefault(name, b)  # never replaces one (fedpaper.plan wraps the registered ones)


def _paper_of_data(name: str) -> None:
    """Read the tables of the paper a data name belongs to ("fedmt-cifar100" -> fedmt), when it is not
    one data set of fedpaper.blocks.data and not registered yet."""
    if name not in POOLS_BUILDERS and name not in DATASETS and "-" in name:
        _import_paper(name.split("-", 1)[0])


def method_of(method: dict) -> Algorithm:
    """The Algorithm of a RunSpec.method (an Algorithm.spec(): algorithms.parts.algorithm_of)."""
    if is_legacy(method):
        raise BadParameterError(f"RunSpec.method {method.get('name')!r} is written in an old form (fields of a Method); "
                                "write Method(...).algorithm().spec(); cached runs move with `fedpaper cache rekey`")
    return algorithm_of(method)


def pools_key_of(data: dict, data_root=None, device=None) -> tuple:
    """(data name, data root or None when not read from disk, device, options as canonical JSON)."""
    name = data["name"]
    root = None if name == "synthetic-images" or data_root is None else str(data_root)
    return (name, root, device or default_device(), spec_json(data.get("options") or {}))


@lru_cache(maxsize=4)
def get_pools(key: tuple) -> Pools:
    """Standardised pools of a data set, loaded once per process (key: see pools_key_of)."""

    name, root, device, options = key
    options = json.loads(options)
    _paper_of_data(name)
    if name in POOLS_BUILDERS:
        return POOLS_BUILDERS[name](options, root, device)
    if name == "synthetic-images":
        ds = synthetic_images(**{k: tuple(v) if isinstance(v, list) else v for k, v in options.items()})
    else:
        ds = load_dataset(name, root=root, **options)
    pools = Pools.from_dataset(ds, device=device)
    pools.description = ds.describe()
    return pools


def data_identity(data: dict, data_root=None) -> Optional[dict]:
    """Which copy of the data a run reads (fedpaper.blocks.data.data_copy), for the store key."""

    name = data["name"]
    _paper_of_data(name)
    if name in POOLS_BUILDERS:
        name = POOLS_BUILDERS[name].reads
    return data_copy(name, data_root) if name in DATASETS else None


# ---------------------------------------------------------------------------------------------
# Sweeps

def _result(res, r: int) -> dict:
    """Run r's stored result. A run that diverged (TrainResult.diverged) keeps the rounds before
    it and says where it stopped in "diverged_at"; its "best" and "final" are over those rounds.
    A run trained with TrainConfig.keep_best also keeps its "snapshot" (TrainResult.snapshots:
    {"round", "params", "buffers"}), stored with the rest behind the store's checksum."""
    h = res.history[res.history["run"] == r].drop(columns=["run"])
    diverged = (res.diverged or [None] * (r + 1))[r]
    out = {"history": h.to_dict("records"), "log": dict(res.log), "diverged_at": diverged}
    if res.snapshots is not None:
        out["snapshot"] = res.snapshots[r]
    if h.empty:  # diverged before its first evaluation
        return {**out, "best": {"round": None, "test_acc": float("nan"), "test_f1": None}, "final": {}}
    b = res.best()
    best = b[b["run"] == r].iloc[0].to_dict()
    best_f1 = None
    if "test_f1" in h:
        bf = res.best(report="test_f1")
        best_f1 = bf[bf["run"] == r].iloc[0]["test_f1"]
    return {**out, "best": {"round": int(best["best_round"]), "test_acc": float(best["test_acc"]),
                            "test_f1": None if best_f1 is None else float(best_f1)},
            "final": {k: float(h[k].iloc[-1]) for k in h.columns if k.endswith(("_acc", "_f1", "_loss"))}}


_BUDGET_NOTICES: set = set()


def group_setups(setups: list[RunSetup], max_batch: int, desc: str = "runs") -> list[list[int]]:
    """Which setups the engine trains together (indices, in order): those sharing a method, a
    TrainConfig and a pools key, at most `max_batch` per engine call and at most as many runs as
    fit the device's memory budget (engine.memory.runs_that_fit). One line says so, once per
    process and setting, when the budget makes a group smaller than it would be."""

    groups: dict = {}
    for i, st in enumerate(setups):
        groups.setdefault((st.method, st.config, st.pools_key), []).append(i)
    out = []
    for key, idx in groups.items():
        s0 = setups[idx[0]]
        fit = runs_that_fit(s0.method, s0.config, get_pools(s0.pools_key), len(s0.federation.client_indices),
                            max_batch)
        if fit.one_run_too_big() and key not in _BUDGET_NOTICES:
            _BUDGET_NOTICES.add(key)
            print(fit.too_big_notice(desc), flush=True)
        elif fit.runs < min(len(idx), max_batch) and key not in _BUDGET_NOTICES:
            _BUDGET_NOTICES.add(key)
            print(fit.notice(desc), flush=True)
        out += [idx[j:j + fit.runs] for j in range(0, len(idx), fit.runs)]
    return out


def plan_groups(specs: list, build: Callable, max_batch: int, desc: str = "runs") -> Iterator[list[tuple]]:
    """The groups of runs the engine trains together, in order, each a list of (position in `specs`,
    setup) pairs: the specs in chunks of `max_batch`, each chunk's setups built (`build(spec)`, once
    per spec, in order) and split by `group_setups` (method, config and pools key; at most
    `max_batch` runs and no more than fit the device's memory per group). Every spec lands in
    exactly one group. The one planner of every executor (fedpaper.runs.executors): the local sweep
    plans each chunk it trains, the task executors (local:N, ray) plan their tasks."""
    for c in range(0, len(specs), max_batch):
        setups = [build(s) for s in specs[c:c + max_batch]]
        for part in group_setups(setups, max_batch, desc):
            yield [(c + i, setups[i]) for i in part]


def train_group(setups: list[RunSetup], progress: bool) -> list[dict]:
    """Train one group of setups (one of `plan_groups`' groups) as one engine call: each run's result
    dict, in order."""
    s0 = setups[0]
    res = train(s0.method, s0.config, get_pools(s0.pools_key), [s.federation for s in setups], progress=progress)
    for st, d in zip(setups, res.diverged or []):
        if d:
            print(f"{getattr(st.method, 'name', st.method)} (seed {st.federation.seed}, {st.pools_key[0]}) diverged at "
                  f"round {d} of {st.config.rounds}: its rounds before are kept and its result says so", flush=True)
    return [_result(res, r) for r in range(len(setups))]


def store_key(spec: RunSpec, data_root=None) -> dict:
    """What a run's result is stored under: its paper, its spec and the data copy it reads
    (`data_identity` reads the tables of the paper a pools builder's data name belongs to first:
    without them the data copy would read as None, and the key would depend on what was imported
    before, as `fedpaper cache rekey` of FedMT's runs once found)."""
    return {"paper": spec.paper, "run": json.loads(spec.to_json()),
            "data_copy": data_identity(spec.data, data_root)}


def progress_enabled() -> bool:
    return os.environ.get("FEDPAPER_PROGRESS", "1") != "0"


class BuiltOnce:
    """`build(key)` made to build each run's setup once in a sweep: `cost(key)` (the deadline's pace
    of `sweep.run_sweep`) builds it and keeps it until the sweep's training asks for it (calling the
    object), which takes it; a key not costed first is built when it is asked for."""

    def __init__(self, build: Callable):
        self.build = build
        self._built: dict = {}

    def __call__(self, key) -> RunSetup:
        return self._built.pop(spec_json(key), None) or self.build(key)

    def cost(self, key) -> float:
        """The run's work in training samples (`run_cost`)."""
        j = spec_json(key)
        if j not in self._built:
            self._built[j] = self.build(key)
        return run_cost(self._built[j])

    cost.unit = "training sample"


def build_stored(by_key: dict, data_root, execution, key: dict) -> RunSetup:
    """The engine setup of the run stored under `key` (a store_key); picklable through
    functools.partial, so a cluster executor can ship it to its workers."""
    return by_key[spec_json(key)].build(data_root, execution)


def run_samples(config: TrainConfig, fed: Federation) -> tuple[float, float]:
    """(training samples, evaluated samples) of one run: every round's participating clients'
    labelled and unlabelled rows times the local epochs; the test and validation rows of every
    round the engine evaluates (driver.trainer: every `eval_every`-th round and the last).
    `fedpaper plan` counts runs with it, and a sweep's deadline paces by it (`run_cost`)."""
    n = sum(len(c) for c in fed.client_indices) + sum(len(c) for c in (fed.client_unlabeled_indices or []))
    train = float(n) * config.local_epochs * config.participation * config.rounds
    every = max(1, int(config.eval_every))
    evals = sum(1 for r in range(1, config.rounds + 1) if r % every == 0 or r == config.rounds)
    n_eval = len(fed.test_indices) + (0 if fed.val_indices is None else len(fed.val_indices))
    return train, float(n_eval * evals)


def run_cost(st: RunSetup) -> float:
    """A run's work in training samples, for a deadline's pace (sweep.run_sweep `cost`): its
    training samples plus a third of each evaluated sample (a forward pass, no backward)."""
    train, evaluated = run_samples(st.config, st.federation)
    return train + evaluated / 3
