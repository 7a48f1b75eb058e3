"""Resumable sweeps over the results cache.

    results = run_sweep(specs, run_one, desc="table1")          # one run at a time
    results = run_sweep(specs, run_fn_many=engine_batch, batch_size=8)   # several runs at once

A sweep too long for one sitting runs in pieces: with a deadline (FEDPAPER_DEADLINE, set by
`fedpaper reproduce --max-hours H`) run_sweep starts no run that would end after it and raises
SweepStopped; finished runs are already stored, so the same command later resumes. Each sweep run
inside an artifact (its `SweepScope`: the pipeline passes it, or sets it around a paper's compute)
labels its bar by the artifact, counts its runs into the artifact's tally and records their keys in
the store's index (which artifact and profile they belong to), for `fedpaper cache export --only
...` (fedpaper.runs.archive) and the done/left counts.
"""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from fedpaper.ground.errors import BadParameterError
from fedpaper.runs.leases import claim_free, holder
from fedpaper.ground.progress import RunsBar, bar_label, collecting, on_rounds, running, while_running
from fedpaper.runs.store import ResultStore

_MISSING = object()  # store.get's default: not stored


class RunTally:
    """The distinct runs an artifact's sweeps asked for: read from the results cache when the sweep
    started, or computed (here, or by a worker beside this one on the same cache) — what its
    provenance says of how it was made (`fedpaper.outputs.pipeline` makes one per artifact). An
    artifact made inside another's (a compute ladder's rungs) also counts into its `parent`'s."""

    def __init__(self, parent: Optional["RunTally"] = None):
        self.cached: set[str] = set()
        self.computed: set[str] = set()
        self.parent = parent

    def add(self, cached_keys, computed_keys):
        self.computed.update(computed_keys)
        self.cached.update(k for k in cached_keys if k not in self.computed)
        if self.parent is not None:
            self.parent.add(cached_keys, computed_keys)

    def record(self) -> dict:
        return {"runs": len(self.cached | self.computed), "from_cache": len(self.cached),
                "computed": len(self.computed)}


@dataclass(frozen=True)
class SweepScope:
    """What every sweep of the artifact being made shares, handed down as the `scope` argument of
    `fedpaper.runs.executors.run_specs` and `run_sweep` (the pipeline, fedpaper.outputs.pipeline,
    makes one per artifact; the default, SweepScope(), is an exploration's sweep outside any
    artifact)."""

    artifact: str = ""  # the artifact id: every bar's label starts with it (bar_label)
    suffix: str = ""  # what a sweep repeated under another setting adds to its bars (a compute ladder's rung)
    owner: Optional[tuple] = None  # (artifact id, profile) whose runs these are, for the store's index; None: nobody's
    tally: Optional[RunTally] = None  # counts the distinct runs, cached or computed, for the provenance
    executor: object = None  # the executor of the run_specs calls that name none (None: $FEDPAPER_EXECUTOR)

    def label(self, desc: str) -> str:
        """A bar's label: the artifact id plus the sweep's short name (bar_label), then the suffix."""
        return " ".join(filter(None, (bar_label(self.artifact, desc), self.suffix)))


_NO_SCOPE = SweepScope()


def current_scope() -> SweepScope:
    """The scope of the artifact whose compute runs now (SweepScope() outside one): what a sweep
    started without a `scope` argument belongs to. A paper's compute calls run_specs from modules
    in its results' code version, which pass no scope: the pipeline sets it around the compute
    (`in_scope`), in the computation's context (fedpaper.ground.progress.running)."""
    scope = running().scope
    return _NO_SCOPE if scope is None else scope


@contextlib.contextmanager
def in_scope(scope: SweepScope):
    """Within the block, sweeps started without a `scope` argument (a paper's compute) use `scope`."""
    with while_running(scope=scope):
        yield scope


