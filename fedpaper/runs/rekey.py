"""Keep finished runs across a code change that does not change results, once that is checked.

    fedpaper cache rekey [--only ID_OR_PAPER ...] [--profile P] [--verify K] [--rtol R] [--atol A]
    fedpaper cache rekey --scheme [--archive ARCHIVE ...]

The results cache keys every run by the code version of fedpaper's core and of its paper
(fedpaper.runs.versions.code_version): any edit to those files (a refactor, a memory or speed fix) gives a
new version, and the runs of the old one are no longer reused. For a long sweep (FedPALS Table 1
at the paper profile: hours of CPU per piece) that is a rebuild nobody should pay when the edit
cannot change a result; pinning the old version (FEDPAPER_CODE_VERSION) would assert that without
checking it. `rekey` checks it: for each paper and old code version among the selected runs, it
retrains the K cheapest of them (by training samples, runs that diverged last) with the current
code, in a scratch store, and compares what they computed with what is stored: every round's history, the best
and final metrics and where a run diverged. Floats and float arrays agree within a tolerance,
|retrained - stored| <= ATOL + RTOL * |stored| (RTOL, ATOL below; NaN equals NaN), so that a run
made on another CPU vendor, whose float sums round differently, can be checked; `--rtol 0 --atol 0`
asks for bit-exact equality. Everything else (integers, where a run diverged, names, shapes, dtypes)
must be equal. Only how a run
executed (its "log": seconds, backend, layout) is not compared; the run is retrained with the
backend and device its log names. A run stored under several older versions (each earlier rekey
leaves the entries it read) is checked and stored from its newest entry only. Only when all K
agree does it store every selected run of that version again under the current code version (the
old entries stay), its entry saying so:

    "rekeyed": {"from": OLD_CODE, "to": NEW_CODE, "verified": [{"key", "samples", "seconds", "max_rel"}],
                "rtol", "atol", "at", "git"}

and records the check in the store (rekeys/*.json). A difference: one line naming the run and the
first value that differs, nothing written: the change affects results, and its runs must be
recomputed. A run whose method is written in an old form (before a method had one form:
algorithms.legacy) is stored again with its method as parts, the same check applying. Runs that
are not fedpaper.runs.experiment.RunSpec runs, or whose data copy differs from
the one found now, cannot be retrained here and are refused the same way.

Before any check, runs keyed by the text-hash code versions of the scheme before syntax trees are
moved to the syntax-tree version of the same source (`migrate_scheme`, fedpaper.runs.version_map),
without retraining: a run whose source is the same syntax tree as today's is then current and needs
no check. `--scheme` does only that (and, with `--archive`, rewrites archives so).
"""
from __future__ import annotations

import json
import math
import tempfile
import time
from pathlib import Path
from typing import Optional

import numpy as np

from fedpaper.ground.errors import FedpaperError
from fedpaper.ground.console import warn_console
from fedpaper.ground.files import atomic_write_bytes, atomic_write_text
from fedpaper.runs.store import ResultStore, spec_json
from fedpaper.runs.archive import (_current_code, _entry, _paper_of, _selected_indexes, ArchiveError, entry_bytes,
                                   entry_key, scheme_migrated)
from fedpaper.ground.jsonio import now_iso
from fedpaper.runs.provenance import git_info


REKEYS_DIR = "rekeys"  # in the store: one record per rekey (what was checked, what was stored again)
NOT_COMPARED = ("log",)  # how a run executed, not what it computed
# The default tolerance of the check on floats: |retrained - stored| <= ATOL + RTOL * |stored|.
# A one-in-a-thousand relative change passes (the rounding of another CPU's float sums, grown over a
# cheap run's rounds); a code change that changes what is computed moves metrics by far more.
RTOL = 1e-3
ATOL = 1e-6


class RekeyError(FedpaperError):
    """Nothing to rekey, a run that cannot be retrained, or a run the current code does not
    reproduce (one line, exit 2, nothing written)."""

def _newest(entry: dict) -> str:
    """When an entry was written: its rekey's time, else its run's (ISO, comparable as text)."""
    return (entry.get("rekeyed") or {}).get("at") or entry.get("created") or ""


