"""The one pipeline every artifact goes through: an artifact function returns what to make
(`ArtifactJob`: its id, its profile's settings, how to compute its table, how to draw it, the data
it needs), and `artifact_function` runs each job: check the parameters, settle the job's settings
(the overrides and the seeds) -> compute (the sweep) -> table -> draw -> write the four files
(fedpaper.outputs.artifacts' output contract) -> check the paper's claims on the figure. A paper
module writes::

    @artifact_function
    def table1(*, profile="smoke", data_root=None):
        return ArtifactJob("fedpals/table1", settings(profile), compute=lambda p: _compute(p, data_root),
                           draw=_draw, datasets=("fashion-mnist", "cifar10", "pacs"), optional_datasets=("pacs",),
                           where=f"the fedpals {profile} profile", choices=CHOICES)

and its users call `table1(profile="quick", out_dir=..., seeds=..., overrides={...})`, which
returns an ArtifactResult (a list of them where the function returns a list of jobs). The artifact
function never sees the overrides nor the seeds: the pipeline settles each job's settings once
(`parameters.settle`: the overrides applied, checked against the job's `choices` and named by its
`where` in an error line, then every seed setting a list of seed ids, the explicit seeds replacing
each) and hands the settled dict to the job's callables. What a job derives from its settings (its
runs, the data sets it needs, how its runs execute) it derives from the settled dict: `specs`,
`summarise`, `compute`, `draw`, and `datasets` or `execution` given as a callable of it.

An artifact that trains declares its runs instead of computing them: `specs(params) -> [RunSpec]`
and `summarise(specs, results, params) -> (table, info)` (ArtifactJob); the pipeline trains them
(run_specs) and `fedpaper plan` reads them. `compute(params) -> (table, info)` is for an artifact
that trains nothing (or has not declared its runs yet); `info` may hold `datasets` (list of dicts like
`ImageDataset.describe()`: name, source, lossy, synthetic), `seeds`, `device`, `notes` (list of
strings, e.g. shrinkage relative to the paper). `draw(table, params) -> matplotlib Figure`.
`params` reaches compute and draw settled, plus `profile` and
`missing_datasets` (optional data sets that are absent) when not already set. `datasets`: the
data sets the artifact needs ("none" for none; "voc2007:labels" for labels only);
`optional_datasets`: a subset whose absence still lets the artifact be regenerated in part
(compute sees them in params["missing_datasets"] and leaves their rows out).
"""
from __future__ import annotations

import contextvars
import dataclasses
import functools
import inspect
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import pandas as pd

from fedpaper.blocks.data.registry import dataset_available, dataset_info, missing_message, split_need
from fedpaper.ground.errors import BadParameterError, DataMissingError
from fedpaper.ground.paths import data_root as _data_root, dry_run_scratch
from fedpaper.ground.progress import warnings_once
from fedpaper.outputs.artifacts import (CLAIM_NOTE_PREFIX, ArtifactResult, caption_failed_claims, check_output_folder,
                                        close_figure, exploration_dir, output_paths, report_status, rerender_or_fail,
                                        requested, rerender_requested, resolve_out_dir, stamp_exploration,
                                        stamp_figure, write_outputs)
from fedpaper.outputs.dryrun import DryRunExecutor
from fedpaper.outputs.parameters import APPLIED_KEY, Parameters, check_profile, overridable_keys, settle, validate
from fedpaper.claims.catalog import get_artifact, reported_path
from fedpaper.runs import provenance as prov
from fedpaper.runs.sweep import RunTally, SweepScope, current_scope, in_scope

if TYPE_CHECKING:
    from fedpaper.runs.experiment import Execution

#: While set (by `fedpaper plan`, fedpaper.plan), the pipeline hands `hook(artifact_id, compute,
#: params, missing_datasets)` the artifact instead of computing, drawing and writing it, and returns
#: what the hook returns: nothing is written, data sets may be absent.
COMPUTE_HOOK: "contextvars.ContextVar[Optional[Callable]]" = contextvars.ContextVar("fedpaper_compute_hook",
                                                                                      default=None)


