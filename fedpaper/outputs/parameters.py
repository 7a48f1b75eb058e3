"""The parameters of an artifact function, checked in one place, and profile overrides.

Every public artifact function of a paper module (`fedpaper.papers.fedpals.table1`, ...) is
wrapped by `fedpaper.outputs.pipeline.artifact_function`, which checks them here (`validate`), so a
notebook cell, papermill (`-p`/`-y`) and the CLI all get the same one-line error for a bad value:

    table1(profile="smoke", seeds=None, data_root=None, out_dir=None, overrides={"rounds": 4})

- profile: one of PROFILES;
- seeds: None (the profile's), an int n >= 1 (seeds 0..n-1) or a non-empty list of distinct ints >= 0;
  they replace every seed setting of an artifact's settings (`resolve_seeds`): artifact functions
  never see them;
- data_root: None (the default search: fedpaper.ground.paths.data_root) or an existing folder, as a
  str or a path: a typo is answered with the one line the CLI gives for its --data-root
  (`data_root_problem`), never taken for a machine without data;
- out_dir: None, a str or a path;
- overrides: None or a dict (a YAML/JSON string of a dict is accepted, as papermill's `-p` gives
  one) of profile settings to change. A key is a setting of
  the profile dict (`rounds`, `lr`, `hyper`), a dotted path into a nested one (`hyper.mu`,
  `rounds.cifar10`) or a nested name that is unique (`mu`). A number given for a dict of numbers
  (fedpals' `rounds: {fashion-mnist: 15, cifar10: 15}`) sets every entry. `seeds` may be given
  here too.

An artifact function never sees the overrides nor the seeds: it declares its jobs with the
profile's settings (`ArtifactJob.params`), and the pipeline settles each job's settings once,
with `settle`: the overrides applied (`apply_overrides`), then every seed setting made a list of
seed ids (`resolve_seeds`). The settled dict is what the job's callables receive.

A setting whose value names things (Table 1 rows, methods, data sets) is checked against the
names the paper allows: the job declares `choices={setting: allowed entries}` (`ArtifactJob.choices`,
handed to `settle`) (the engine's own names are added for `optimizer`, `lr_schedule`, `precision`
and `backend`); a value (a name, or a non-empty list of names) outside them is answered with
one line naming the bad entry and the valid ones, before any run. A setting with choices may be
overridden even where the profile leaves it unset (e.g. fedpals' `table1_rows` outside smoke).

A run with overrides or explicit seeds is an *exploration* (`Parameters.exploration`): its
artifacts go to a scratch folder under the cache unless out_dir is given, its provenance records
what was changed, its figure says so, and the report never scores it.

A *dry run* of the paper profile (`fedpaper reproduce --profile paper --dry-run`) is an
exploration whose overrides hold `dry_run: True` plus the paper's cut (fedpaper.outputs.dryrun.CUTS:
rounds, images per client) and seeds=1: every other setting and code path is the
paper's. `Parameters.dry_run` says so; it is allowed at the paper profile only, its provenance
records `dry_run` and what was cut, and the pipeline trains its runs with the dry run's executor
(one run per configuration, in a results cache of its own: fedpaper.outputs.dryrun.DryRunExecutor).
"""
from __future__ import annotations

import copy
import math
import numbers
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from fedpaper.ground.errors import BadParameterError, UnknownNameError

# Profile-dict keys that describe the run rather than set it: never overridable.
PROFILES = ("smoke", "quick", "long", "paper")
#: The committed profiles, most faithful to the papers first: the report and re-rendering use the
#: first one whose results are present.
FAITHFUL_ORDER = ("paper", "long", "quick")
NOT_OVERRIDABLE = frozenset({"profile", "notes", "stand_ins", "missing_datasets", "overrides"})
APPLIED_KEY = "overrides"  # the key apply_overrides leaves in the dict it changed
DRY_RUN_KEY = "dry_run"  # overrides[DRY_RUN_KEY] = True: a dry run (Parameters.dry_run)
DRY_RUN_PROFILE = "paper"  # the only profile a dry run checks


