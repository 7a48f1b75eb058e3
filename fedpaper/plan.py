"""`fedpaper plan`: what a profile's artifacts cost, counted without training them.

    fedpaper plan --profile paper [--only ID_OR_PAPER ...] [--csv PATH] [--gpus N]

Per artifact: its runs (distinct; "new" = not needed by an artifact planned before it), rounds,
training samples (each run's client images x local epochs x participation x rounds, summed over
its distinct runs; evaluation samples, validation + test rows x evaluated rounds, separately),
multiply-accumulates (training and evaluation), the peak memory of one training step of its model
at the profile's batch size, the memory of its data pools, and the time it would take: here, from
a short measured timing of its model, and on a GPU from a measured throughput where
benchmarks/results/gpu.json has one (else "not measured"). Totals per paper at the end, over the
distinct runs of the paper. `--gpus N`: the wall time on N GPUs next to the GPU-hours (`gpu_wall`:
the groups of runs the sweeps form, packed longest first onto the least loaded GPU).

How the runs are found (no artifact logic is repeated here): each artifact's notebook function is
called as the notebook calls it, with `fedpaper.outputs.pipeline.COMPUTE_HOOK` set, so the pipeline
hands this module its job instead of computing, drawing and writing (nothing is written, absent
data sets do not stop it). An artifact that trains declares its runs (`ArtifactJob.specs`): its
specs are keyed as run_specs would key them (`declared_runs`), nothing of it runs. An artifact
that gives a `compute` instead trains nothing and is not called; a compute ladder's compute is
called, and its rungs (artifact functions) come back through the same hook with their declared
runs, while any run the ladder would train itself is refused (`_RefusingExecutor`).

A run is counted from its spec as RunSpec.build sets it up (`_Counter`: the paper's pools builder,
its layout, `experiment.train_config`), not by hand formulas; each pool and each federation is
built once (runs that differ only in method or training share one), and FedNCA-ML's composite
pools are built from their labels only (`label_only_pools`: no image is composed or standardised;
the federation depends on the labels, not on the pixels), with the real input size for the model
and the bytes the real pools hold (`engine.memory.pools_bytes`: compact pools keep uint8 pixels at
their native size and resize per batch). Not seen: runs whose specs would depend on earlier results
(none today), and server-side training inside a method (e.g. FedMT's server epochs, central
tuning), which the sample counts leave out.

Model costs (MACs, the memory of one training step, CPU time per sample, GPU throughput): see
fedpaper.runs.model_costs.
"""
from __future__ import annotations

import functools
import gc
import itertools
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from fedpaper.blocks.data.compact import CompactImages
from fedpaper.engine import Federation, Pools
from fedpaper.engine.memory import parted, pools_bytes, StepMemory
from fedpaper.runs.model_costs import (GPU_RESULTS, NOT_MEASURED, ModelKey, _one_line, gpu_rates,  # noqa: F401
                                  machine_key, macs, model_costs, model_costs_of, step_memory)
from fedpaper.runs import experiment as E
from fedpaper.outputs.artifacts import ArtifactResult
from fedpaper.outputs.pipeline import COMPUTE_HOOK
from fedpaper.runs.executors import using_executor
from fedpaper.runs.experiment import (Execution, RunSpec, get_pools, pools_key_of, run_samples,
                                      store_key, train_config)
from fedpaper.ground.errors import BadParameterError
from fedpaper.ground.files import atomic_path
from fedpaper import notebook
from fedpaper.outputs.registry import artifact, not_implemented_reason
from fedpaper.papers.fednca import data as FD
from fedpaper.ground.progress import warnings_once
from fedpaper.runs.store import ResultStore, spec_json

GB = 1e9


class _TrainsUndeclared(Exception):
    """An artifact's compute asked to train runs it does not declare (`ArtifactJob.specs`)."""


class _RefusingExecutor:
    """The executor of a compute ladder's compute while planning: its rungs' runs are declared and
    counted through the pipeline's hook; any other run it asks for is refused (nothing trains)."""

    name = "plan"
    is_local = False

    def run_specs(self, keys, build, **_):
        raise _TrainsUndeclared("trains runs it does not declare (give its ArtifactJob specs= and summarise=)")


# ----------------------------------------------------------------------------- what is counted
@dataclass
class RunCount:
    """One distinct run: its identity, model, rounds and samples."""

    ident: str
    paper: str
    rounds: int
    model: Optional[ModelKey] = None
    train_samples: Optional[float] = None
    eval_samples: Optional[float] = None
    pools: Optional[tuple] = None  # (pools identity, bytes the pools hold: engine.memory.pools_bytes)
    error: Optional[str] = None
    slots: Optional[int] = None  # clients training in one round (participation x clients): the engine's slots