@dataclass(frozen=True)
class ArtifactJob:
    """One artifact, declared: what an artifact function returns (see the module docstring).

    An artifact that trains declares its runs: `specs(params) -> [RunSpec]` and `summarise(specs,
    results, params) -> (table, info)`, pure (it reads only its arguments and the data sets'
    descriptions); the pipeline runs the specs through `fedpaper.runs.executors.run_specs` (each
    distinct spec once, at `execution`, `max_batch` runs per engine call, in one call per
    `split_by` label where runs may not share an engine call) and hands summarise one result per
    spec, in order. A run that executes unlike the others (another backend or batch size) says so
    through `run_as(spec) -> (execution, max_batch)` and trains in a sweep of its own.
    `fedpaper plan` reads the same `specs` without training. An artifact that trains nothing gives
    `compute` instead (compute=None when it declares specs).

    `params` are the profile's settings as declared; `settled(parameters)` is the job the pipeline
    runs: its settings settled (`parameters.settle`, with `where` and `choices`; then `follow`, where
    a setting follows another's override) and `datasets` or `execution` given as a callable of the
    settled settings evaluated on them."""

    artifact_id: str
    params: dict
    compute: Optional[Callable]  # params -> (table, info); None when `specs` is given
    draw: Callable  # (table, params) -> Figure
    datasets: Sequence[str] | Callable = ("none",)  # or params -> the data set names
    optional_datasets: Sequence[str] = ()
    specs: Optional[Callable] = None  # params -> list[RunSpec]
    summarise: Optional[Callable] = None  # (specs, results, params) -> (table, info)
    execution: Optional[Execution] | Callable = None  # how the declared runs execute (not part of their key), or params -> it
    max_batch: Optional[int] = 16  # None: every run of a sweep in one engine call (memory permitting)
    desc: Optional[str] = None  # the sweep's label (default: the artifact id)
    split_by: Optional[Callable] = None  # spec -> label: runs with different labels never share an engine call
    run_as: Optional[Callable] = None  # spec -> (execution, max_batch) of each run (default: the job's)
    where: str = ""  # where its settings come from, for an override's error line (default: the artifact id)
    choices: Optional[dict] = None  # {dotted setting: the entries it may take} (parameters.apply_overrides)
    follow: Optional[Callable] = None  # settled params -> params: settings that follow another's override

    @property
    def declares_runs(self) -> bool:
        return self.specs is not None

    def settled(self, parameters: Parameters) -> "ArtifactJob":
        """This job under the checked `parameters`: its settings settled once (parameters.settle, then
        `follow`), and `datasets` and `execution`, where given as callables, evaluated on them."""
        params = settle(self.params, parameters, where=self.where or self.artifact_id, choices=self.choices)
        if self.follow is not None:
            params = self.follow(params)
        derived = {"params": params}
        if callable(self.datasets):
            derived["datasets"] = tuple(self.datasets(params))
        if callable(self.execution):
            derived["execution"] = self.execution(params)
        return dataclasses.replace(self, **derived)

    def how(self, spec) -> tuple:
        """(execution, max_batch) of one declared run: `run_as(spec)`, else the job's own."""
        return self.run_as(spec) if self.run_as is not None else (self.execution, self.max_batch)

    def sweeps(self, specs: list) -> list[tuple[str, dict]]:
        """(label, {spec JSON: spec}) of each run_specs call that trains `specs`: the distinct specs
        (first occurrence, in order), in one call, or in one per `split_by` label and per `how` (in
        order of first use)."""
        uniq: dict = {}
        for s in specs:
            uniq.setdefault(s.to_json(), s)
        desc = self.desc or self.artifact_id
        if self.split_by is None and self.run_as is None:
            return [(desc, uniq)]
        parts: dict = {}
        for j, s in uniq.items():
            parts.setdefault((None if self.split_by is None else self.split_by(s), self.how(s)), {})[j] = s
        return [(desc if len(parts) == 1 or label is None else f"{desc} {label}", part)
                for (label, _), part in parts.items()]

    def run_declared(self, specs: list, data_root=None, scope: Optional[SweepScope] = None) -> list:
        """One result per spec, in order: each of `sweeps` through run_specs, in `scope` (the
        artifact's: bar labels, run tally, owner; default SweepScope(), nobody's)."""
        from fedpaper.runs.executors import run_specs  # start-up time: torch, imported when an artifact trains

        from fedpaper.runs.experiment import store_key  # start-up time: torch, imported when an artifact trains
        from fedpaper.runs.store import ResultStore  # with the line above

        scope = scope if scope is not None else SweepScope()
        sweeps = self.sweeps(specs)
        if scope.owner is not None:  # every run in the index before the first trains: a stopped sweep counts all
            ResultStore().record(*scope.owner, [store_key(s, data_root) for _, part in sweeps for s in part.values()])
        by: dict = {}
        for desc, part in sweeps:
            execution, max_batch = self.how(next(iter(part.values())))
            by.update(zip(part, run_specs(list(part.values()), data_root, execution=execution, desc=desc,
                                          max_batch=max_batch or len(part), scope=scope)))
        return [by[s.to_json()] for s in specs]

    def compute_fn(self, data_root=None) -> Callable:
        """params -> (table, info): `compute`, or the declared runs' sweep followed by `summarise`."""
        if not self.declares_runs:
            return self.compute
        return _DeclaredCompute(self, data_root)