@dataclass(frozen=True)
class Parameters:
    """The checked parameters of one artifact-function call."""

    profile: str = "smoke"
    seeds: Any = None  # None, int >= 1 or a list of ints
    data_root: Optional[str] = None
    out_dir: Optional[str] = None
    overrides: dict = field(default_factory=dict)
    dry_run: bool = False  # overrides held dry_run: True (a dry run of the paper profile; see the module docstring)

    @property
    def exploration(self) -> bool:
        """True when anything differs from the profile's settings (overrides or explicit seeds)."""
        return bool(self.overrides) or self.seeds is not None or self.dry_run

    def changes(self) -> dict:
        """What this run changed relative to the profile (seeds included)."""
        out = dict(self.overrides)
        if self.seeds is not None:
            out["seeds"] = self.seeds
        return out

    def describe(self) -> str:
        """`rounds=4, hyper.mu=0.1, seeds=3`: the changes in one line."""
        return ", ".join(f"{k}={_short(v)}" for k, v in self.changes().items())

    def to_apply(self) -> "Overrides":
        """The overrides as `apply_overrides` takes them (a dry run's cut marked as such)."""
        return Overrides(copy.deepcopy(self.overrides), dry_run=self.dry_run)


class Overrides(dict):
    """The overrides `settle` applies: a dict of settings to change, and
    `dry_run`: they are a dry run's cut (fedpaper.outputs.dryrun), which names the paper profile's
    settings, so a key that a settings dict does not have is left out of it instead of refused."""

    def __init__(self, values=(), *, dry_run: bool = False):
        super().__init__(values)
        self.dry_run = bool(dry_run)


def _short(v) -> str:
    s = repr(v) if isinstance(v, str) else str(v)
    return s if len(s) <= 40 else s[:37] + "..."


# ------------------------------------------------------------------------------------ checks
def check_profile(profile) -> str:
    if not isinstance(profile, str):
        raise BadParameterError(f"profile={profile!r} is not a profile name; choose one of {', '.join(PROFILES)}")
    if profile not in PROFILES:
        raise UnknownNameError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    return profile


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def check_seeds(seeds, name: str = "seeds"):
    """None, an int >= 1, or a non-empty list of distinct ints >= 0 (returned as a list)."""
    if seeds is None:
        return None
    fix = f"give a number of seeds >= 1 (e.g. {name}=3) or a list of seed ids (e.g. {name}=[0, 1, 2])"
    if _is_int(seeds):
        if seeds < 1:
            raise BadParameterError(f"{name}={seeds!r} is out of range; {fix}")
        return int(seeds)
    if isinstance(seeds, (list, tuple)):
        if not seeds or not all(_is_int(s) and s >= 0 for s in seeds) or len(set(seeds)) != len(seeds):
            raise BadParameterError(f"{name}={list(seeds)!r} is not a list of distinct seed ids >= 0; {fix}")
        return [int(s) for s in seeds]
    kind = "a string" if isinstance(seeds, str) else f"a {type(seeds).__name__}"
    raise BadParameterError(f"{name}={seeds!r} is {kind}; {fix}")


def is_seed_setting(key) -> bool:
    """A setting that names seeds: `seeds` at any depth of a settings dict (a nested one: privlabels'
    `epochs.seeds`, fedpals Table 1's `pacs.seeds`) or `<what>_seeds` (fedpals' `marginal_seeds`)."""
    return isinstance(key, str) and (key == "seeds" or key.endswith("_seeds"))


def resolve_seeds(params: dict, seeds=None) -> dict:
    """A copy of the settings dict `params` in which every seed setting (`is_seed_setting`, at any
    depth) is a list of seed ids: the explicit `seeds` (checked with check_seeds: n -> seeds
    0..n-1, or a list) replace every one of them, so that explicit seeds reach every row of an
    artifact; without them each setting's own value is used (a count n -> 0..n-1, a list as is).
    Explicit seeds also set the top-level `seeds` of settings that have none. The one place where
    seeds become a list (through `settle`, once per artifact job): the papers read lists."""
    explicit = check_seeds(seeds)
    explicit = list(range(explicit)) if _is_int(explicit) else explicit

    def walk(node: dict, top: bool = False) -> dict:
        out = {}
        for k, v in node.items():
            if top and k in NOT_OVERRIDABLE:  # notes, stand-ins, the overrides as given: not settings
                out[k] = v
            elif isinstance(v, dict):
                out[k] = walk(v)
            elif is_seed_setting(k) and (explicit is not None or _is_int(v) or isinstance(v, (list, tuple))):
                out[k] = list(explicit) if explicit is not None else \
                    list(range(v)) if _is_int(v) else [int(s) for s in v]
            else:
                out[k] = v
        return out

    out = walk(params, top=True)
    if explicit is not None:
        out["seeds"] = list(explicit)
    return out


