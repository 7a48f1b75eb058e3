"""An override and explicit seeds reach every run of every artifact, at the quick and paper profiles.

Every artifact of the catalog is called as its notebook calls it (`notebook.artifact_function_of`)
with an override `rounds: ROUNDS` and explicit seeds `SEEDS` (both different from every profile's),
under `pipeline.COMPUTE_HOOK`, so nothing is trained, drawn or written. Its runs are collected as
`fedpaper plan` collects them: an artifact that declares its runs is read with `plan.declared_runs`
(its specs are keyed, never built); the compute of any other runs under `plan`'s executor seam
(`executors.using_executor`) with an executor that records each run's store key and hands back a
flat result for it (so a compute goes on to its later rows: Table 1's PACS row comes after the
image rows' results), its optional data sets taken as present (specs need no images); a run built
outside `run_specs` (a model trained directly) is recorded where its spec is built and stops that
compute, before any image is decoded.

Then every run must carry the explicit seeds only (its partition seed is one of SEEDS) and the
overridden rounds. A run whose rounds are not ROUNDS passes only with a reason computed from its
spec, checked by two more collections:
- derived from the override: its rounds change when the override does (ROUNDS -> ROUNDS2), e.g.
  Fig 8b's rounds x local epochs;
- another setting: its rounds equal a setting of the artifact other than `rounds` (FedMT's Single
  trains `single_rounds` epochs), and an override of that setting reaches the run; allowed beside
  runs the override reaches, never for all of an artifact's runs (an override that the artifact
  accepts and records must change some run).
Any other run ignores the override: the test fails, naming it. An artifact whose settings have no
`rounds` (a compute ladder: its rungs set them; Fig 1) is checked for the seeds alone, the refusal
named; one that trains nothing at a profile (its compute finishes without a run) is skipped,
saying so; one whose specs need data that are absent here is skipped with the missing data's line.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Optional

import pandas as pd
import pytest

from fedpaper import notebook, plan
from fedpaper.ground.errors import BadParameterError, DataMissingError
from fedpaper.outputs import pipeline
from fedpaper.outputs.artifacts import ArtifactResult
from fedpaper.outputs.registry import artifact
from fedpaper.claims.catalog import artifact_ids
from fedpaper.runs.executors import using_executor
from fedpaper.runs.experiment import RunSpec

PROFILES = ("quick", "paper")
#: rounds no profile of any paper uses, large enough that rounds / local epochs (Fig 8b, E up to 40) still
#: differ between the two, and seeds no profile draws
ROUNDS, ROUNDS2, OTHER = 60, 120, 37
SEEDS = [101, 103]


# ----------------------------------------------------------------------------- collecting the runs
class _BuiltOutsideRunSpecs(BaseException):
    """A run built directly by a compute (not through run_specs): recorded, the compute stopped."""


def _flat_result(key: dict) -> dict:
    """A stand-in result of the shape run_specs returns, every metric 0.5, one history row per round."""
    run = key["run"]
    rounds = int(run["training"].get("rounds", 1))
    row = {"train_loss": 0.5, "test_acc": 0.5, "val_acc": 0.5, "test_f1": 0.5, "val_f1": 0.5}
    return {"history": [dict(row, seed=run["partition"].get("seed"), round=t) for t in range(1, rounds + 1)],
            "log": {}, "diverged_at": None, "best": {"round": 1, "test_acc": 0.5, "test_f1": 0.5},
            "final": dict(row)}


class _RecordingExecutor:
    """An executor (fedpaper.runs.executors) that trains nothing: it records each run's store key
    and returns a flat result for it."""

    name = "record"
    is_local = False

    def __init__(self, runs: list):
        self.runs = runs

    def run_specs(self, keys, build, **_):
        self.runs += [k["run"] for k in keys]
        return [_flat_result(k) for k in keys]


@dataclass
class Found:
    """The runs (spec dicts) collected for one artifact, and how its collection ended."""

    runs: list = field(default_factory=list)
    stopped: Optional[str] = None  # why its compute ended before its end (None: it finished)
    missing: Optional[str] = None  # DataMissingError: data it reads are absent here


@dataclass
class Collection:
    found: dict  # artifact id -> Found
    refused: Optional[str] = None  # the artifact function's one-line refusal (BadParameterError)
    missing: Optional[str] = None  # DataMissingError before any job: data its settings need are absent


def _collect_compute(compute, params: dict, found: Found) -> None:
    real_build = RunSpec.build

    def build(spec, *a, **k):
        found.runs.append(json.loads(spec.to_json()))
        raise _BuiltOutsideRunSpecs

    RunSpec.build = build
    try:
        with using_executor(_RecordingExecutor(found.runs)):
            compute(dict(params, missing_datasets=[]))  # every row declared: its specs need no images
    except _BuiltOutsideRunSpecs:
        found.stopped = "a run built outside run_specs (recorded; the compute stopped there)"
    except DataMissingError as e:
        found.missing = found.stopped = str(e)
    except Exception as e:  # noqa: BLE001 - the flat results may not satisfy a summary: its runs are in
        found.stopped = f"{type(e).__name__}: {e}"[:200]
    finally:
        RunSpec.build = real_build


#: {spec JSON: (store key, its JSON)} of every declared run met (plan.declared_runs' memo): the
#: artifacts of one data set's grid declare the same runs (privlabels' Figs 1b-10)
_KEYS: dict = {}


@functools.lru_cache(maxsize=None)
def _collect(target: str, profile: str, seeds: Optional[tuple], overrides: Optional[str]) -> Collection:
    """The runs of artifact `target`, its notebook's function called with these parameters
    (overrides: their JSON). Only the target's job is collected: the function's other jobs are handed
    back untouched, so that the target's compute sees no state a sibling job left in the function's
    closures (FedPALS's PACS jobs share their runs through one). An artifact computed inside the
    target's compute (a compute ladder's rungs) adds its runs to the target's, as `fedpaper plan`
    counts them."""
    found: dict = {}
    outer: list = []

    def hook(aid, compute, params, missing):
        if outer or aid == target:
            owner = outer[-1] if outer else aid
            f = found.setdefault(owner, Found())
            outer.append(owner)
            try:
                job = getattr(compute, "job", None)
                if job is not None and job.declares_runs:
                    # every row declared, as for a compute (Table 1's PACS row declares its runs where PACS is present)
                    declared = plan.declared_runs(job, dict(params, missing_datasets=[]), compute.data_root, _KEYS)
                    f.runs += [k["run"] for k, _, _ in declared]
                else:
                    _collect_compute(compute, params, f)
            finally:
                outer.pop()
        return ArtifactResult(aid, pd.DataFrame(), None, {}, {}, "collected")

    token = pipeline.COMPUTE_HOOK.set(hook)
    try:
        notebook.artifact_function_of(artifact(target).notebook)(
            profile=profile, seeds=None if seeds is None else list(seeds),
            overrides=None if overrides is None else json.loads(overrides))
    except BadParameterError as e:
        return Collection(found, refused=str(e))
    except DataMissingError as e:
        return Collection(found, missing=str(e))
    finally:
        pipeline.COMPUTE_HOOK.reset(token)
    return Collection(found)


def collect(aid: str, profile: str, seeds=None, **overrides) -> Collection:
    return _collect(aid, profile, None if seeds is None else tuple(seeds),
                    json.dumps(overrides, sort_keys=True) if overrides else None)


def _rounds(run: dict) -> int:
    return int(run["training"]["rounds"])


def _seed(run: dict) -> int:
    return int(run["partition"]["seed"])


def _name(run: dict) -> str:
    """A run in one line: its method's name or display tag, data, partition and training settings."""
    tags = run.get("tags") or {}
    part = {k: v for k, v in run["partition"].items() if k != "seed"}
    return (f"{tags.get('display') or run['method'].get('name', '?')} on {run['data'].get('name')} "
            f"{json.dumps(part, sort_keys=True)[:120]} local_epochs={run['training'].get('local_epochs')}")