@dataclass(frozen=True)
class _DeclaredCompute:
    """The compute of an artifact that declares its runs (ArtifactJob.compute_fn); `job` lets a
    reader (fedpaper plan) take its specs instead of calling it."""

    job: ArtifactJob
    data_root: Optional[str] = None

    def __call__(self, params: dict, scope: Optional[SweepScope] = None):
        specs = list(self.job.specs(params))
        check_rounds_reach(self.job.artifact_id, params, specs)
        return self.job.summarise(specs, self.job.run_declared(specs, self.data_root, scope), params)


def _spec_rounds(spec) -> Optional[int]:
    training = spec.get("training") if isinstance(spec, dict) else getattr(spec, "training", None)
    rounds = training.get("rounds") if isinstance(training, dict) else None
    return rounds if isinstance(rounds, int) and not isinstance(rounds, bool) else None


def settings_equal_to(params: dict, values: set) -> list[str]:
    """The dotted settings of `params` (other than rounds) whose value is one of `values`."""
    out = []
    for key in overridable_keys(params):
        node = params
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if key.split(".")[0] != "rounds" and isinstance(node, int) and not isinstance(node, bool) and node in values:
            out.append(key)
    return out


def _overridden(applied: dict, key: str) -> bool:
    """Whether the applied overrides set the dotted setting `key` (as `a.b` or as `{a: {b: ...}}`)."""
    if key in applied:
        return True
    head, _, rest = key.partition(".")
    return bool(rest) and isinstance(applied.get(head), dict) and _overridden(applied[head], rest)


def check_rounds_reach(artifact_id: str, params: dict, specs: Sequence) -> None:
    """A `rounds` override must reach at least one of the artifact's declared runs, unless another
    override sets their rounds (privlabels' `epochs.rounds` beside `rounds`); one line naming the
    setting its runs take their rounds from otherwise (so that provenance never records an override
    the runs did not get)."""
    applied = params.get(APPLIED_KEY) or {}
    wanted = applied.get("rounds")
    wanted = set(wanted.values()) if isinstance(wanted, dict) else {wanted}
    got = {r for r in map(_spec_rounds, specs) if r is not None}
    if None in wanted or not got or wanted & got:
        return
    other = settings_equal_to(params, got)
    if any(_overridden(applied, key) for key in other):
        return
    shown = ", ".join(map(str, sorted(wanted)))
    instead = (f"its runs take their rounds from {', '.join(other)}; override that instead" if other
               else f"its runs train {', '.join(map(str, sorted(got)))} rounds, set by none of its settings")
    raise BadParameterError(f"{artifact_id}: the override rounds={shown} reaches none of its runs; {instead}")


def _public(*, profile="smoke", data_root=None, out_dir=None, seeds=None, overrides=None):
    """The signature every artifact function shows its users."""