# `fedpaper reproduce --max-hours H` sets this (seconds since the epoch) for the kernels it starts.
DEADLINE_ENV = "FEDPAPER_DEADLINE"
_clock = time.time  # tests replace it
#: (unit, seconds per unit of cost) of the last sweep that ran here, for the next one's first run: unit "run"
#: (every run costs 1) or the unit of the sweep's `cost` (e.g. "training sample")
_last_pace: Optional[tuple] = None


class SweepStopped(RuntimeError):
    """A sweep stopped before its next run at the deadline (FEDPAPER_DEADLINE); every finished
    run is stored, so the same command resumes. `fedpaper reproduce` exits with EXIT_STOPPED."""

    def __init__(self, desc: str, done: int, total: int):
        self.desc, self.done, self.total = desc, done, total
        super().__init__(f"{desc}: stopped at the deadline ({DEADLINE_ENV}, --max-hours) with {done} of "
                         f"{total} runs done, {total - done} left; finished runs are cached, run the same "
                         "command again to resume")


def deadline() -> Optional[float]:
    """The deadline in seconds since the epoch (FEDPAPER_DEADLINE), or None."""
    raw = os.environ.get(DEADLINE_ENV)
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise BadParameterError(f"{DEADLINE_ENV}={raw!r} is not a time in seconds since the epoch; "
                                "unset it or use `fedpaper reproduce --max-hours H`") from None


def _past_deadline(cost_next: float, seconds_per_unit: Optional[float]) -> bool:
    """Whether the next runs (their cost: a count of runs, or of the sweep's cost unit) must not
    start: the deadline has come, or at the pace measured so far (seconds per unit) they would end
    after it."""
    end = deadline()
    if end is None:
        return False
    now = _clock()
    return now >= end or (seconds_per_unit is not None and now + seconds_per_unit * cost_next > end)


def _progress(total, initial, label, enabled, unit="runs"):
    """One bar per sweep: a widget in JupyterLab (tqdm.auto; ipywidgets is a dependency), text
    elsewhere. FEDPAPER_PROGRESS=0 turns it off, =text forces text (set by `fedpaper reproduce`
    and `make test` for the kernels they start, whose outputs nobody watches live). `label`: the
    sweep scope's (SweepScope.label: the artifact id, plus the sweep's short name); it counts runs,
    in tenths, as the engine's rounds finish (fedpaper.ground.progress.RunsBar), with the time left."""

    mode = os.environ.get("FEDPAPER_PROGRESS", "1")
    tqdm = None
    if mode != "text":
        try:  # without ipywidgets tqdm.auto would warn "IProgress not found" and print text anyway
            import ipywidgets  # noqa: F401
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
    if tqdm is None:
        from tqdm import tqdm
    if mode == "0":
        enabled = False
    return tqdm(total=total, initial=initial, desc=label, disable=not enabled,
                leave=True, bar_format="{l_bar}{bar}| {n:.1f}/{total_fmt} " + unit + " [{elapsed}<{remaining}{postfix}]")


@contextlib.contextmanager
def _log_above(bar):
    """fedpaper's log messages (e.g. partition notes) on their own lines above the bar; inside an
    artifact they are collected instead and logged once each after its sweeps
    (`fedpaper.ground.progress.warnings_once`)."""
    import logging

    from tqdm.contrib.logging import logging_redirect_tqdm

    if getattr(bar, "disable", True) or collecting():
        yield
        return
    with logging_redirect_tqdm(loggers=[logging.getLogger("fedpaper")], tqdm_class=type(bar)):
        yield


def _free_first(root, specs: list, keys: dict) -> list:
    """`specs` with the ones whose run another live process holds a lease on (fedpaper.runs.leases)
    moved to the end, order kept otherwise (keys: id(spec) -> its store key): two workers on one
    store each take the next free engine call instead of the second waiting for the first's
    (otherwise a second worker sits idle for a whole run, then leads, and the first waits)."""
    held = [holder(root, keys[id(s)]) is not None for s in specs]
    return [s for s, h in zip(specs, held) if not h] + [s for s, h in zip(specs, held) if h]