@dataclass
class ArtifactPlan:
    artifact_id: str
    status: str = "planned"  # planned | no training | not implemented | error: ...
    missing: list = field(default_factory=list)
    runs: list = field(default_factory=list)  # RunCount, distinct within the artifact
    new: list = field(default_factory=list)  # idents not counted by an earlier artifact
    runs_from: str = ""  # "specs": its declared specs (ArtifactJob.specs); "compute": collected from its compute

    @property
    def paper(self) -> str:
        return self.artifact_id.split("/", 1)[0]


def _input_shape(pools) -> tuple:
    return tuple(pools.x_train.shape[1:])  # a compact pool's shape is its training size (resized per batch)


def count_run(ident: str, paper: str, config, pools, fed, pools_id) -> RunCount:
    """Samples of one run from its TrainConfig, pools and Federation (see the module docstring)."""

    train, evaluated = run_samples(config, fed)
    shape = _input_shape(pools)
    mk = ModelKey(config.model, _canon(config.model_kwargs), tuple(int(s) for s in shape), int(config.batch_size),
                  config.optimizer, float(config.momentum), config.precision, len(fed.client_indices),
                  pools.y_train.dim() == 2, int(config.eval_batch))
    pool_bytes = pools_bytes(pools)  # compact pools: uint8 pixels at their native size, whatever the input size
    slots = max(1, int(round(config.participation * len(fed.client_indices))))
    return RunCount(ident, paper, int(config.rounds), mk, train, evaluated, (pools_id, pool_bytes), slots=slots)


def run_peak(r: RunCount, costs: dict) -> Optional[float]:
    """Bytes of the smallest engine call that trains run `r` (the run alone): its data pools, every
    participating client's parameter-sized copies as the engine stacks them (engine.memory.StepMemory:
    parameters, anchor, gradients, new parameters, optimiser state) and one slot's step (its input
    batch and saved activations), in parts of clients as the engine trains them when they exceed
    engine.memory.SLOT_BYTES (each client then keeps its new parameters for the round). A lower bound for the vmap backend, which holds every slot's
    activations at once; the memory a workstation or GPU needs for this run at the least."""

    if r.model is None or r.slots is None or r.model not in costs:
        return None
    sm = costs[r.model]["step_memory"]
    slot = StepMemory.PARAM_COPIES * sm["params"] + sm["optimizer"]
    # the engine trains a round's clients in parts when their stacked steps exceed SLOT_BYTES: the run
    # alone then holds the global model, every client's new parameters and one part's stacked steps
    # (its clients' starts are views of the global model: trainer._slot_starts)
    n = parted(r.slots, slot, 2 * sm["params"])[0]
    slots = r.slots * slot if n >= r.slots else (r.slots + 1) * sm["params"] + n * slot
    return float((r.pools[1] if r.pools else 0) + slots + sm["saved"])


def _canon(d) -> str:
    return spec_json(d)


def declared_runs(job, params: dict, data_root, memo: Optional[dict] = None) -> list[tuple]:
    """(store key, execution, its JSON) of each distinct run an artifact declares (`job.specs(params)`),
    in order, as `fedpaper.runs.executors.run_specs` would key them (the execution its sweep trains
    with, `ArtifactJob.how`): nothing is trained.
    `memo`: {spec JSON: (store key, its JSON)}, shared by the artifacts of one plan (most share runs)."""
    memo = {} if memo is None else memo
    found = []
    for _, part in job.sweeps(job.specs(params)):
        execution = job.how(next(iter(part.values())))[0]  # a sweep's runs share their execution
        for j, s in part.items():
            if j not in memo:
                k = store_key(s, data_root)
                memo[j] = (k, spec_json(k))
            k, ident = memo[j]
            found.append((k, execution, ident))
    return found


def _is_ladder(aid: str) -> bool:
    """A compute ladder (`<paper>/scaling`): its compute runs other artifact functions as its rungs."""
    try:
        return artifact(aid).kind == "ladder"
    except Exception:  # noqa: BLE001 - an id the catalog does not know is no ladder
        return False


