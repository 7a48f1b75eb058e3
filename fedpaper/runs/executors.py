"""`run_specs`, the cached sweep of every paper, and where it trains its groups of runs: in this
process (default) or on a Ray cluster.

    run_specs(specs, build)                                  # local: today's behaviour
    run_specs(specs, build, executor="ray")                  # a local Ray cluster on this machine
    run_specs(specs, build, executor="ray:auto")             # the cluster `ray start` runs here
    run_specs(specs, build, executor="ray:10.0.0.5:6379")    # a cluster's head node
    run_specs(specs, build, executor="local:1")              # in this process, at most 1 run per engine call
    FEDPAPER_EXECUTOR=ray:auto jupyter lab                   # the default of every run_specs call

The unit of work (a task) is one group of runs that the engine trains together: exactly the groups
the local executor forms (pending specs in chunks of `max_batch`, grouped by method, TrainConfig
and data pool: experiment.plan_groups, the one planner of both), so a run sees the same batch (its numbers would be the same in
any group: the engine is batch-invariant on CPU, checked with 1 and 2 threads, tests/engine/test_cpu.py).
A task (`run_group`) skips itself when all its keys are stored, else claims its keys with leases
(`fedpaper.runs.leases`), trains the whole group and writes each result with the store's atomic
writes. A group that runs out of device memory is split in halves and goes on: every executor
trains a group through fedpaper.runs.oom.train_in_parts and stores each part as it ends. The
submitting side keeps one progress bar over the tasks, resubmits a task whose worker died (up to
`retries` times) and finally reads every result back from the store.

Resources per task: FEDPAPER_RAY_CPUS (default 1) and FEDPAPER_RAY_GPUS (default 0), or the
`RayExecutor(num_cpus=, num_gpus=)` arguments. The store folder (FEDPAPER_CACHE) must be the same
path on every node, e.g. a network filesystem.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from fedpaper.ground.errors import BadParameterError, FedpaperError
from fedpaper.runs.experiment import (BuiltOnce, Execution, RunSpec, build_stored, plan_groups, progress_enabled,
                                      store_key)
from fedpaper.runs.oom import train_in_parts, train_planned
from fedpaper.ground.files import atomic_write_text
from fedpaper.runs.leases import DEFAULT_TTL, HOST, claim_keys
from fedpaper.runs.store import ResultStore, spec_json
from fedpaper.runs import sweep
from fedpaper.runs.sweep import SweepScope, current_scope, in_scope, leased, run_sweep
from fedpaper.runs.versions import CODE_VERSION_ENV, code_version

EXECUTOR_ENV = "FEDPAPER_EXECUTOR"
AUDIT_ENV = "FEDPAPER_TASK_AUDIT"  # folder: each task writes started-/computed- marker files there
# FEDPAPER_* variables a worker needs to behave like the submitting process (data root, device...).
FORWARDED_ENV_PREFIX = "FEDPAPER_"
NOT_FORWARDED = {EXECUTOR_ENV}

class ExecutorMissingError(FedpaperError, ImportError):
    """The chosen executor's library is not installed."""

# ----------------------------------------------------------------------------- the sweep
def run_specs(specs: list[RunSpec], data_root=None, *, execution: Optional[Execution] = None, desc="runs",
              max_batch=16, progress=None, store=None, executor=None,
              scope: Optional[SweepScope] = None) -> list[dict]:
    """Result dict of every spec (history records, best-validation snapshot, final metrics).

    Specs are grouped by (method, config, pools) in their given order, up to `max_batch` runs per
    engine call and no more than fit the device's memory (experiment.plan_groups); every finished
    run is stored at once, so an interrupted sweep resumes. A run's
    result does not depend on its group (the engine is batch-invariant on CPU, bit for bit, checked
    with 1 and 2 threads: tests/engine/test_cpu.py), so the grouping is for speed only. Locally
    each run is claimed with a lease before it trains (sweep.leased): another process on the same
    store waits for it and reads its result instead of training it again.
    `executor`: "local" (default; trains here), "ray[:ADDRESS]" or an executor object; None: the
    scope's, else $FEDPAPER_EXECUTOR (see `get_executor`). `scope` (sweep.SweepScope; default:
    `sweep.current_scope()`, the artifact whose compute runs now) labels the bars, counts the
    runs into the artifact's tally and names their owner in the store's index."""

    scope = scope if scope is not None else current_scope()
    progress = progress_enabled() if progress is None else progress
    keys = [store_key(s, data_root) for s in specs]
    build = functools.partial(build_stored, {spec_json(k): s for k, s in zip(keys, specs)}, data_root, execution)
    executor = get_executor(executor if executor is not None else scope.executor)
    return executor.run_specs(keys, build, desc=desc, max_batch=max_batch, progress=progress, store=store,
                              scope=scope)