def run_sweep(specs: Iterable, run_fn: Optional[Callable] = None, *, run_fn_many: Optional[Callable] = None,
              batch_size: Optional[int] = None, store: Optional[ResultStore] = None, desc: str = "runs",
              force: bool = False, progress: bool = True, cost: Optional[Callable] = None,
              scope: Optional[SweepScope] = None) -> list:
    """Results of every spec, in order: finished runs are read from the store, the rest are run.

    Give either `run_fn(spec) -> result` (one run at a time) or `run_fn_many(list_of_specs) ->
    list_of_results` (the engine trains several runs at once; `batch_size` specs per call, default
    all pending). `run_fn_many` may also return an iterator, whose results are stored one by one as
    they come. Every result is stored as soon as it is available, so an interrupted sweep (Ctrl-C,
    kill) that is started again reuses every run that finished. `force=True` (or the environment
    variable FEDPAPER_RECOMPUTE=1, set by `fedpaper reproduce --force`) recomputes all.

    With a deadline (FEDPAPER_DEADLINE) no run (`run_fn`) or batch (`run_fn_many`) starts once the
    deadline has come or when, at the measured seconds per run (of this sweep, or of the last one
    in this process before this one has finished a run), it would end after the deadline:
    SweepStopped is raised instead (the runs already finished are stored). `cost(spec) -> float`
    (optional; its `unit` attribute names the unit) weighs the runs for that pace: seconds per unit
    of cost instead of per run, so a run ten times longer than the last is expected to take ten
    times as long (Fig 8a's 150-round runs with 10 of 101 clients, then Fig 8b's with all 10: a
    pace per run let a GPU sweep start a batch that overran its deadline by minutes). Costs are
    asked for only when a deadline is set, and a pace carries over to the next sweep only in the
    same unit. `scope` (default: `current_scope()`, the artifact whose compute runs now) labels
    the bar, counts the runs into its tally and, when it has an owner, records the specs' keys in
    the store's index first.
    """
    force = force or os.environ.get("FEDPAPER_RECOMPUTE") == "1"
    if (run_fn is None) == (run_fn_many is None):
        raise TypeError("run_sweep needs exactly one of run_fn or run_fn_many")
    store = store if store is not None else ResultStore()
    specs = list(specs)
    keys = [store.key(s) for s in specs]
    done: dict[str, object] = {}
    pending: list = []
    pending_keys: set[str] = set()
    for s, k in zip(specs, keys):
        if k in done or k in pending_keys:
            continue
        r = _MISSING if force else store.get(s, _MISSING)
        if r is _MISSING:
            pending.append(s)
            pending_keys.add(k)
        else:
            done[k] = r
    n_unique = len(done) + len(pending)
    scope = scope if scope is not None else current_scope()
    if scope.tally is not None:  # counted up front: a sweep that fails or stops writes no provenance
        scope.tally.add(done, pending_keys)
    if scope.owner is not None:
        store.record(*scope.owner, specs)
    t0, n_run = _clock(), 0
    unit = "run" if cost is None else getattr(cost, "unit", "cost")
    spent = [0.0]  # cost of the runs finished in this sweep (counted only with a deadline)

    def cost_of(chunk) -> float:
        return float(len(chunk)) if cost is None else float(sum(cost(s) for s in chunk))

    def check(chunk):
        global _last_pace
        if cost is not None and deadline() is None:  # costs are asked for only when a deadline is set
            return
        if n_run and spent[0] > 0:
            _last_pace = (unit, (_clock() - t0) / spent[0])
        pace = _last_pace[1] if _last_pace is not None and _last_pace[0] == unit else None
        if _past_deadline(cost_of(chunk), pace):
            raise SweepStopped(f"{scope.artifact + ': ' if scope.artifact else ''}{desc}", len(done), n_unique)
        spent[0] += cost_of(chunk)  # the chunk starts now: its cost counts once it has finished (n_run)

    with _progress(n_unique, len(done), scope.label(desc), progress) as bar, _log_above(bar):
        if run_fn is not None:
            for s in pending:
                check([s])
                moves = RunsBar(bar, float(len(done)), 1)
                with on_rounds(moves.round):
                    r = run_fn(s)
                store.put(s, r)
                done[store.key(s)] = r
                n_run += 1
                moves.stored(1)
        else:
            step = batch_size or max(1, len(pending))
            # a run_fn_many that stores each result itself (under its lease: `leased`)
            stored_by_fn = bool(getattr(run_fn_many, "stores_results", False))
            remaining = list(pending)
            key_of = {id(s): k for s, k in zip(specs, keys)}
            while remaining:
                if stored_by_fn:  # leased runs (`leased`): take free runs before held ones
                    remaining = _free_first(store.root, remaining, key_of)
                chunk, remaining = remaining[:step], remaining[step:]
                check(chunk)
                moves = RunsBar(bar, float(len(done)), len(chunk))
                n = 0
                with on_rounds(moves.round):
                    for s, r in zip(chunk, run_fn_many(chunk)):
                        if not stored_by_fn:
                            store.put(s, r)
                        done[store.key(s)] = r
                        n += 1
                        n_run += 1
                        moves.stored(n)
                if n != len(chunk):
                    raise RuntimeError(f"run_fn_many returned {n} results for {len(chunk)} specs")
    return [done[k] for k in keys]