def collect(selected: list[str], profile: str, data_root) -> list[ArtifactPlan]:
    """The ArtifactPlan of every selected artifact, in catalog order (nothing trained or written)."""

    plans = {a: ArtifactPlan(a) for a in selected}
    counted: dict[str, RunCount] = {}  # ident -> count, over all artifacts
    notebooks: dict[str, list] = {}
    for a in selected:
        nb = artifact(a).notebook
        if nb is None:
            plans[a].status = f"not implemented: {not_implemented_reason(a)}"
        elif artifact(a).kind == "ladder" and profile == "paper":  # as `reproduce` (cli): nothing to plan
            plans[a].status = "no training: a compute ladder has no rungs at the paper profile"
        else:
            notebooks.setdefault(nb, []).append(a)

    outer: list = []  # the plan of the artifact whose compute is running (a ladder runs its rungs' artifacts)
    store_keys: dict = {}  # spec JSON -> (store key, its JSON), over all artifacts (declared_runs)
    counter = _Counter(data_root)

    def hook(aid, compute, params, missing):
        nested = bool(outer)
        # an artifact computed inside another's compute (a compute ladder's rungs): its runs are the outer
        # artifact's, recorded and exported under the ladder's id (its own plan, if selected, is its own sweep's)
        plan = outer[-1] if nested else (plans.get(aid) or ArtifactPlan(aid))
        if not nested:
            plan.missing = [] if params.get("profile") == "smoke" else list(missing)  # smoke: stand-ins
        before = len(plan.runs)
        outer.append(plan)
        job = getattr(compute, "job", None)  # an artifact that declares its runs (pipeline.ArtifactJob.specs)
        declared: list = []  # (store key, execution, its JSON)
        try:
            if job is not None and job.declares_runs:
                plan.runs_from = plan.runs_from or "specs"
                declared = declared_runs(job, params, compute.data_root, store_keys)
            elif _is_ladder(aid):
                # a compute ladder's rungs are artifact functions: each comes back through this hook with
                # its declared runs; what the ladder itself would train is refused
                plan.runs_from = "rungs"
                with using_executor(_RefusingExecutor()):
                    compute(params)
            if not declared and not nested and len(plan.runs) == before:
                plan.status = "no training"
        except _TrainsUndeclared as e:
            plan.status = f"error: {e}"
        except Exception as e:  # noqa: BLE001 - one line per artifact; the others go on
            # a ladder reads its rungs' tables, empty while planning: what failed after its rungs were
            # collected is that reading, not the plan
            if nested or len(plan.runs) == before:
                plan.status = f"error: {_one_line(e)}" + (f" (data absent: {', '.join(missing)})" if missing else "")
        finally:
            outer.pop()
        # runs that share a partition built one after another: a paper's layout caches its partitions
        # (privlabels: the last 64), and a sweep's order (method > setting > seed) would miss every time
        new = sorted({i: n for n, (_, _, i) in enumerate(declared) if i not in counted}.values(),
                     key=lambda n: _partition_order(declared[n][0]))
        for n in new:
            k, execution, ident = declared[n]
            # from its spec, with its sweep's execution (its evaluation batch is in the model key)
            _count_key(k, ident, counted, functools.partial(counter.count, ident, RunSpec(**k["run"]), execution))
        plan.runs += [counted[i] for _, _, i in declared]
        if aid in plans and plan.runs and plan.status.startswith("error") and missing:
            plan.status = "planned (data absent: " + ", ".join(missing) + ")"
        import pandas as pd

        return ArtifactResult(aid, pd.DataFrame(), None, {}, {}, "planned")


    with tempfile.TemporaryDirectory(prefix="fedpaper-plan-") as scratch, warnings_once("plan"):
        token = COMPUTE_HOOK.set(hook)
        try:
            paper = None
            for nb, aids in notebooks.items():
                if aids[0].split("/")[0] != paper:  # the pools one paper's runs were counted on, dropped after it
                    paper = aids[0].split("/")[0]
                    get_pools.cache_clear(), label_only_pools.cache_clear(), gc.collect()
                try:
                    notebook.artifact_function_of(nb)(profile=profile, data_root=None if data_root is None else str(data_root), out_dir=scratch,
                                             seeds=None)
                except Exception as e:  # noqa: BLE001 - e.g. bad data before the pipeline: one line
                    for a in aids:
                        if plans[a].status == "planned" and not plans[a].runs:
                            plans[a].status = f"error: {_one_line(e)}"
        finally:
            COMPUTE_HOOK.reset(token)
    seen: set = set()
    for a in selected:
        p = plans[a]
        uniq = {r.ident: r for r in p.runs}
        p.runs = list(uniq.values())
        p.new = [i for i in uniq if i not in seen]
        seen.update(uniq)
    return [plans[a] for a in selected]