def _stale_entries(store: ResultStore, only, profile, needed=None) -> tuple[dict, list, dict]:
    """{(paper, old code): [(key, entry)]} of the selected finished runs made by another code
    version than the current one (and not stored under it already), the store indexes
    [(artifact, profile, runs)] they were selected through, and {old key: the key of the entry it
    gives way to} for a run stored under several older versions (each earlier rekey left the
    entries it read): only its newest entry (`_newest`) is checked and stored again, so each run is
    in one group, checked once.

    Selected with `only`/`profile`: the runs recorded in the store's indexes for them, the runs of a
    paper named in `only` (recorded or not: an archive made before runs were recorded, or a piece
    trained by an exploration, records none), and the runs whose spec, in its current form, is one
    of `needed` (run keys, the store's spec dicts: what the selected artifacts need at `profile`,
    collected by the caller without training, as `fedpaper plan` does)."""

    from fedpaper.algorithms import legacy  # start-up time: torch (the CLI imports this module)

    indexes = []
    if only or profile is not None:
        indexes = [(a, p, store.recorded(a, p)) for a, p in _selected_indexes(store, only, profile)]
        recorded = {k for _, _, runs in indexes for k in runs}
        papers = {o for o in only or [] if "/" not in o}
        needed = {spec_json(k) for k in needed or ()}
        wanted = sorted(recorded | set(store.keys())) if papers or needed else sorted(recorded)
    else:
        recorded, papers, needed = set(), set(), set()
        wanted = store.keys()
    newest: dict[str, tuple] = {}  # current key -> (key, entry, paper) of the run's newest stale entry
    older: dict[str, list] = {}  # current key -> the keys of its other stale entries
    for key in wanted:
        p = store.entry_path(key)
        if not p.is_file():
            continue
        try:
            entry = _entry(p.read_bytes(), f"cache entry {p}")
        except ArchiveError as e:
            warn_console(f"{e}; left alone")
            continue
        paper = _paper_of(entry)
        if scheme_migrated(entry) is not None:
            continue  # a text-scheme entry: migrate_scheme stored it again under its syntax-tree version
        migrated = spec_json(legacy.run_spec(json.loads(entry["spec"])))  # a method in an old form: its parts
        if (only or profile is not None) and key not in recorded and paper not in papers and migrated not in needed:
            continue
        if entry["code"] == _current_code(paper, store) and migrated == entry["spec"]:
            continue
        entry = {**entry, "spec": migrated}
        current = store.key(json.loads(entry["spec"]))
        if store.entry_path(current).is_file():
            continue  # already stored under the current code
        kept = newest.get(current)
        if kept is not None and _newest(entry) <= _newest(kept[1]):
            older.setdefault(current, []).append(key)
            continue
        if kept is not None:
            older.setdefault(current, []).append(kept[0])
        newest[current] = (key, entry, paper)
    groups: dict[tuple, list] = {}
    for key, entry, paper in newest.values():
        groups.setdefault((paper, entry["code"]), []).append((key, entry))
    gives_way = {k: newest[current][0] for current, keys in older.items() for k in keys}
    if (only or profile is not None) and not groups and not indexes and not papers and not needed:
        what = " ".join(only or []) + (f" (profile {profile})" if profile else "")
        raise RekeyError(f"no runs of {what.strip()} are recorded in the cache {store.root}; import their archive "
                         "(`fedpaper cache import`) or run `fedpaper reproduce` for them first, or name the "
                         "profile (`--profile P`) so that the runs they need are found by what they are")
    return groups, indexes, gives_way