def leased(train_all: Callable, store: ResultStore, desc: str = "runs", poll: float = 1.0) -> Callable:
    """`train_all(specs)` (yields (position in specs, result) as each engine call finishes:
    fedpaper.runs.oom.train_planned) made a `run_sweep` run_fn_many that is safe for several
    processes on one store: each run is claimed with a lease (fedpaper.runs.leases) before it is
    trained, and stored (store.put) before its lease is released; a run another live process holds
    is waited for (one line says so) and then read from the store; a run whose holder died or let
    its lease expire is claimed and trained here. So two `fedpaper reproduce` processes (or a
    notebook and the CLI) on one cache train each run once (tests/runs/test_concurrent_runs.py). The
    returned function stores its results itself (`stores_results`), so run_sweep does not write
    them again. Each result is stored as soon as its engine call ends, so a chunk stopped midway (a
    kill, a timeout, Ctrl-C) keeps the runs of every engine call that finished."""

    force = os.environ.get("FEDPAPER_RECOMPUTE") == "1"

    def many(chunk):
        hashes = [store.key(k) for k in chunk]
        spec_of = dict(zip(hashes, chunk))
        out: dict = {}  # store key -> result
        todo = list(spec_of)
        waited = False
        while todo:
            claim = claim_free(store.root, todo)
            try:
                mine = [h for h in todo if h in claim.keys]
                # a run another process finished while we were not holding it is read, not retrained
                # (--force recomputes the runs claimed at once, and reads the ones waited for)
                for h in mine:
                    r = None if force and not waited else store.get(spec_of[h], None)
                    if r is not None:
                        out[h] = r
                fresh = [h for h in mine if h not in out]
                if fresh:
                    for i, r in train_all([spec_of[h] for h in fresh]):
                        store.put(spec_of[fresh[i]], r)
                        out[fresh[i]] = r
            finally:
                claim.release()
            for h in todo:  # held by another process: its result once it is stored
                if h not in out:
                    r = store.get(spec_of[h], None)
                    if r is not None:
                        out[h] = r
            todo = [h for h in todo if h not in out]
            if todo and not waited:
                owners = sorted({held["owner"].rsplit(":", 1)[0] for held in
                                 (holder(store.root, h) for h in todo) if held})
                print(f"{desc}: waiting for {len(todo)} run(s) being trained by another process "
                      f"({', '.join(owners) or 'lease just released'}); their results will be read from the store",
                      flush=True)
                waited = True
            if todo:
                time.sleep(poll)
        return [out[h] for h in hashes]

    many.stores_results = True
    return many