def task_groups(specs: list, build: Callable, max_batch: int, desc: str = "runs") -> list[list]:
    """The specs of each group experiment.plan_groups forms (the tasks of a task executor)."""
    return [[specs[i] for i, _ in group] for group in plan_groups(specs, build, max_batch, desc)]


def pending_specs(specs: list, store, force: bool) -> list:
    """Unique specs (first occurrence, in order) that are not stored yet (all when `force`)."""
    seen, out = set(), []
    for s in specs:
        k = store.key(s)
        if k in seen:
            continue
        seen.add(k)
        if force or s not in store:
            out.append(s)
    return out


# ----------------------------------------------------------------------------- one task
def _audit(kind: str, group_id: str) -> None:
    d = os.environ.get(AUDIT_ENV)
    if d:

        atomic_write_text(Path(d) / f"{kind}-{group_id}-{os.getpid()}-{uuid.uuid4().hex[:8]}", str(os.getpid()))


def group_id(store, specs: list) -> str:
    import hashlib

    return hashlib.sha256("".join(store.key(s) for s in specs).encode()).hexdigest()[:16]


def source_version() -> str:
    """Hash of this process's result-affecting source, ignoring the FEDPAPER_CODE_VERSION pin."""

    pinned = os.environ.pop(CODE_VERSION_ENV, None)
    try:
        return code_version()
    finally:
        if pinned is not None:
            os.environ[CODE_VERSION_ENV] = pinned


def run_group(specs: list, build: Callable, store_root: str, code: str, *, force: bool = False,
              ttl: Optional[float] = None, env: Optional[dict] = None, source: Optional[str] = None) -> dict:
    """Train one group and store its results (the body of a task; runs on a worker).

    Skipped when every key is stored (unless `force`); otherwise the keys are claimed (waiting
    while another worker holds them, then re-checking the store), the whole group is trained as
    one engine call (same batch as a local run) and the missing results are written atomically.
    `source`: the submitting side's `source_version()`; a worker whose fedpaper source differs
    refuses (its results would be stored under the wrong code version).
    Returns {"group", "computed": 0 or 1, "runs", "lost_lease"}."""

    _set_env(env)
    if source is not None and source_version() != source:
        raise FedpaperError(f"worker {HOST} runs a different fedpaper source (code version {source_version()} != "
                            f"{source} of the submitting side); install the same checkout on every node")
    store = ResultStore(store_root, code=code)
    gid = group_id(store, specs)
    todo = lambda: [s for s in specs if force or s not in store]  # noqa: E731
    if not todo():
        return {"group": gid, "computed": 0, "runs": len(specs), "lost_lease": False}
    with claim_keys(store.root, [store.key(s) for s in specs], ttl=ttl or DEFAULT_TTL) as claim:
        missing = list(specs) if force else todo()
        if not missing:  # another worker finished the group while we waited for its leases
            return {"group": gid, "computed": 0, "runs": len(specs), "lost_lease": False}
        _audit("started", gid)
        # each part's runs stored as it ends: a part that runs out of memory is split (runs.oom)
        for i, r in train_in_parts([build(s) for s in specs], False):
            if force or specs[i] not in store:
                store.put(specs[i], r)
        _audit("computed", gid)
    return {"group": gid, "computed": 1, "runs": len(specs), "lost_lease": claim.lost}


# ----------------------------------------------------------------------------- executors
def _set_env(env: Optional[dict]) -> None:
    """The worker's FEDPAPER_* variables become exactly the submitting side's (workers are reused)."""
    if env is None:
        return
    for k in [k for k in os.environ if k.startswith(FORWARDED_ENV_PREFIX) and k not in env]:
        del os.environ[k]
    os.environ.update(env)