def first_difference(a, b, where: str = "result", rtol: float = 0.0, atol: float = 0.0) -> Optional[str]:
    """Where two stored results differ first ("result.history[3].test_acc: 0.41 != 0.42"), or
    None when they agree: floats and float arrays within |a - b| <= atol + rtol * |b| (bit for bit
    with the default 0, 0), NaN equal to NaN; everything else equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{where}: keys {sorted(map(str, a))} != {sorted(map(str, b))}"
        for k in a:
            d = first_difference(a[k], b[k], f"{where}.{k}" if isinstance(k, str) else f"{where}[{k!r}]", rtol, atol)
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{where}[{i}]", rtol, atol)
            if d:
                return d
        return None
    if hasattr(a, "to_numpy") and hasattr(b, "to_numpy"):  # pandas
        a, b = a.to_numpy(), b.to_numpy()
    if hasattr(a, "detach") and hasattr(b, "detach"):  # torch
        a, b = a.detach().cpu().numpy(), b.detach().cpu().numpy()
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{where}: arrays differ ({a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)})"
        if a.dtype.kind in "fc":
            same = np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True) if (rtol or atol) else \
                np.array_equal(a, b, equal_nan=True)
        else:
            same = np.array_equal(a, b)
        return None if same else f"{where}: arrays differ (largest difference {_largest(a, b)})"
    if isinstance(a, float) and isinstance(b, float):
        if a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= atol + rtol * abs(b):
            return None
        return f"{where}: {a!r} != {b!r}"
    if type(a) is not type(b) and not (isinstance(a, (int, np.integer)) and isinstance(b, (int, np.integer))):
        return f"{where}: {type(a).__name__} {a!r} != {type(b).__name__} {b!r}"
    return None if a == b else f"{where}: {a!r} != {b!r}"


def _largest(a: np.ndarray, b: np.ndarray) -> str:
    if a.dtype.kind not in "fciu" or not a.size:
        return "in values"
    with np.errstate(invalid="ignore"):
        d = np.abs(a.astype(float) - b.astype(float))
    d = d[~np.isnan(d)]
    return f"{d.max():.3g}" if d.size else "in NaNs"


def largest_relative_difference(a, b) -> float:
    """The largest |a - b| / max(|b|, 1e-12) over the floats of two results of the same shape (0 if none)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return max((largest_relative_difference(a[k], b[k]) for k in a if k in b), default=0.0)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return max((largest_relative_difference(x, y) for x, y in zip(a, b)), default=0.0)
    if hasattr(a, "to_numpy") and hasattr(b, "to_numpy"):
        a, b = a.to_numpy(), b.to_numpy()
    if isinstance(a, float) and isinstance(b, float):
        a, b = np.asarray([a]), np.asarray([b])
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape and a.dtype.kind in "fc" \
            and b.dtype.kind in "fc" and a.size:
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.abs(a - b) / np.maximum(np.abs(b), 1e-12)
        r = r[~np.isnan(r)]
        return float(r.max()) if r.size else 0.0
    return 0.0


def _compared(result: dict) -> dict:
    return {k: v for k, v in result.items() if k not in NOT_COMPARED} if isinstance(result, dict) else result


def _samples(entry: dict) -> float:
    log = entry["result"].get("log") if isinstance(entry.get("result"), dict) else None
    return float((log or {}).get("samples") or math.inf)


def _check_order(item) -> tuple:
    """Which runs to retrain first: those that ran every round (a run that diverged early is cheap
    but checks only its first rounds), then the fewest training samples."""
    key, entry = item
    res = entry.get("result") if isinstance(entry.get("result"), dict) else {}
    return (res.get("diverged_at") is not None, _samples(entry), key)


def _describe(key: str, entry: dict) -> str:
    spec = json.loads(entry["spec"])
    run = spec.get("run") or {}
    name = (run.get("tags") or {}).get("method") or (run.get("method") or {}).get("name")
    seed = (run.get("partition") or {}).get("seed")
    return f"run {key[:12]} ({name or '?'}, seed {seed})"