def record_runs(selected: list[str], profile: str, data_root, store=None) -> dict:
    """Record in the store's index (ResultStore.record) every run the selected artifacts need at
    `profile`, as collected without training (`collect`), as their own sweeps would: so that
    `fedpaper cache export --only ... --profile ...` takes every finished run of theirs, including the
    runs trained by an exploration that selects part of an artifact (a piece of Table 1 by its
    `table1_rows`, on another machine), which records nothing itself, and `fedpaper cache rekey` finds
    their runs of an older code version by what they are. Returns {artifact: [run specs]}."""
    import json


    store = store if store is not None else ResultStore()
    out = {}
    for plan in collect(selected, profile, data_root):
        keys = [json.loads(r.ident) for r in plan.runs]
        if keys:
            store.record(plan.artifact_id, profile, keys)
        out[plan.artifact_id] = keys
    return out


def _partition_order(key: dict) -> tuple:
    run = key["run"]
    return (spec_json(run["data"]), spec_json(run["partition"]), spec_json(run.get("evaluation") or {}))


def _count_key(key: dict, ident: str, counted: dict, count) -> RunCount:
    """counted[ident]: `count()` (a RunCount), or the run with the error that stopped its count."""
    if ident in counted:
        return counted[ident]
    run = key["run"]
    rounds = int(run["training"].get("rounds", 0))
    try:
        rc = count()
    except Exception as e:  # noqa: BLE001 - e.g. its data are absent: the run is still counted
        rc = RunCount(ident, key["paper"], rounds, error=_one_line(e))
    counted[ident] = rc
    return rc


def _sizes_only(fed: Federation) -> Federation:
    """A Federation of the same sizes whose index arrays hold no memory (zero-stride views): all
    that counting a run reads (experiment.run_samples, the clients)."""
    def rows(a):
        return None if a is None else np.broadcast_to(np.int64(0), (len(a),))

    return Federation([rows(c) for c in fed.client_indices], rows(fed.test_indices), rows(fed.val_indices),
                      rows(fed.server_indices), None if fed.client_unlabeled_indices is None
                      else [rows(c) for c in fed.client_unlabeled_indices], seed=fed.seed)


class _Counter:
    """Counts runs from their specs as RunSpec.build sets them up (the same pools builders, layouts
    and train_config), each pool and each federation once: runs that differ only in their method or
    training settings share one federation (a layout reads the spec's data, partition and
    evaluation). Pools that `label_only_pools` can stand in for are built without their pixels."""

    def __init__(self, data_root):
        self.data_root = data_root
        self.feds: dict = {}

    def pools(self, key: tuple):
        return label_only_pools(key) if key[0] in LABEL_ONLY else get_pools(key)

    def count(self, ident: str, spec: RunSpec, execution: Optional[Execution] = None) -> RunCount:
        if spec.partition["layout"] not in E.LAYOUTS:
            E._import_paper(spec.paper)  # the paper's tables, as RunSpec.build reads them
        key = pools_key_of(spec.data, self.data_root)
        pools = self.pools(key)
        fk = spec_json([spec.paper, spec.data, spec.partition, spec.evaluation, key])
        if fk not in self.feds:
            try:
                layout = E.LAYOUTS[spec.partition["layout"]]
            except KeyError:
                raise BadParameterError(f"unknown partition layout {spec.partition['layout']!r}") from None
            self.feds[fk] = _sizes_only(layout(spec, pools, self.data_root))
        config = train_config(spec.training, pools, execution or Execution())
        return count_run(ident, spec.paper, config, pools, self.feds[fk], key)


# ----------------------------------------------------------------------------- pools without pixels
#: Pools builders whose pools `label_only_pools` builds without their pixels: FedNCA-ML's multi-label
#: composites (data name -> the composite source of fedpaper.papers.fednca.data).
LABEL_ONLY = {"fednca-cifar10": "cifar10", "fednca-dermamnist": "dermamnist", "fednca-synthetic": "synthetic"}