def artifact_function(fn):
    """Decorator for a paper's artifact function `fn(*, profile, data_root)` returning an
    ArtifactJob or a list of them: its users call it with `(*, profile, data_root, out_dir, seeds,
    overrides)`; every parameter is checked first (parameters.validate: one line for a bad one),
    then `fn` declares its jobs with its profile's settings, the pipeline settles each job's
    settings (ArtifactJob.settled: the overrides and the seeds, once) and runs the jobs, in order."""

    @functools.wraps(fn)
    def wrapper(*, profile="smoke", data_root=None, out_dir=None, seeds=None, overrides=None):
        p = validate(profile=profile, seeds=seeds, data_root=data_root, out_dir=out_dir, overrides=overrides)
        jobs, single = _declared(fn, p)
        if single:
            return _run_job(jobs[0], p)
        # `fedpaper reproduce --only` makes the artifacts it selected, not every one the function declares
        return [_run_job(j, p) for j in ([j for j in jobs if requested(j.artifact_id)] or jobs)]

    wrapper.__signature__ = inspect.signature(_public)
    wrapper.fedpaper_artifact_function = True
    return wrapper


def _declared(fn, p: Parameters) -> tuple[list, bool]:
    """(the jobs artifact function `fn` (undecorated) declares at the checked parameters `p`, each
    settled (ArtifactJob.settled), in order; whether `fn` returned one job rather than a list)."""
    jobs = fn(profile=p.profile, data_root=p.data_root)
    if isinstance(jobs, ArtifactJob):
        return [jobs.settled(p)], True
    if isinstance(jobs, (list, tuple)) and jobs and all(isinstance(j, ArtifactJob) for j in jobs):
        return [j.settled(p) for j in jobs], False
    raise BadParameterError(f"{fn.__qualname__} returned a {type(jobs).__name__}; an artifact function "
                            "returns an ArtifactJob or a list of them (fedpaper.outputs.pipeline)")


def declared_jobs(fn, **parameters) -> list:
    """The jobs artifact function `fn` declares when called with `parameters` (profile, data_root,
    seeds, overrides; checked as its users' call checks them), each settled, nothing run: what a
    benchmark or a sizing reads (a job's `params`, its `specs(params)`)."""
    return _declared(getattr(fn, "__wrapped__", fn), validate(**parameters))[0]


def run_job(job: ArtifactJob, **parameters) -> ArtifactResult:
    """One job through the pipeline, with the parameters of an artifact function (profile,
    data_root, out_dir, seeds, overrides): its settings settled, then run."""
    p = validate(**parameters)
    return _run_job(job.settled(p), p)


def _follow_seeds(notes: list, n: int) -> list:
    """A profile's notes (figure footnote, provenance) name its seed count ("2 seeds"); with
    explicit seeds they name the actual count."""
    return [re.sub(r"\b\d+ seeds\b", f"{n} seeds", x) if isinstance(x, str) else x for x in notes]


def _column_notes(artifact_id: str, table: pd.DataFrame) -> list[str]:
    rp = reported_path(artifact_id)
    notes = []
    if {"mean"} <= set(table.columns) and not {"method", "metric"} <= set(table.columns):
        notes.append("table has 'mean' but lacks 'method'/'metric' columns")
    if rp is not None and rp.is_file():
        cols = list(pd.read_csv(rp, nrows=0).columns)
        missing = [c for c in cols if c not in table.columns and c not in ("source",)]
        if missing:
            notes.append(f"columns of the reported csv missing from ours: {', '.join(missing)}")
    return notes


def _dataset_records(needed: Sequence[str], root: Path, info_datasets) -> list[dict]:
    """Catalog view (which copy) merged with what the loader reported (source, lossy, synthetic)."""
    given = info_datasets or []
    if isinstance(given, dict):
        given = [dict(v, name=v.get("name", k)) if isinstance(v, dict) else {"name": k, "source": v}
                 for k, v in given.items()]
    given = [prov.jsonable(g) if isinstance(g, dict) else prov.jsonable(getattr(g, "describe", lambda: {"name": str(g)})())
             for g in given]
    out = []
    seen = set()
    for need in needed:
        base, labels_only = split_need(need)
        meta = dataset_info(base)
        rec = {"name": base, "labels_only": labels_only, "data_root": str(root),
               "available": dataset_available(need, root), "offline_copy_note": meta.copy_note}
        for g in given:
            if g.get("name") in (base, need):
                rec.update(g)
                rec["name"] = base
                seen.add(id(g))
        out.append(rec)
    out.extend(g for g in given if id(g) not in seen)
    return out