def check_path(value, name: str) -> Optional[str]:
    """None, or a str/path (returned as str)."""
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)) and str(value).strip():
        return os.fspath(value)
    raise BadParameterError(f"{name}={value!r} is not a folder path; give a path as a string "
                            f"(e.g. {name}='/data/fedpaper') or None for the default")


def data_root_problem(root) -> Optional[str]:
    """The one line for a data root that is not an existing folder (None when it is one): the same
    words for a notebook's `data_root`, papermill's `-p data_root` and the CLI's --data-root."""
    root = Path(root).expanduser().resolve()
    if root.is_dir():
        return None
    what = "is not a folder" if root.exists() else "does not exist"
    return (f"data root {root} {what}; pass an existing folder (--data-root on the command line, data_root in a "
            "notebook, e.g. ../shared/data) or leave it out for the default")


def check_data_root(value) -> Optional[str]:
    """None, or a path (returned as str) of an existing folder (data_root_problem)."""
    value = check_path(value, "data_root")
    problem = None if value is None else data_root_problem(value)
    if problem:
        raise BadParameterError(problem)
    return value


def check_overrides(overrides) -> dict:
    """None -> {}; a dict with str keys; a YAML/JSON string of such a dict (papermill -p)."""
    if overrides is None:
        return {}
    if isinstance(overrides, str):
        import yaml

        try:
            parsed = yaml.safe_load(overrides) if overrides.strip() else {}
        except yaml.YAMLError:
            parsed = None
        if parsed is None:
            parsed = {}
        if not isinstance(parsed, dict):
            raise BadParameterError(f"overrides={overrides!r} is not a dict; give settings to change as a "
                                    "dict, e.g. overrides={'rounds': 4} (papermill: -y 'overrides: {rounds: 4}')")
        overrides = parsed
    if not isinstance(overrides, dict):
        raise BadParameterError(f"overrides={overrides!r} is a {type(overrides).__name__}; give a dict of settings "
                                "to change, e.g. overrides={'rounds': 4}, or None")
    bad = [k for k in overrides if not isinstance(k, str) or not k]
    if bad:
        raise BadParameterError(f"override key {bad[0]!r} is not a setting name; keys are names such as "
                                "'rounds' or 'hyper.mu'")
    return copy.deepcopy(overrides)


def validate(*, profile="smoke", seeds=None, data_root=None, out_dir=None, overrides=None) -> Parameters:
    """All parameters of an artifact function, checked; one-line BadParameterError/UnknownNameError."""
    profile = check_profile(profile)
    seeds = check_seeds(seeds)
    data_root = check_data_root(data_root)
    out_dir = check_path(out_dir, "out_dir")
    overrides = check_overrides(overrides)
    if "seeds" in overrides:
        if seeds is not None:
            raise BadParameterError("seeds is given twice (as seeds= and in overrides); give it once")
        seeds = check_seeds(overrides.pop("seeds"), "overrides['seeds']")
    dry_run = overrides.pop(DRY_RUN_KEY, False)
    if not isinstance(dry_run, bool):
        raise BadParameterError(f"overrides['{DRY_RUN_KEY}']={dry_run!r} is not allowed; give true or false")
    if dry_run and profile != DRY_RUN_PROFILE:
        raise BadParameterError(f"a dry run checks the {DRY_RUN_PROFILE} profile's settings and code paths, not "
                                f"{profile}'s; use profile {DRY_RUN_PROFILE!r} (--profile {DRY_RUN_PROFILE} "
                                "--dry-run), or drop the dry run")
    return Parameters(profile, seeds, data_root, out_dir, overrides, dry_run)


# ------------------------------------------------------------------------------- overrides
def overridable_keys(params: dict, choices: Optional[dict] = None) -> list[str]:
    """The settings of a profile dict an override may name (top level, then dotted nested ones,
    then settings with declared choices the profile leaves unset)."""
    top = [k for k in params if k not in NOT_OVERRIDABLE]
    nested = [f"{k}.{sub}" for k in top if isinstance(params[k], dict) for sub in params[k]]
    return top + nested + [k for k in (choices or {}) if k not in top and k not in nested]