def composite_labels(labels, num_classes: int, *, singles_per_class, pairs_per_class_pair: int, seed: int,
                     max_offset: int = 7) -> np.ndarray:
    """The multi-hot labels [n, K] (float32) that fedpaper.blocks.data.multilabel.composite_split
    gives for these source labels, in its row order, without placing any pixel: the same seeded
    draws in the same order (class permutations, each row's corner and offsets, each pair's
    images), so the final shuffle is the same."""
    y = np.asarray(labels).reshape(-1).astype(np.int64)
    rng = np.random.default_rng(seed)
    by_class = [np.flatnonzero(y == c) for c in range(num_classes)]
    if pairs_per_class_pair and any(len(b) == 0 for b in by_class):
        raise BadParameterError(f"class {[c for c, b in enumerate(by_class) if len(b) == 0][0]} has no image; "
                                "composites need every class")
    singles = []
    for c in range(num_classes):
        perm = rng.permutation(by_class[c])
        singles.append(perm if singles_per_class is None else perm[:singles_per_class])
    single_rows = np.concatenate(singles) if singles else np.zeros(0, np.int64)
    pairs = [(a, b) for a, b in itertools.combinations(range(num_classes), 2) for _ in range(pairs_per_class_pair)]
    n = len(single_rows) + len(pairs)
    out = np.zeros((n, num_classes), dtype=np.float32)
    for _ in single_rows:
        rng.integers(4)
        rng.integers(0, max_offset + 1, size=2)
    out[np.arange(len(single_rows)), y[single_rows]] = 1
    for j, (a, b) in enumerate(pairs):
        rng.choice(by_class[a]), rng.choice(by_class[b])
        rng.integers(4)
        rng.integers(0, max_offset + 1, size=2), rng.integers(0, max_offset + 1, size=2)
        out[len(single_rows) + j, [a, b]] = 1
    return out[rng.permutation(n)]


@functools.lru_cache(maxsize=4)
def label_only_pools(key: tuple):
    """FedNCA-ML's composite pools (fedpaper.papers.fednca.data.composite_pools) of a pools key,
    labels only: the source splits read as that builder reads them, the composites' labels from
    `composite_labels`, and pixel pools of the real shape (uint8 canvases, resized to
    options["input_size"]) that hold no pixels, whose `nbytes` is what the real pools hold. For
    counting runs; nothing can train on them."""
    name, root, device, options = key
    options = json.loads(options)
    src, classes, desc = FD._split_sources(LABEL_ONLY[name], options, root)
    singles, pairs = options.get("singles", {}), options["pairs"]
    ys = {s: composite_labels(src[s][1], len(classes), singles_per_class=singles.get(s), pairs_per_class_pair=pairs[s],
                              seed=int(options.get("seed", 0)) * 10 + i, max_offset=int(options.get("max_offset", 7)))
          for i, s in enumerate(FD.SPLITS)}
    channels, side = int(src["train"][0].shape[1]), int(src["train"][0].shape[2])
    canvas = 2 * side if options.get("canvas") is None else int(options["canvas"])
    del src

    def no_pixels(n):
        return CompactImages(torch.zeros((), dtype=torch.uint8).expand(n, channels, canvas, canvas),
                             torch.zeros(channels), torch.ones(channels), options.get("input_size"))

    n = {s: len(ys[s]) for s in FD.SPLITS}
    pools = Pools.from_arrays(no_pixels(n["train"] + n["val"]), np.concatenate([ys["train"], ys["val"]]),
                              no_pixels(n["test"]), ys["test"], len(classes), device="cpu")
    pools.fednca_split = n
    pools.classes = classes
    pools.description = {**desc, "labels_only": True}
    return pools


# ----------------------------------------------------------------------------- the table
@dataclass
class Row:
    artifact: str
    status: str
    runs: int
    new_runs: int
    rounds: str
    train_samples: Optional[float]
    eval_samples: Optional[float]
    train_macs: Optional[float]
    eval_macs: Optional[float]
    step_peak_bytes: Optional[float]
    pools_bytes: Optional[float]
    cpu_hours: Optional[float]
    gpu_hours: Optional[float]
    models: str
    data: str
    unknown_runs: int = 0  # runs whose samples or model costs are unknown (not built: data absent)
    run_peak_bytes: Optional[float] = None  # the largest run_peak of its runs

    @property
    def partial(self) -> bool:
        return 0 < self.unknown_runs < self.runs


def _sum(rows: list[RunCount], what) -> Optional[float]:
    """The sum over the runs whose value is known; None when none is (see Row.partial)."""
    vals = [v for v in map(what, rows) if v is not None]
    return float(sum(vals)) if vals else None


def costs_of(runs: list[RunCount], costs: dict, gpu: dict) -> dict:
    """Sums over `runs` (each counted once): samples, MACs, CPU and GPU seconds; None where unknown."""
    def c(r):
        return costs.get(r.model) if r.model is not None else None

    def cpu(r):
        m = c(r)
        if m is None or r.train_samples is None or m["cpu_s_per_train_sample"] is None:
            return None
        return r.train_samples * m["cpu_s_per_train_sample"] + r.eval_samples * m["cpu_s_per_eval_sample"]

    def gpu_s(r):
        g = gpu.get(r.model.signature()) if r.model is not None else None
        if g is None or r.train_samples is None:
            return None
        return r.train_samples / g["train_samples_per_s"] + r.eval_samples / g["eval_samples_per_s"]

    return {"train_samples": _sum(runs, lambda r: r.train_samples), "eval_samples": _sum(runs, lambda r: r.eval_samples),
            "train_macs": _sum(runs, lambda r: None if c(r) is None or r.train_samples is None
                               else r.train_samples * c(r)["train_macs"]),
            "eval_macs": _sum(runs, lambda r: None if c(r) is None or r.eval_samples is None
                              else r.eval_samples * c(r)["eval_macs"]),
            "cpu_s": _sum(runs, cpu), "gpu_s": _sum(runs, gpu_s),
            "unknown": sum(1 for r in runs if cpu(r) is None)}