def _run_job(job: ArtifactJob, p: Parameters) -> ArtifactResult:
    """The pipeline for one settled job (ArtifactJob.settled) under the checked parameters `p` (see
    the module docstring)."""
    artifact_id, profile, data_root, out_dir = job.artifact_id, p.profile, p.data_root, p.out_dir
    compute, draw = job.compute_fn(data_root), job.draw
    if job.declares_runs and not callable(job.summarise):
        raise BadParameterError(f"{artifact_id}: an ArtifactJob that declares specs also needs "
                                "summarise(specs, results, params) -> (table, info)")
    datasets, optional_datasets = list(job.datasets), list(job.optional_datasets)
    art = get_artifact(artifact_id)
    check_profile(profile)
    if not callable(compute) or not callable(draw):
        raise BadParameterError("compute and draw must be callables: compute(params) -> (table, info), "
                                "draw(table, params) -> Figure")
    for d in list(datasets) + list(optional_datasets):
        if d != "none":
            dataset_info(d)  # validates the name
    unknown_opt = [d for d in optional_datasets if d not in datasets]
    if unknown_opt:
        raise BadParameterError(f"optional_datasets {unknown_opt} must also be listed in datasets")
    params = job.params  # settled: the overrides applied, every seed setting a list
    if p.dry_run and out_dir is None:
        out = check_output_folder(dry_run_scratch(), "the dry run's scratch folder")
    elif p.exploration and out_dir is None:
        out = exploration_dir(profile, p.changes())
    else:
        out = resolve_out_dir(profile, out_dir)
    root = _data_root(data_root)
    paths = output_paths(artifact_id, out)
    resolved_seeds = params.get("seeds")
    params.setdefault("profile", profile)
    n_seeds = len(resolved_seeds) if p.seeds is not None and resolved_seeds else None
    if n_seeds and isinstance(params.get("notes"), list):
        params["notes"] = _follow_seeds(params["notes"], n_seeds)
    explore_note = (f"DRY RUN of the {profile} profile: cut {p.describe()}; every other setting is the "
                    f"{profile} profile's; one run per configuration trained, the others repeat its result; "
                    "not a result" if p.dry_run else
                    f"EXPLORATION: changed {p.describe()}; other notes describe the {profile} profile"
                    if p.exploration else None)
    if explore_note and isinstance(params.get("notes"), list):
        params["notes"] = [explore_note] + params["notes"]  # figure footnotes drawn from the notes say it too

    needed = [d for d in datasets if d != "none"]
    missing = [d for d in needed if not dataset_available(d, root)]
    missing_required = [d for d in missing if d not in optional_datasets]
    hook = COMPUTE_HOOK.get()
    if hook is not None:
        params.setdefault("missing_datasets", [] if profile == "smoke" else missing)
        return hook(artifact_id, compute, params, missing)
    if rerender_requested() and profile != "smoke" and not p.exploration:
        return rerender_or_fail(art, profile, params, draw, missing_required, root, paths, asked=True)
    if profile != "smoke" and missing_required and p.exploration:
        raise DataMissingError(f"{artifact_id}: {missing_message(missing_required[0], root)}; an exploration "
                               f"({p.describe()}) needs the data (committed results are not re-rendered)")
    if profile != "smoke" and missing_required:
        return rerender_or_fail(art, profile, params, draw, missing_required, root, paths)
    params.setdefault("missing_datasets", [] if profile == "smoke" else missing)

    t0 = time.perf_counter()
    outer = current_scope()  # another artifact's when this one is made inside its compute (a compute ladder's rung)
    tally = RunTally(parent=outer.tally)  # a ladder's rungs count into the ladder's
    # a dry run trains one run per configuration, in its own results cache (fedpaper.outputs.dryrun)
    dry = DryRunExecutor() if p.dry_run else None
    # the store's index: an exploration's runs are nobody's, except inside another artifact (a compute
    # ladder's rungs), whose runs they are, so that a stop (--max-hours) counts them and export finds them
    scope = dataclasses.replace(outer, artifact=artifact_id, tally=tally,
                                owner=outer.owner if p.exploration else (artifact_id, profile),
                                executor=outer.executor if dry is None else dry)
    with warnings_once(artifact_id):  # each distinct warning once, counted, after the bars
        if job.declares_runs:  # the scope handed down to its sweeps
            result = compute(params, scope)
        else:  # a paper's compute calls run_specs without a scope: its sweeps read this one
            with in_scope(scope):
                result = compute(params)
    wall = time.perf_counter() - t0
    try:
        table, info = result
    except (TypeError, ValueError):
        raise BadParameterError("compute(params) must return (table: DataFrame, info: dict)") from None
    if not isinstance(table, pd.DataFrame):
        raise BadParameterError(f"compute(params) returned a {type(table).__name__} as table; "
                                "return a pandas DataFrame")
    info = dict(info or {})
    ds_records = _dataset_records(needed, root, info.get("datasets"))
    synthetic = profile == "smoke" or any(d.get("synthetic") for d in ds_records)
    notes = list(info.get("notes") or [])
    if isinstance(info.get("notes"), str):
        notes = [info["notes"]]
    if n_seeds:
        notes = _follow_seeds(notes, n_seeds)
    if explore_note and explore_note not in notes:
        notes = [explore_note] + notes
    notes += _column_notes(artifact_id, table)

    if p.dry_run:
        status = f"dry run of the {profile} profile (cut: {p.describe()}; not a result)"
    elif profile == "smoke":
        status = "regenerated at smoke profile (synthetic/tiny stand-in; not a result)"
    elif synthetic:
        status = "regenerated on SYNTHETIC stand-in data (not a result)"
    elif profile != "smoke" and missing:
        status = f"regenerated without {', '.join(missing)} (missing)"
    else:
        status = "regenerated"
    lossy = [d["name"] for d in ds_records if d.get("lossy")]

    fig = draw(table, params)
    exploration = ({"changes": p.changes(), "out_dir": str(out),
                    "note": "exploration: parameters differ from the profile's; never scored in the report"}
                   if p.exploration else None)
    dry_run = ({"profile": profile, "cut": p.changes(),
                "note": f"dry run (fedpaper reproduce --profile {profile} --dry-run): the {profile} profile's settings "
                        "and code paths, cut only in the settings named in `cut`; not a result",
                "runs": dry.record()}
               if p.dry_run else None)
    try:
        if synthetic:
            stamp_figure(fig)
        else:
            notes += [CLAIM_NOTE_PREFIX + t for t in caption_failed_claims(fig, artifact_id, table, profile)]
        if exploration:
            stamp_exploration(fig, p.describe(), above_banner=synthetic, dry_run=p.dry_run)
        record = prov.collect(
            artifact_id=artifact_id, profile=profile, params=params, datasets=ds_records,
            seeds=info.get("seeds", resolved_seeds), device=info.get("device"), wall_time_s=wall,
            notes=notes,
            extra={"paper": art.paper, "title": art.title, "status": status, "synthetic": synthetic,
                   "stamped": synthetic, "lossy_datasets": lossy, "methods": prov.table_methods(table),
                   "missing_datasets": missing if profile != "smoke" else [],
                   # wall_time_s is this invocation's: runs read from the results cache (made earlier, or
                   # imported from an archive) took none of it
                   "runs": tally.record(),
                   "info": {k: v for k, v in info.items() if k not in ("datasets", "notes", "seeds", "device")},
                   **({"exploration": exploration} if exploration else {}),
                   **({"dry_run": dry_run} if dry_run else {})},
        )
        write_outputs(paths, fig=fig, table=table, record=record)
    finally:
        close_figure(fig)
    report_status(artifact_id, "regenerated", status, paths)
    return ArtifactResult(artifact_id, table, fig, record, paths, status)