def _allowed_line(params: dict, where: str, choices: Optional[dict] = None) -> str:
    keys = overridable_keys(params, choices)
    shown = ", ".join(keys) if keys else "none (this artifact has no settings to change)"
    return f"settings of {where or 'this artifact'}: {shown}"


def _resolve_key(params: dict, key: str, where: str, choices: Optional[dict] = None) -> list[str]:
    """The path (list of keys) an override key names in `params`."""
    if (key in params or key in (choices or {})) and key not in NOT_OVERRIDABLE:
        return [key]
    parts = key.split(".")
    if len(parts) > 1 and parts[0] in params and parts[0] not in NOT_OVERRIDABLE:
        node = params
        for part in parts:
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            return parts
    hits = [[k, key] for k, v in params.items()
            if k not in NOT_OVERRIDABLE and isinstance(v, dict) and key in v]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise BadParameterError(f"override {key!r} is ambiguous; name one of "
                                f"{', '.join('.'.join(h) for h in hits)}")
    raise BadParameterError(f"unknown override {key!r}; {_allowed_line(params, where, choices)}")


def _kind(v) -> str:
    if isinstance(v, bool):
        return "true/false"
    if _is_int(v):
        return "an integer >= 1" if v >= 1 else "an integer"
    if isinstance(v, numbers.Real):
        return "a number >= 0"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, (list, tuple)):
        return "a list" + (f" of {_kind(v[0]).removeprefix('an ').removeprefix('a ')}s" if v else "")
    if isinstance(v, dict):
        return f"a dict with keys {', '.join(map(str, v))} (or one value for all of them)"
    return type(v).__name__


def _checked(name: str, default, value):
    """`value` if it has the type (and sign) of `default`, else BadParameterError naming both."""
    def bad():
        return BadParameterError(f"override {name}={value!r} is not allowed; give {_kind(default)} "
                                 f"(profile value: {_short(default)})")

    if default is None:
        return value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise bad()
        return value
    if _is_int(default):
        if not _is_int(value) or (default >= 1 and value < 1):
            raise bad()
        return int(value)
    if isinstance(default, numbers.Real):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
                or (default >= 0 and value < 0):
            raise bad()
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise bad()
        return value
    if isinstance(default, (list, tuple)):
        if not isinstance(value, (list, tuple)):
            raise bad()
        if default:
            proto = default[0]
            return [_checked(f"{name}[{i}]", proto, v) if not isinstance(proto, (list, dict)) else v
                    for i, v in enumerate(value)]
        return list(value)
    if isinstance(default, dict):
        if isinstance(value, dict) and not default:  # an empty setting ({}: "none cut", "all"): nothing to check keys against
            if not all(isinstance(k, str) for k in value):
                raise bad()
            return copy.deepcopy(value)
        if isinstance(value, dict):
            out = copy.deepcopy(default)
            for k, v in value.items():
                if k not in default:
                    raise BadParameterError(f"unknown override {name}.{k}; {name} has keys "
                                            f"{', '.join(map(str, default))}")
                out[k] = _checked(f"{name}.{k}", default[k], v)
            return out
        scalars = [v for v in default.values() if not isinstance(v, (dict, list, tuple))]
        if default and len(scalars) == len(default):  # one value for every entry
            return {k: _checked(f"{name}.{k}", v, value) for k, v in default.items()}
        raise bad()
    return value


def _name(entry) -> str:
    return "[" + ", ".join(map(str, entry)) + "]" if isinstance(entry, (list, tuple)) else str(entry)