def retrain(key: str, entry: dict, data_root=None) -> dict:
    """The current code's result of a stored run, trained afresh in a scratch store with the
    backend and device its log names."""
    from fedpaper.runs.executors import run_specs  # start-up time: torch (the CLI imports this module)
    from fedpaper.runs.experiment import Execution, RunSpec, default_device, store_key  # start-up time: torch, as above

    spec = json.loads(entry["spec"])
    try:
        run = RunSpec(**spec["run"])
    except (KeyError, TypeError):
        raise RekeyError(f"{_describe(key, entry)} is not a fedpaper RunSpec run: it cannot be retrained to check it; "
                         "recompute it with `fedpaper reproduce`") from None
    if spec_json(store_key(run, data_root)) != entry["spec"]:
        raise RekeyError(f"{_describe(key, entry)} was made from another copy of its data set than the one found now "
                         f"({json.dumps(spec.get('data_copy'))}); point FEDPAPER_DATA at that copy to check it")
    log = entry["result"].get("log") or {}
    device = log.get("device") or default_device()
    if device != default_device() and not (device == "cpu" and default_device() != "cpu"):
        raise RekeyError(f"{_describe(key, entry)} was trained on {device}; this machine trains on {default_device()}, "
                         "whose results are not bit for bit the same: rekey on a machine with that device")
    execution = Execution(backend=log.get("backend") or "auto", device=device)
    with tempfile.TemporaryDirectory(prefix="fedpaper-rekey-") as tmp:
        (res,) = run_specs([run], data_root, execution=execution, store=ResultStore(tmp), progress=False,
                           desc="rekey check")
    return res


def rekey(store: Optional[ResultStore] = None, *, only=None, profile=None, verify: int = 1, data_root=None,
          needed=None, say=print, rtol: float = RTOL, atol: float = ATOL) -> dict:
    """Check and rekey (see the module docstring); returns {(paper, old code): {"runs", "verified",
    "to"}}. RekeyError (nothing written for that version or any after it) on the first failure.
    Floats are compared within rtol, atol (RTOL, ATOL by default; 0, 0: bit for bit).
    `needed`: the run keys (spec dicts) the selected artifacts need at `profile` (the CLI collects
    them, plan.record_runs), which selects their stale runs also where no index records them."""

    if int(verify) < 1:
        raise RekeyError(f"--verify {verify}: at least one run must be retrained to check the current code "
                         "reproduces the stored ones (to assert it unchecked, pin FEDPAPER_CODE_VERSION instead)")
    if rtol < 0 or atol < 0:
        raise RekeyError(f"--rtol {rtol} --atol {atol}: a tolerance cannot be negative (0 0 asks for bit-exact "
                         "equality)")
    store = store if store is not None else ResultStore()
    moved = migrate_scheme(store)
    if moved["moved"]:
        say(f"moved {moved['moved']} runs of the text-hash scheme to the syntax-tree code versions of the same "
            f"source ({moved['current']} of them made by code identical to this one), nothing retrained")
    groups, indexes, gives_way = _stale_entries(store, only, profile, needed)
    if not groups:
        raise RekeyError(f"nothing to rekey in {store.root}: every selected finished run is stored under the "
                         "current code version already")
    if gives_way:
        say(f"{len(gives_way)} older entries of the same runs left as they are: each run is checked and stored "
            "again from its newest entry")
    checked = {}
    for (paper, old), runs in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        new = _current_code(paper, store)
        chosen = sorted(runs, key=_check_order)[:int(verify)]
        say(f"{paper}: checking {len(chosen)} of {len(runs)} runs made by code {old} against this code ({new}): "
            "retraining the cheapest")
        verified = []
        for key, entry in chosen:
            t0 = time.perf_counter()
            res = retrain(key, entry, data_root)
            seconds = time.perf_counter() - t0
            diff = first_difference(_compared(entry["result"]), _compared(res), rtol=rtol, atol=atol)
            if diff:
                raise RekeyError(f"{paper}: {_describe(key, entry)} made by code {old} is not reproduced by this code "
                                 f"({new}) within rtol {rtol:g}, atol {atol:g}: {diff}; nothing rekeyed: this change "
                                 "affects results, so its runs must be recomputed")
            worst = largest_relative_difference(_compared(res), _compared(entry["result"]))
            same = "the same, bit for bit" if not first_difference(_compared(entry["result"]), _compared(res)) else \
                f"the same within rtol {rtol:g}, atol {atol:g} (largest relative difference {worst:.2g})"
            say(f"  {_describe(key, entry)}: {same} ({seconds:.0f} s)")
            verified.append({"key": key, "samples": _samples(entry), "seconds": round(seconds, 1),
                             "max_rel": worst})
        checked[(paper, old)] = {"runs": runs, "verified": verified, "to": new}
    # every check passed: store the runs again under the current code versions
    git, at = git_info(), now_iso()
    moved: dict[str, str] = {}
    for (paper, old), c in checked.items():
        stamp = {"from": old, "to": c["to"], "verified": c["verified"], "rtol": rtol, "atol": atol, "at": at,
                 "git": git}
        for key, entry in c["runs"]:
            spec = json.loads(entry["spec"])
            store._write(store.path(spec), {**entry, "code": store.code_of(spec), "rekeyed": stamp})
            moved[key] = store.key(spec)
    moved.update({k: moved[newer] for k, newer in gives_way.items() if newer in moved})
    to = {paper: c["to"] for (paper, _), c in checked.items()}
    for art, prof, runs in indexes or [(a, p, store.recorded(a, p)) for a, p in store.indexes()]:
        added = {moved[k]: {"paper": v.get("paper"), "code": to[v.get("paper")]}
                 for k, v in runs.items() if k in moved and v.get("paper") in to}
        if added:
            merged = {**store.recorded(art, prof), **added}
            atomic_write_text(store.index_path(art, prof), json.dumps(
                {"artifact": art, "profile": prof, "runs": dict(sorted(merged.items()))}, indent=0, sort_keys=True))
    summary = {f"{paper} {old}": {"to": c["to"], "runs": len(c["runs"]), "verified": c["verified"]}
               for (paper, old), c in checked.items()}
    record = {"at": at, "git": git, "selection": {"only": list(only or []), "profile": profile}, "rekeyed": summary,
              "rtol": rtol, "atol": atol}
    atomic_write_text(Path(store.root) / REKEYS_DIR / f"{at.replace(':', '')}.json", json.dumps(record, indent=1,
                                                                                               sort_keys=True))
    return {k: {"runs": len(c["runs"]), "verified": c["verified"], "to": c["to"]} for k, c in checked.items()}