def _rounds(runs) -> str:
    rs = sorted({r.rounds for r in runs})
    return "-" if not rs else str(rs[0]) if len(rs) == 1 else f"{rs[0]}-{rs[-1]}"


def build_rows(plans: list[ArtifactPlan], progress=None, time_cpu: bool = True) -> tuple[list[Row], list[Row], dict]:
    """(artifact rows, per-paper total rows, model costs) of the plans (model_costs_of: each
    architecture measured and, with time_cpu, each timing class timed once, from the cache where it
    holds them; `progress(text)` before each measurement)."""
    keys = sorted({r.model for p in plans for r in p.runs if r.model is not None}, key=lambda k: k.signature())
    costs = model_costs_of(keys, progress=progress, time_cpu=time_cpu)
    _, gpu = gpu_rates()
    rows = []
    for p in plans:
        s = costs_of(p.runs, costs, gpu)
        ms = sorted({r.model for r in p.runs if r.model is not None}, key=lambda k: k.signature())
        pools = {r.pools[0]: r.pools[1] for r in p.runs if r.pools}
        errors = [r.error for r in p.runs if r.error]
        status = p.status + (f"; {len(errors)} run(s) not built (samples unknown): {errors[0]}" if errors else "")
        rows.append(Row(p.artifact_id, status, len(p.runs), len(p.new), _rounds(p.runs), s["train_samples"],
                        s["eval_samples"], s["train_macs"], s["eval_macs"],
                        max((costs[m]["step_memory"]["total"] for m in ms), default=None),
                        float(sum(pools.values())) if pools else None, _h(s["cpu_s"]), _h(s["gpu_s"]),
                        "; ".join(m.label() for m in ms), "absent: " + ", ".join(p.missing) if p.missing else "present",
                        s["unknown"], _max(run_peak(r, costs) for r in p.runs)))
    totals = []
    for paper in dict.fromkeys(p.paper for p in plans):
        mine = [p for p in plans if p.paper == paper]
        uniq = {r.ident: r for p in mine for r in p.runs}
        s = costs_of(list(uniq.values()), costs, gpu)
        ms = {r.model for r in uniq.values() if r.model is not None}
        mine_rows = [r for r in rows if r.artifact.split("/")[0] == paper]
        totals.append(Row(f"{paper} (total)", f"{sum(1 for p in mine if p.runs)} of {len(mine)} artifacts train",
                          len(uniq), len(uniq), _rounds(list(uniq.values())), s["train_samples"], s["eval_samples"],
                          s["train_macs"], s["eval_macs"],
                          max((costs[m]["step_memory"]["total"] for m in ms), default=None),
                          max((r.pools_bytes for r in mine_rows if r.pools_bytes), default=None),
                          _h(s["cpu_s"]), _h(s["gpu_s"]), f"{len(ms)} model(s)",
                          "absent: " + ", ".join(sorted({d for p in mine for d in p.missing}))
                          if any(p.missing for p in mine) else "present", s["unknown"],
                          _max(run_peak(r, costs) for r in uniq.values())))
    return rows, totals, costs


def _max(values):
    got = [v for v in values if v is not None]
    return max(got) if got else None


def _h(seconds):
    return None if seconds is None else seconds / 3600.0


# ----------------------------------------------------------------------------- formatting
def _num(x, unit="") -> str:
    if x is None:
        return "?"
    for div, suf in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {suf}{unit}".rstrip()
    return f"{x:.3g} {unit}".rstrip() if x else f"0 {unit}".rstrip()


def _hours(h) -> str:
    if h is None:
        return "?"
    return f"{h:,.1f} h" if h >= 0.1 else f"{h * 3600:,.0f} s"


COLUMNS = ("artifact", "runs (new)", "rounds", "train samples", "eval samples", "train MACs", "eval MACs",
           "step peak", "run peak", "pools", "CPU here", "GPU", "data", "status")