def _chosen(name: str, default, value, allowed) -> Any:
    """`value` if it names only entries of `allowed`: a non-empty list of distinct entries where the
    profile's value is a list (or unset), else one entry. Otherwise a one-line BadParameterError
    naming the bad entry and the valid ones."""
    def norm(e):
        return list(e) if isinstance(e, (list, tuple)) else e

    allowed = [norm(a) for a in allowed]
    valid = ", ".join(_name(a) for a in allowed)
    if default is not None and not isinstance(default, (list, tuple)):  # one name
        if norm(value) not in allowed:
            raise BadParameterError(f"override {name}={value!r} is not allowed; valid values: {valid}")
        return norm(value)
    rows = bool(allowed) and isinstance(allowed[0], list)
    if not isinstance(value, (list, tuple)) or (rows and value and not isinstance(value[0], (list, tuple))):
        raise BadParameterError(f"override {name}={value!r} is not a list of entries; give a non-empty list "
                                f"of: {valid}")
    if not value:
        raise BadParameterError(f"override {name}=[] names nothing; give a non-empty list of: {valid}")
    seen = []
    for e in map(norm, value):
        if e not in allowed:
            raise BadParameterError(f"override {name}: {_name(e)} is not a valid entry; valid entries: {valid}")
        if e in seen:
            raise BadParameterError(f"override {name}: {_name(e)} is given twice; name each entry once")
        seen.append(e)
    return seen


def _engine_choices(params: dict) -> dict:
    """{dotted setting: the engine's names} for the engine settings a profile dict holds as a
    string (`optimizer`, `lr_schedule`, `precision`, `backend`, at any depth), so that a bad name
    is answered before any run rather than where the engine is built."""
    from fedpaper.engine.backends import BACKENDS  # start-up time: torch (the CLI imports this module)
    from fedpaper.engine.optim import OPTIMIZERS, SCHEDULES  # start-up time: torch (the CLI imports this module)
    from fedpaper.engine.types import PRECISIONS  # start-up time: torch (the CLI imports this module)

    names = {"optimizer": OPTIMIZERS, "tuning_optimizer": OPTIMIZERS, "lr_schedule": SCHEDULES,
             "precision": PRECISIONS, "backend": BACKENDS}
    out = {}

    def walk(node, path):
        for k, v in node.items():
            if path == () and k in NOT_OVERRIDABLE:
                continue
            if isinstance(v, dict):
                walk(v, path + (k,))
            elif isinstance(v, str) and k in names:
                out[".".join(path + (k,))] = list(names[k])
    walk(params, ())
    return out


def apply_overrides(params: dict, overrides: Optional[dict], *, where: str = "",
                    choices: Optional[dict] = None) -> dict:
    """`params` (a profile dict, changed in place and returned) with `overrides` applied (None or
    {}: none; an `Overrides`, as checked by `validate`, or any dict, checked here).

    Unknown keys and values of the wrong type raise BadParameterError naming the key and what is
    allowed; a setting in `choices` ({dotted setting: allowed entries}) takes only those entries.
    The applied overrides are recorded under params["overrides"] (so they reach provenance, and a
    second call is a no-op). For a dry run's cut (`Overrides.dry_run`), a key that this dict does
    not have is left out instead (an artifact with settings of its own)."""
    if not isinstance(overrides, Overrides):  # an Overrides was checked when the call's parameters were (validate)
        overrides = Overrides(check_overrides(dict(overrides) if overrides is not None else None))
    dry_run = overrides.dry_run
    if not overrides or params.get(APPLIED_KEY) == overrides:
        return params
    choices = {**_engine_choices(params), **(choices or {})}
    for key, value in overrides.items():
        try:
            path = _resolve_key(params, key, where, choices)
        except BadParameterError:
            if dry_run:  # the cut names the paper profile's settings: an artifact without one (fedpals fig1) keeps its own
                continue
            raise
        node = params
        for part in path[:-1]:
            node = node[part]
        name = ".".join(path)
        default = node.get(path[-1])
        if name in choices:
            node[path[-1]] = _chosen(name, default, value, choices[name])
        else:
            node[path[-1]] = _checked(name, default, value)
    params[APPLIED_KEY] = copy.deepcopy(dict(overrides))
    return params


# ------------------------------------------------------------------------------- settling
def settle(settings: dict, parameters: Parameters, *, where: str = "", choices: Optional[dict] = None) -> dict:
    """A job's settings as its callables receive them: a copy of the profile's `settings` with the
    overrides of the checked `parameters` applied (`apply_overrides`: `where` names the settings in
    an error line, `choices` the names a setting may take) and every seed setting made a list, the
    explicit seeds replacing each (`resolve_seeds`). The pipeline calls it once per job."""
    params = apply_overrides(copy.deepcopy(settings), parameters.to_apply(), where=where, choices=choices)
    return resolve_seeds(params, parameters.seeds)