def migrate_scheme(store: Optional[ResultStore] = None, vmap: Optional[dict] = None) -> dict:
    """Move every run of the store keyed by a text-scheme code version to the syntax-tree version
    of the same source (archive.scheme_migrated, read from the committed version map), without
    retraining; the old entries stay (the code of their commit still reads them), the store's
    indexes learn the new keys. Returns {"moved", "current" (moved runs now of this checkout's
    code), "unmapped" (runs of another code version the map does not know), "versions": {"paper
    old": new}}."""
    store = store if store is not None else ResultStore()
    moved: dict[str, tuple[str, str]] = {}
    versions: dict[str, str] = {}
    current = unmapped = 0
    for key in store.keys():
        p = store.entry_path(key)
        try:
            entry = _entry(p.read_bytes(), f"cache entry {p}")
        except (ArchiveError, OSError) as e:
            warn_console(f"{e}; left alone")
            continue
        new = scheme_migrated(entry, vmap)
        if new is None:
            unmapped += entry["code"] != _current_code(_paper_of(entry), store)
            continue
        new_key = entry_key(new)
        dest = store.entry_path(new_key)
        if dest.is_file():
            continue  # moved before
        atomic_write_bytes(dest, entry_bytes(new))
        moved[key] = (new_key, new["code"])
        versions[f"{_paper_of(entry)} {entry['code']}"] = new["code"]
        current += new["code"] == _current_code(_paper_of(entry), store)
    if moved:
        for art, prof in store.indexes():
            runs = store.recorded(art, prof)
            added = {moved[k][0]: {**v, "code": moved[k][1]} for k, v in runs.items() if k in moved}
            if added:
                atomic_write_text(store.index_path(art, prof), json.dumps(
                    {"artifact": art, "profile": prof, "runs": dict(sorted({**runs, **added}.items()))},
                    indent=0, sort_keys=True))
    return {"moved": len(moved), "current": current, "unmapped": unmapped, "versions": versions}