def _cells(r: Row, gpu_card) -> list[str]:
    if r.runs == 0:
        return [r.artifact, "0", r.rounds] + ["-"] * 9 + [r.data, r.status]
    at_least = "≥ " if r.partial else ""  # a sum over the runs that could be counted
    sums = [_num(r.train_samples), _num(r.eval_samples), _num(r.train_macs), _num(r.eval_macs)]
    return [r.artifact, f"{r.runs} ({r.new_runs})", r.rounds, *[at_least + x if x != "?" else x for x in sums],
            _num(r.step_peak_bytes, "B"), _num(r.run_peak_bytes, "B"), _num(r.pools_bytes, "B"),
            (at_least + _hours(r.cpu_hours)) if r.cpu_hours is not None else "?",
            _hours(r.gpu_hours) if r.gpu_hours is not None else NOT_MEASURED, r.data,
            r.status + (f"; {r.unknown_runs} of {r.runs} runs not counted (≥: the others)" if r.partial else "")]


def format_table(rows: list[Row], totals: list[Row], gpu_card=None) -> str:
    body = [_cells(r, gpu_card) for r in rows]
    tot = [_cells(r, gpu_card) for r in totals]
    allc = [list(COLUMNS)] + body + tot
    w = [max(len(c[i]) for c in allc) for i in range(len(COLUMNS) - 1)]
    line = lambda c: "  ".join(x.ljust(w[i]) for i, x in enumerate(c[:-1])) + "  " + c[-1]  # noqa: E731
    out = [line(list(COLUMNS)), line(["-" * x for x in w] + ["-" * 6])]
    out += [line(c) for c in body]
    out += [line(["-" * x for x in w] + ["-" * 6])] + [line(c) for c in tot]
    return "\n".join(out)


def fits_line(totals: list[Row]) -> str:
    """Whether each paper's largest one-run engine call (run_peak: its pools, every participating
    client's parameter copies, one step) fits a 24 GB workstation and an 80 GB GPU."""
    parts = []
    for t in totals:
        need = t.run_peak_bytes or ((t.pools_bytes or 0) + (t.step_peak_bytes or 0))
        if not need:
            continue
        parts.append(f"{t.artifact.split()[0]} {need / GB:.1f} GB ({'fits' if need < 24 * GB else 'does NOT fit'} "
                     f"24 GB RAM, {'fits' if need < 80 * GB else 'does NOT fit'} an 80 GB GPU)")
    return ("largest one-run engine call (data pools as held, compact uint8 at native size, + every participating "
            "client's parameter copies + one training step): " + "; ".join(parts) if parts else "")


def cpu_line(costs: dict) -> str:
    """Where the "CPU here" column comes from: the machine, the timings (how many, when measured,
    where cached) and how many model keys were scaled by MACs from their class's timing."""
    untimed = sum(1 for c in costs.values() if c.get("timed", {}).get("not_timed"))
    timed = [c["timed"] for c in costs.values() if "timed" in c and not c["timed"].get("not_timed")]
    not_timed = (f"{untimed} model key(s) without a timing on this CPU: their \"CPU here\" is left blank (add "
                 "--time-cpu to time them once per model class, minutes for the 224-px and 10-client models)"
                 if untimed else "")
    if not timed:
        return f"CPU here: {machine_key()}; no model timed" + (f"; {not_timed}" if not_timed else "")
    when = sorted({t["measured_at"] for t in timed if t.get("measured_at")})
    classes = {(t.get("timed_key"), t.get("measured_at")) for t in timed}
    scaled = sum(1 for t in timed if t.get("scaled_by_macs"))
    span = when[0] if len(when) == 1 else f"{when[0]} to {when[-1]}" if when else "?"
    return (f"CPU here: {machine_key()}; time = training samples x CPU s per training sample + evaluation "
            f"samples x CPU s per evaluation sample, from {len(classes)} engine timing(s) (FedAvg, random data of "
            f"the input shape; one per model class and machine) measured {span}, cached in {timed[0]['cached_in']}; "
            f"{scaled} of {len(timed)} model key(s) scaled by their MACs from the timing of their class "
            "(fedpaper/runs/model_costs.py)" + (f"; {not_timed}" if not_timed else ""))


def write_csv(path, rows: list[Row], totals: list[Row]) -> Path:
    import dataclasses

    import pandas as pd


    df = pd.DataFrame([dict(dataclasses.asdict(r), partial=r.partial) for r in rows + totals])
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False)
    return Path(path)


# ----------------------------------------------------------------------------- wall time on N GPUs
def _run_gpu_s(r: RunCount, gpu: dict) -> Optional[float]:
    """GPU seconds of one run at the measured rates of its model (as costs_of counts them)."""
    g = gpu.get(r.model.signature()) if r.model is not None else None
    if g is None or r.train_samples is None:
        return None
    return r.train_samples / g["train_samples_per_s"] + (r.eval_samples or 0.0) / g["eval_samples_per_s"]