def _setting_keys(params: dict, value: int) -> list[str]:
    """The settings (dotted) of an artifact's params, other than `rounds`, whose value is `value`."""
    return pipeline.settings_equal_to(params, {value})


@functools.lru_cache(maxsize=None)
def _params_of(aid: str, profile: str) -> dict:
    """The artifact's settings at the profile (with the explicit seeds), as the pipeline hands them."""
    got = {}

    def hook(a, compute, params, missing):
        got.setdefault(a, params)
        return ArtifactResult(a, pd.DataFrame(), None, {}, {}, "collected")

    token = pipeline.COMPUTE_HOOK.set(hook)
    try:
        notebook.artifact_function_of(artifact(aid).notebook)(profile=profile, seeds=SEEDS)
    finally:
        pipeline.COMPUTE_HOOK.reset(token)
    return got[aid]


def rounds_reason(aid: str, profile: str, i: int, run: dict) -> Optional[str]:
    """Why run `i` of the artifact (collected with rounds=ROUNDS) has other rounds, computed from the
    runs collected at other overrides (the same runs in the same order: run `i` of each); None when
    nothing explains it (it ignores the override)."""
    n = len(collect(aid, profile, SEEDS, rounds=ROUNDS).found[aid].runs)
    at2 = collect(aid, profile, SEEDS, rounds=ROUNDS2).found[aid].runs
    if len(at2) == n and _rounds(at2[i]) != _rounds(run):
        return (f"rounds derived from the override: {_rounds(run)} at rounds={ROUNDS}, {_rounds(at2[i])} at "
                f"rounds={ROUNDS2} (local_epochs={run['training'].get('local_epochs')})")
    for key in _setting_keys(_params_of(aid, profile), _rounds(run)):
        other = collect(aid, profile, SEEDS, rounds=ROUNDS, **{key: OTHER}).found[aid].runs
        if len(other) == n and _rounds(other[i]) == OTHER:
            return f"its rounds are the setting `{key}` ({_rounds(run)}), which an override of `{key}` reaches"
    return None