class LocalExecutor:
    """The default: `run_specs` trains every group in this process, chunk by chunk of the store's
    sweep (sweep.run_sweep: resumable, paced by a deadline), each run claimed with a lease
    (sweep.leased), each chunk planned into engine calls and trained (oom.train_planned)."""

    name = "local"
    is_local = True

    def __repr__(self):
        return "LocalExecutor()"

    def run_specs(self, keys: list, build: Callable, *, desc="runs", max_batch=16, progress=True,
                  store=None, scope: Optional[SweepScope] = None) -> list:

        setups = BuiltOnce(build)  # a setup built for the deadline's cost estimate is the one trained
        train = functools.partial(train_planned, build=setups, max_batch=max_batch, desc=desc)
        store = store if store is not None else ResultStore()
        return run_sweep(keys, run_fn_many=leased(train, store, desc), batch_size=max_batch, desc=desc,
                         progress=progress, store=store, cost=setups.cost, scope=scope)


@dataclass
class SmallGroupExecutor:
    """`local:N`: trains in this process like the local executor, but at most `max_runs` runs per
    engine call (each group as `run_group` trains a Ray task: leases, atomic store writes). A group
    holds the parameters and optimiser state of every client of each of its runs at once: ~180 MB
    per client for a ResNet-18 with Adam, so the default group of 16 runs x 10 clients of the paper
    profile's ResNet-18s needs ~30 GB. A run's numbers do not depend on its group (the engine is
    batch-invariant on CPU, tests/engine/test_cpu.py). A dry run (fedpaper.outputs.dryrun) uses it by
    default. --max-hours is not checked between its groups."""

    max_runs: int = 1
    name = "local"
    is_local = False

    def run_specs(self, specs: list, build: Callable, *, desc="runs", max_batch=16, progress=True,
                  store=None, scope: Optional[SweepScope] = None) -> list:

        store = store if store is not None else ResultStore()
        force = os.environ.get("FEDPAPER_RECOMPUTE") == "1"
        groups = task_groups(pending_specs(specs, store, force), build, min(max_batch, self.max_runs))
        label = (scope or current_scope()).label(f"{desc} [local:{self.max_runs}]")
        with sweep._progress(len(groups), 0, label, progress, unit="groups") as bar:
            for g in groups:
                run_group(g, build, str(store.root), store.code, force=force)
                bar.update(1)
        return [store.get(s) for s in specs]