def _group_of(ident: str) -> str:
    """What a run shares with the runs the engine trains beside it (experiment.group_setups: method,
    TrainConfig, data pool), read from its store key."""
    run = json.loads(ident)["run"]
    return _canon([run.get("method"), run.get("training"), run.get("data")])


def gpu_groups(runs: list[RunCount], gpu: dict, max_batch: int = 16) -> tuple[list[float], int]:
    """(GPU seconds of each group of runs, runs whose GPU rate is unknown) of `runs` (distinct, in
    the order the sweeps meet them), grouped as the local sweep groups a run_specs call: chunks of
    `max_batch` runs, each split by method, training settings and data (experiment.plan_groups; the
    memory cap is not applied). A group's time is the sum of its runs' (per-sample rates); a group
    with a run of unknown rate is left out and its unknown runs counted."""
    out, unknown = [], 0
    for c in range(0, len(runs), max_batch):
        groups: dict = {}
        for r in runs[c:c + max_batch]:
            groups.setdefault(_group_of(r.ident), []).append(_run_gpu_s(r, gpu))
        for times in groups.values():
            if any(t is None for t in times):
                unknown += sum(1 for t in times if t is None)
            else:
                out.append(float(sum(times)))
    return out, unknown


def pack_longest_first(seconds: list[float], n_gpus: int) -> list[float]:
    """Each GPU's load when the groups (`seconds` each) are placed longest first onto the least
    loaded of `n_gpus` GPUs (LPT scheduling: within 4/3 of the best makespan)."""
    import heapq

    if n_gpus < 1:
        raise BadParameterError(f"--gpus {n_gpus}: give a number of GPUs >= 1 (e.g. --gpus 8)")
    loads = [(0.0, i) for i in range(n_gpus)]
    for s in sorted(seconds, reverse=True):
        load, i = heapq.heappop(loads)
        heapq.heappush(loads, (load + s, i))
    return [load for load, _ in sorted(loads, key=lambda x: x[1])]


def gpu_wall(plans: list[ArtifactPlan], gpu: dict, n_gpus: int, max_batch: int = 16) -> dict:
    """{paper or "all": {"wall_h", "gpu_h", "groups", "longest_h", "unknown_runs"}}: the wall time of
    each paper's distinct runs (and of all papers' together) on `n_gpus` GPUs, one group of runs
    (`gpu_groups`) per GPU at a time, packed longest first onto the least loaded GPU, every group
    ready at the start (the executor's tasks of one sweep, e.g. `--executor ray` with one GPU per
    task; sweeps that wait on one another's results take longer)."""
    by_paper: dict = {}
    for p in plans:
        for r in p.runs:
            by_paper.setdefault(p.paper, {}).setdefault(r.ident, r)
    out = {}
    every: list = []
    unknown_all = 0
    for paper, runs in by_paper.items():
        secs, unknown = gpu_groups(list(runs.values()), gpu, max_batch)
        every += secs
        unknown_all += unknown
        out[paper] = _wall_entry(secs, n_gpus, unknown)
    out["all"] = _wall_entry(every, n_gpus, unknown_all)
    return out


def _wall_entry(secs: list[float], n_gpus: int, unknown: int) -> dict:
    loads = pack_longest_first(secs, n_gpus)
    return {"wall_h": max(loads) / 3600.0, "gpu_h": sum(secs) / 3600.0, "groups": len(secs),
            "longest_h": max(secs, default=0.0) / 3600.0, "unknown_runs": unknown}


def gpu_wall_line(plans: list[ArtifactPlan], gpu: dict, n_gpus: int, max_batch: int = 16) -> str:
    """One line: each paper's and all papers' wall time on `n_gpus` GPUs next to their GPU-hours."""
    w = gpu_wall(plans, gpu, n_gpus, max_batch)

    def one(name, e):
        if not e["groups"]:
            return f"{name} {NOT_MEASURED}"
        more = f", {e['unknown_runs']} run(s) without a GPU rate left out" if e["unknown_runs"] else ""
        return (f"{name} {_hours(e['wall_h'])} wall ({_hours(e['gpu_h'])} GPU, {e['groups']} group(s), longest "
                f"{_hours(e['longest_h'])}{more})")

    return (f"on {n_gpus} GPU(s), one group of runs per GPU at a time, longest first onto the least loaded, "
            "every group ready at the start: " + "; ".join(one(k, e) for k, e in w.items() if k != "all")
            + "; " + one("all papers", w["all"]))