# ----------------------------------------------------------------------------- the test
def _cases():
    for aid in artifact_ids():
        if artifact(aid).notebook is None:
            continue
        for profile in PROFILES:
            yield pytest.param(aid, profile, id=f"{aid}@{profile}")


def _with_overrides(aid: str, profile: str) -> tuple[Collection, Optional[str]]:
    """(the collection with rounds=ROUNDS and SEEDS, or with SEEDS alone where the artifact refuses a
    `rounds` override: its one-line refusal, else None)."""
    main = collect(aid, profile, SEEDS, rounds=ROUNDS)
    if main.refused is None:
        return main, None
    return collect(aid, profile, SEEDS), main.refused


def _trains_nothing(c: Collection, aid: str) -> bool:
    f = c.found.get(aid)
    return c.refused is None and not c.missing and f is not None and not f.runs and f.stopped is None


@pytest.mark.parametrize("aid, profile", list(_cases()))
def test_the_override_and_the_explicit_seeds_reach_every_run(aid, profile):
    if profile != PROFILES[0] and _trains_nothing(_with_overrides(aid, PROFILES[0])[0], aid):
        pytest.skip(f"{aid}@{profile}: trains nothing at the {PROFILES[0]} profile; its compute (partitions or "
                    f"label counts at full size, no run) is not repeated at {profile} to keep this test fast")
    main, rounds_refused = _with_overrides(aid, profile)
    if main.missing:
        pytest.skip(f"{aid}@{profile}: its runs need data absent here: {main.missing}")
    if main.refused is not None:
        pytest.skip(f"{aid}@{profile}: no runs at this profile: {main.refused}")
    assert aid in main.found, f"{aid}: its notebook's function made no job for it"
    found = main.found[aid]
    if not found.runs and found.missing:
        pytest.skip(f"{aid}@{profile}: its compute reads data absent here, before any run: {found.missing}")
    if not found.runs:
        assert found.stopped is None, f"{aid}@{profile}: its compute stopped before any run: {found.stopped}"
        pytest.skip(f"{aid}@{profile}: trains nothing (its compute finished without a run)")
    base = collect(aid, profile).found.get(aid, Found())
    # the check can fail: the profile's own runs have other seeds and (where it has them) other rounds
    assert base.runs and not {_seed(r) for r in base.runs} & set(SEEDS), f"{aid}@{profile}: the profile's runs"

    wrong_seeds = [f"{_name(r)}: seed {_seed(r)}" for r in found.runs if _seed(r) not in SEEDS]
    assert not wrong_seeds, f"{aid}@{profile}: runs without the explicit seeds {SEEDS}: " + "; ".join(wrong_seeds[:5])
    if rounds_refused is not None:
        assert "rounds" in rounds_refused, rounds_refused
        print(f"{aid}@{profile}: the seeds alone; rounds refused: {rounds_refused}")
        return
    assert ROUNDS not in {_rounds(r) for r in base.runs}, f"{aid}@{profile}: the profile's runs have rounds={ROUNDS}"
    ignored, explained = [], {}
    for i, r in enumerate(found.runs):
        if _rounds(r) != ROUNDS:
            why = rounds_reason(aid, profile, i, r)
            if why is None:
                ignored.append(f"{_name(r)}: rounds {_rounds(r)}")
            else:
                explained.setdefault(why.split(":")[0], []).append(_name(r))
    assert not ignored, (f"{aid}@{profile}: {len(ignored)} of {len(found.runs)} runs ignore the override "
                         f"rounds={ROUNDS}: " + "; ".join(ignored[:5]))
    # a run may take its rounds from another setting beside runs the override reaches (FedMT's Single),
    # but an override the artifact accepts and records must change some run
    other = sum(len(runs) for why, runs in explained.items() if why.startswith("its rounds are the setting"))
    assert other < len(found.runs), (f"{aid}@{profile}: the override rounds={ROUNDS} reaches none of its "
                                     f"{len(found.runs)} runs: " + "; ".join(explained))
    for why, runs in explained.items():  # named in the test's output (pytest -rP)
        print(f"{aid}@{profile}: {len(runs)} of {len(found.runs)} runs: {why}; e.g. {runs[0]}")