@dataclass
class RayExecutor:
    """Run each group as a Ray task (https://docs.ray.io). `address`: None starts a local Ray
    cluster in this process (all cores), "auto" joins the one `ray start` runs on this machine,
    "HOST:PORT" a head node, "ray://HOST:10001" a Ray Client server."""

    address: Optional[str] = None
    num_cpus: float = field(default_factory=lambda: float(os.environ.get("FEDPAPER_RAY_CPUS", "1")))
    num_gpus: float = field(default_factory=lambda: float(os.environ.get("FEDPAPER_RAY_GPUS", "0")))
    retries: int = 3
    ttl: Optional[float] = None
    init_kwargs: dict = field(default_factory=dict)
    init_attempts: int = 3  # starting a local cluster (address None) is retried this often
    name = "ray"
    is_local = False

    def _ray(self):
        try:
            import ray
        except ImportError:
            raise ExecutorMissingError("executor 'ray' needs Ray, which is not installed; install it with "
                                       "pip install 'fedpaper[cluster]' or choose --executor local") from None
        if not ray.is_initialized():
            env = {k: v for k, v in os.environ.items()
                   if k.startswith(FORWARDED_ENV_PREFIX) and k not in NOT_FORWARDED}
            for attempt in range(self.init_attempts):
                try:
                    ray.init(address=self.address, runtime_env={"env_vars": env}, log_to_driver=False,
                             include_dashboard=False, **self.init_kwargs)
                    break
                except Exception:  # Ray gives a starting raylet 30 s; an overloaded machine can miss that
                    ray.shutdown()
                    if attempt == self.init_attempts - 1 or self.address is not None:
                        raise
        return ray

    def run_groups(self, groups: list[list], build: Callable, store, *, force=False, desc="runs",
                   progress=True, scope: Optional[SweepScope] = None) -> dict:
        """Run every group as a task; returns counts {"tasks", "computed", "skipped", "retried"}.
        Raises FedpaperError naming the first failure if a task failed after its retries."""

        ray = self._ray()
        remote = ray.remote(max_retries=0, num_cpus=self.num_cpus, num_gpus=self.num_gpus)(run_group)
        env = {k: v for k, v in os.environ.items()
               if k.startswith(FORWARDED_ENV_PREFIX) and k not in NOT_FORWARDED}
        build_ref = ray.put(build)
        source = source_version()

        def submit(g):
            return remote.remote(g, build_ref, str(store.root), store.code, force=force, ttl=self.ttl, env=env,
                                 source=source)

        refs = {submit(g): (i, 0) for i, g in enumerate(groups)}
        counts = {"tasks": len(groups), "computed": 0, "skipped": 0, "retried": 0, "failed": 0}
        errors: list[str] = []
        with sweep._progress(len(groups), 0, (scope or current_scope()).label(f"{desc} [ray]"), progress,
                             unit="tasks") as bar:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                ref = ready[0]
                i, attempt = refs.pop(ref)
                try:
                    out = ray.get(ref)
                except ray.exceptions.RayTaskError as e:  # the task's own exception: not retried
                    counts["failed"] += 1
                    errors.append(_first_line(e))
                except ray.exceptions.RayError as e:  # worker or node died: resubmit
                    if attempt < self.retries:
                        counts["retried"] += 1
                        refs[submit(groups[i])] = (i, attempt + 1)
                        bar.set_postfix(failed=counts["failed"], retried=counts["retried"])
                        continue
                    counts["failed"] += 1
                    errors.append(_first_line(e))
                else:
                    counts["computed" if out["computed"] else "skipped"] += 1
                bar.update(1)
                bar.set_postfix(failed=counts["failed"], retried=counts["retried"])
        if errors:
            raise FedpaperError(f"{counts['failed']} of {len(groups)} ray task(s) failed; first: {errors[0]} "
                                "(finished runs are stored; run the same command again to resume)")
        return counts

    def run_specs(self, specs: list, build: Callable, *, desc="runs", max_batch=16, progress=True,
                  store=None, scope: Optional[SweepScope] = None) -> list:
        """`run_specs` through Ray: plan the local executor's groups of the pending
        specs, run them as tasks, read every result back from the store."""

        store = store if store is not None else ResultStore()
        force = os.environ.get("FEDPAPER_RECOMPUTE") == "1"
        groups = task_groups(pending_specs(specs, store, force), build, max_batch, desc)
        self.last_counts = self.run_groups(groups, build, store, force=force, desc=desc, progress=progress,
                                           scope=scope)
        out = []
        for s in specs:
            r = store.get(s, _MISSING)
            if r is _MISSING:
                raise FedpaperError(f"run missing from the store {store.root} after the sweep; is FEDPAPER_CACHE "
                                    "the same shared folder on every node?")
            out.append(r)
        return out


_MISSING = object()


def _first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[-1] if lines else ''}"


@contextlib.contextmanager
def using_executor(executor):
    """Within the block, run_specs calls that name no executor use `executor` (an executor object)
    instead of $FEDPAPER_EXECUTOR: e.g. `fedpaper plan`'s collecting executor (fedpaper.plan). It
    is the `executor` of the current sweep scope (sweep.SweepScope), the rest of the scope kept."""
    with in_scope(dataclasses.replace(current_scope(), executor=executor)):
        yield executor


def get_executor(spec=None):
    """An executor from a name: None -> $FEDPAPER_EXECUTOR or local; "local"; "ray"; "ray:ADDRESS";
    an executor object is returned as is."""
    if spec is not None and not isinstance(spec, str):
        return spec
    spec = (spec if spec is not None else os.environ.get(EXECUTOR_ENV, "")).strip() or "local"
    if spec == "local":
        return LocalExecutor()
    if spec.startswith("local:"):
        n = spec[len("local:"):]
        if not n.isdigit() or int(n) < 1:
            raise BadParameterError(f"executor {spec!r}: give local:N with N >= 1 runs per engine call (e.g. local:1)")
        return SmallGroupExecutor(int(n))
    if spec == "ray":
        return RayExecutor()
    if spec.startswith("ray://"):
        return RayExecutor(address=spec)
    if spec.startswith("ray:") and len(spec) > 4:
        return RayExecutor(address=spec[4:])
    raise BadParameterError(f"unknown executor {spec!r}; use local, local:N, ray or ray:ADDRESS "
                            "(e.g. ray:auto, ray:10.0.0.5:6379, ray://head:10001)")


def check_available(executor) -> None:
    """One clear error now (not after the first notebook) when the executor's library is missing."""
    if getattr(executor, "name", "") == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ExecutorMissingError("executor 'ray' needs Ray, which is not installed; install it with "
                                       "pip install 'fedpaper[cluster]' or choose --executor local") from None
