"""Atomic files, the on-disk results cache and resumable sweeps.

    store = ResultStore()                       # cache_dir("results") (a dry run: cache_dir("dry-run", "results")), keyed by spec + its paper's code version
    results = run_sweep(specs, run_one, desc="table1")          # one run at a time
    results = run_sweep(specs, run_fn_many=engine_batch, batch_size=8)   # several runs at once

A sweep too long for one sitting runs in pieces: with a deadline (FEDPAPER_DEADLINE, set by
`fedpaper reproduce --max-hours H`) run_sweep starts no run that would end after it and raises
SweepStopped; finished runs are already stored, so the same command later resumes. Each sweep run
inside an artifact records its runs' keys in the store's index (which artifact and profile they
belong to), for `fedpaper cache export --only ...` (fedpaper.archive) and the done/left counts.

Every write goes to a temporary file in the destination folder, is flushed and fsynced, then
renamed over the destination with os.replace, so a reader sees the old file or the new one, never
a half-written one.
"""
from __future__ import annotations

import ast
import contextlib
import contextvars
import hashlib
import json
import os
import pickle
import re
import sys
import tempfile
import time
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Optional

TMP_PREFIX = ".tmp-"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path next to `path`; on success it replaces `path`, on error it is removed.

    For writers that want a file name (matplotlib's savefig, pandas' to_csv).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the writer's pid is in the name, so that clean_stale_temps knows when the writer is gone
    fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{path.name}.{os.getpid()}.", suffix=path.suffix,
                               dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; artifacts and caches are ordinary readable files
    try:
        yield Path(tmp)
        _fsync_file(tmp)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    path = Path(path)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


_TMP_PID = re.compile(r"\.(\d+)\.[A-Za-z0-9_]{8}(?:\.[^.]*)?$")
LEGACY_TMP_AGE_S = 3600.0


def _pid_alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (a killed, not yet reaped writer)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. PermissionError: it exists
        pass
    with contextlib.suppress(OSError, IndexError):
        with open(f"/proc/{pid}/stat", "rb") as f:  # Linux: "pid (name) state ..."
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    return True


def clean_stale_temps(folder, *, recursive: bool = False) -> list[Path]:
    """Remove temporary files (atomic_path's `.tmp-*`) whose writer process is gone.

    A kill -9 mid-write leaves one behind; it is never read (readers only open final names), and
    here it is removed on the next start. Files from a live writer are kept; a temp file without a
    pid in its name (older versions) is removed once it is an hour old. Returns what was removed."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = []
    for p in (folder.rglob if recursive else folder.glob)(TMP_PREFIX + "*"):
        m = _TMP_PID.search(p.name)
        with contextlib.suppress(OSError):
            stale = (not _pid_alive(int(m.group(1))) if m
                     else time.time() - p.stat().st_mtime > LEGACY_TMP_AGE_S)
            if stale and p.is_file():
                p.unlink()
                removed.append(p)
    return removed


def warn_console(message: str) -> None:
    """warnings.warn, and inside a notebook kernel also the process's own stderr, which
    `fedpaper reproduce` (the kernel's parent) shows on its console."""
    warnings.warn(message, stacklevel=3)
    real = sys.__stderr__
    if real is not None and sys.stderr is not real:
        with contextlib.suppress(OSError, ValueError):
            print(f"fedpaper: warning: {message}", file=real, flush=True)


# Checksummed files: a header line with the SHA-256 of the payload, then the payload.
CHECKSUM_MAGIC = b"fedpaper-sha256:"


class ChecksumError(ValueError):
    """The stored bytes do not match their checksum (bit rot, a partial copy, a hand edit)."""


def with_checksum(payload: bytes) -> bytes:
    return CHECKSUM_MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def verified_payload(data: bytes) -> Optional[bytes]:
    """The payload of `with_checksum` bytes; None when `data` has no checksum header (an older
    format); ChecksumError when header and payload disagree."""
    if not data.startswith(CHECKSUM_MAGIC):
        return None
    head, sep, payload = data.partition(b"\n")
    digest = head[len(CHECKSUM_MAGIC):].decode("ascii", "replace")
    if not sep or hashlib.sha256(payload).hexdigest() != digest:
        raise ChecksumError("checksum mismatch")
    return payload


def _fsync_file(p) -> None:
    with open(p, "rb") as f:
        os.fsync(f.fileno())


def _fsync_dir(d) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# ---------------------------------------------------------------------------------------------
# Results cache

PACKAGE_DIR = Path(__file__).resolve().parent

# The core of fedpaper whose source changes every paper's results (names relative to fedpaper/,
# globs allowed; a name matches <name>.py and every .py file under the folder <name>/).
CORE_MODULES = ("data", "partition", "models", "nets", "engine*", "algorithms", "metrics", "experiment")
# Each paper's own code: every .py file of its package fedpaper/papers/<paper>/ (so a new module
# cannot be left out), minus the modules the package declares, in a literal tuple
# `RESULTS_READ_ONLY = ("claims", ...)` in its __init__.py, as only reading results (claim checks,
# drawing, tables). An edit to one paper's code leaves the other papers' cached results valid.
PAPERS_DIR = "papers"
READ_ONLY_DECLARATION = "RESULTS_READ_ONLY"
# `fedpaper reproduce` pins the code versions of its whole run here (JSON {"core": ..., "<paper>":
# ...}, see pin_code_versions), so that a source edit while a long run goes on cannot invalidate
# the cache of the notebooks still to come (they run in kernels that inherit the environment).
CODE_VERSION_ENV = "FEDPAPER_CODE_VERSION"


def _hash_files(files, pkg: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(files):
        if "__pycache__" in p.parts:
            continue
        h.update(str(p.relative_to(pkg)).encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@lru_cache(maxsize=None)
def _code_version(modules: tuple[str, ...], package_dir: str) -> str:
    pkg = Path(package_dir)
    files: set[Path] = set()
    for name in modules:
        name = name.removeprefix("fedpaper.").replace(".", "/")
        for p in pkg.glob(name + ".py"):
            files.add(p)
        for d in pkg.glob(name):
            if d.is_dir():
                files.update(d.rglob("*.py"))
    return _hash_files(files, pkg)


def read_only_modules(paper_dir: Path) -> tuple[str, ...]:
    """The module names a paper package declares as only reading results (parsed, not imported)."""
    init = paper_dir / "__init__.py"
    if not init.is_file():
        return ()
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == READ_ONLY_DECLARATION
                                                 for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return ()


def paper_files(paper: str, package_dir=PACKAGE_DIR) -> list[Path]:
    """The source files of `paper` its results depend on (see READ_ONLY_DECLARATION)."""
    pkg = Path(package_dir)
    folder = pkg / PAPERS_DIR / paper
    if not folder.is_dir():
        from fedpaper.errors import UnknownNameError

        raise UnknownNameError(f"no paper package {folder}; the store keys results by paper "
                               f"(known: {', '.join(known_papers(package_dir))})")
    skip = {folder / f"{m.replace('.', '/')}.py" for m in read_only_modules(folder)}
    skip_dirs = [folder / m.replace(".", "/") for m in read_only_modules(folder)]
    return [p for p in folder.rglob("*.py")
            if p not in skip and not any(d in p.parents for d in skip_dirs)]


def known_papers(package_dir=PACKAGE_DIR) -> list[str]:
    """Paper packages under fedpaper/papers/ (folders with an __init__.py, not starting with _)."""
    return sorted(d.name for d in (Path(package_dir) / PAPERS_DIR).iterdir()
                  if d.is_dir() and not d.name.startswith("_") and (d / "__init__.py").is_file())


@lru_cache(maxsize=None)
def _paper_version(paper: str, package_dir: str) -> str:
    return _hash_files(paper_files(paper, package_dir), Path(package_dir))


def _pins() -> dict:
    raw = os.environ.get(CODE_VERSION_ENV)
    if not raw:
        return {}
    try:
        pins = json.loads(raw)
    except ValueError:
        pins = None
    return pins if isinstance(pins, dict) else {"*": raw}  # a plain string pins every part


def code_version(paper: Optional[str] = None, package_dir=PACKAGE_DIR) -> str:
    """Version of the code behind a paper's results: hash of the core modules, plus (given a
    paper) hash of that paper's result modules. Computed once per process; pinned for a whole run
    by FEDPAPER_CODE_VERSION (see pin_code_versions)."""
    pins = _pins() if Path(package_dir) == PACKAGE_DIR else {}
    core = pins.get("core") or pins.get("*") or _code_version(CORE_MODULES, str(package_dir))
    if paper is None:
        return core
    own = pins.get(paper) or pins.get("*") or _paper_version(paper, str(package_dir))
    return f"{core}+{own}"


def pin_code_versions() -> str:
    """JSON of the current core and per-paper code versions, for FEDPAPER_CODE_VERSION."""
    versions = {"core": _code_version(CORE_MODULES, str(PACKAGE_DIR))}
    versions.update({p: _paper_version(p, str(PACKAGE_DIR)) for p in known_papers()})
    return json.dumps(versions, sort_keys=True)


def spec_paper(spec) -> Optional[str]:
    """The paper a run spec belongs to (its "paper" field), or None."""
    return spec.get("paper") if isinstance(spec, dict) else getattr(spec, "paper", None)


def spec_json(spec) -> str:
    """Canonical JSON of a run spec (any JSON-able dict or dataclass)."""
    from fedpaper.provenance import jsonable

    return json.dumps(jsonable(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


class ResultStore:
    """Finished runs on disk, keyed by (run spec, code version of the spec's paper).

    Entries are pickles (dicts, pandas frames, arrays...) behind a SHA-256 header line, written
    atomically. An entry whose bytes do not match its checksum, or that cannot be read, counts as
    missing (with a warning on the console) and is recomputed; an entry of the older format
    without a checksum is read and rewritten with one. Temporary files left by a killed writer
    are removed when a store is opened.
    """

    SUFFIX = ".pkl"

    def __init__(self, root=None, *, code: Optional[str] = None):
        if root is None:
            from fedpaper.parameters import dry_run_active
            from fedpaper.paths import cache_dir

            # a dry run's runs (issue 30) never mix with real ones
            root = cache_dir("dry-run", "results") if dry_run_active() else cache_dir("results")
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        clean_stale_temps(self.root, recursive=True)
        self.code = code  # None: the code version of each spec's paper (code_version)

    def code_of(self, spec) -> str:
        """The code version a spec's result is stored under."""
        return self.code if self.code is not None else code_version(spec_paper(spec))

    def key(self, spec) -> str:
        payload = json.dumps({"spec": json.loads(spec_json(spec)), "code": self.code_of(spec)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()

    def path(self, spec) -> Path:
        return self.entry_path(self.key(spec))

    def _load(self, path: Path, spec):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return _MISSING
        try:
            payload = verified_payload(data)
            entry = pickle.loads(data if payload is None else payload)
        except ChecksumError:
            warn_console(f"result file {path} does not match its checksum (corrupt); it will be recomputed")
            return _MISSING
        except Exception as e:  # truncated, corrupt, or from an incompatible library version
            warn_console(f"ignoring unreadable result file {path} ({type(e).__name__}); it will be recomputed")
            return _MISSING
        if not isinstance(entry, dict) or entry.get("spec") != spec_json(spec) or entry.get("code") != self.code_of(spec):
            return _MISSING
        if payload is None:  # the format before checksums: add one now
            with contextlib.suppress(OSError):
                self._write(path, entry)
        return entry["result"]

    def get(self, spec, default=None):
        """The stored result of `spec`, or `default` when absent (or unreadable)."""
        r = self._load(self.path(spec), spec)
        return default if r is _MISSING else r

    def __contains__(self, spec) -> bool:
        return self._load(self.path(spec), spec) is not _MISSING

    def put(self, spec, result) -> Path:
        """Store atomically (temp file in the same folder, fsync, os.replace)."""
        from fedpaper.provenance import now_iso

        entry = {"spec": spec_json(spec), "code": self.code_of(spec), "created": now_iso(), "result": result}
        return self._write(self.path(spec), entry)

    @staticmethod
    def _write(path: Path, entry: dict) -> Path:
        payload = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
        return atomic_write_bytes(path, with_checksum(payload))

    def __len__(self) -> int:
        return sum(1 for p in self.root.glob("*/*" + self.SUFFIX) if not p.name.startswith(TMP_PREFIX))

    # ---- which artifact (and profile) each stored run belongs to
    INDEX_DIR = "index"

    def index_path(self, artifact: str, profile: str) -> Path:
        return self.root / self.INDEX_DIR / f"{artifact.replace('/', '__')}@{profile}.json"

    def record(self, artifact: str, profile: str, specs) -> Path:
        """Add `specs` to the index of (artifact, profile): {key: {"paper", "code"}}. Keys recorded
        under another code version of the same paper are dropped (they can no longer be read)."""
        path = self.index_path(artifact, profile)
        new = {self.key(s): {"paper": spec_paper(s), "code": self.code_of(s)} for s in specs}
        codes = {(v["paper"], v["code"]) for v in new.values()}
        papers = {p for p, _ in codes}
        old = self.recorded(artifact, profile)
        keep = {k: v for k, v in old.items() if v.get("paper") not in papers or (v.get("paper"), v.get("code")) in codes}
        if new.keys() <= keep.keys() and len(keep) == len(old):
            return path  # nothing new: no write
        keep.update(new)
        data = {"artifact": artifact, "profile": profile, "runs": dict(sorted(keep.items()))}
        return atomic_write_text(path, json.dumps(data, indent=0, sort_keys=True))

    def recorded(self, artifact: str, profile: str) -> dict:
        """{key: {"paper", "code"}} of the runs recorded for (artifact, profile); {} when none."""
        try:
            data = json.loads(self.index_path(artifact, profile).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        runs = data.get("runs") if isinstance(data, dict) else None
        return runs if isinstance(runs, dict) else {}

    def indexes(self) -> list[tuple[str, str]]:
        """(artifact, profile) of every index in this store."""
        out = []
        for p in sorted((self.root / self.INDEX_DIR).glob("*@*.json")):
            art, _, prof = p.stem.rpartition("@")
            out.append((art.replace("__", "/"), prof))
        return out

    def entry_path(self, key: str) -> Path:
        return self.root / key[:2] / (key + self.SUFFIX)

    def keys(self) -> list[str]:
        """The keys of every entry on disk (not read or verified)."""
        return sorted(p.stem for p in self.root.glob("*/*" + self.SUFFIX) if not p.name.startswith(TMP_PREFIX))

    def progress(self, artifact: str, profile: str) -> Optional[tuple[int, int]]:
        """(runs done, runs recorded) of (artifact, profile) under the current code versions;
        None when no sweep of it was ever recorded here."""
        runs = self.recorded(artifact, profile)
        if not runs:
            return None
        current = {k: v for k, v in runs.items()
                   if v.get("code") == (self.code if self.code is not None else code_version(v.get("paper")))}
        return sum(self.entry_path(k).is_file() for k in current), len(current)


class _Missing:
    pass


_MISSING = _Missing()


# The artifact being made (set by run_artifact): prefixes sweep bars, so that two artifacts whose
# sweeps share a description ("privlabels cifar10") still get distinct bar labels.
BAR_PREFIX: contextvars.ContextVar[str] = contextvars.ContextVar("fedpaper_bar_prefix", default="")
# What a sweep repeated under another setting adds to its bar (e.g. a compute ladder's rung), so that
# every bar of a notebook keeps its own label (papers/ladder.py).
BAR_SUFFIX: contextvars.ContextVar[str] = contextvars.ContextVar("fedpaper_bar_suffix", default="")
# The (artifact id, profile) whose sweeps run now (set by run_artifact, None in an exploration):
# run_sweep records its runs' keys in the store's index under it.
SWEEP_OWNER: contextvars.ContextVar[Optional[tuple]] = contextvars.ContextVar("fedpaper_sweep_owner", default=None)

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
        from fedpaper.errors import BadParameterError

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


def _progress(total, initial, desc, enabled, unit="runs"):
    """One bar per sweep: a widget in JupyterLab (tqdm.auto; ipywidgets is a dependency), text
    elsewhere. FEDPAPER_PROGRESS=0 turns it off, =text forces text (set by `fedpaper reproduce`
    and `make test` for the kernels they start, whose outputs nobody watches live). Its label is
    `fedpaper.progress.bar_label` (the artifact id, plus the sweep's short name); it counts runs,
    in tenths, as the engine's rounds finish (`_RunsBar`), with the time left."""
    from fedpaper.progress import bar_label

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
    return tqdm(total=total, initial=initial, desc=" ".join(filter(None, (bar_label(BAR_PREFIX.get(), desc), BAR_SUFFIX.get()))), disable=not enabled,
                leave=True, bar_format="{l_bar}{bar}| {n:.1f}/{total_fmt} " + unit + " [{elapsed}<{remaining}{postfix}]")


class _RunsBar:
    """Moves a sweep's bar inside a batch of `size` runs as the engine reports rounds
    (`fedpaper.progress.round_done`: n_runs runs advanced one round of `rounds`), and to whole
    runs as their results are stored, never past the batch's end."""

    def __init__(self, bar, start: float, size: int):
        self.bar, self.start, self.size, self.credit = bar, start, size, 0.0

    def _to(self, target: float):
        target = min(target, self.start + self.size)
        if target > self.bar.n:
            self.bar.update(target - self.bar.n)

    def round(self, rnd: int, rounds: int, n_runs: int):
        self.credit += n_runs / max(1, rounds)
        self._to(self.start + self.credit)

    def stored(self, n_done: int):
        self.credit = max(self.credit, float(n_done))
        self._to(self.start + n_done)


@contextlib.contextmanager
def _log_above(bar):
    """fedpaper's log messages (e.g. partition notes) on their own lines above the bar; inside an
    artifact they are collected instead and logged once each after its sweeps
    (`fedpaper.progress.warnings_once`)."""
    import logging

    from tqdm.contrib.logging import logging_redirect_tqdm

    from fedpaper.progress import collecting

    if getattr(bar, "disable", True) or collecting():
        yield
        return
    with logging_redirect_tqdm(loggers=[logging.getLogger("fedpaper")], tqdm_class=type(bar)):
        yield


def _free_first(root, specs: list, keys: dict) -> list:
    """`specs` with the ones whose run another live process holds a lease on (fedpaper.leases)
    moved to the end, order kept otherwise (keys: id(spec) -> its store key): two workers on one
    store each take the next free engine call instead of the second waiting for the first's
    (measured: a second worker on FedPALS Table 1's CIFAR-10 beta=0.1 row sat idle for a whole
    10-minute run, then led, and the first waited)."""
    from fedpaper.leases import holder  # leases imports TMP_PREFIX from here

    held = [holder(root, keys[id(s)]) is not None for s in specs]
    return [s for s, h in zip(specs, held) if not h] + [s for s, h in zip(specs, held) if h]


def run_sweep(specs: Iterable, run_fn: Optional[Callable] = None, *, run_fn_many: Optional[Callable] = None,
              batch_size: Optional[int] = None, store: Optional[ResultStore] = None, desc: str = "runs",
              force: bool = False, progress: bool = True, cost: Optional[Callable] = None) -> list:
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
    same unit. Inside an
    artifact (SWEEP_OWNER) the specs' keys are recorded in the store's index first.
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
    owner = SWEEP_OWNER.get()
    if owner is not None:
        store.record(*owner, specs)
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
            raise SweepStopped(f"{BAR_PREFIX.get() + ': ' if BAR_PREFIX.get() else ''}{desc}", len(done), n_unique)
        spent[0] += cost_of(chunk)  # the chunk starts now: its cost counts once it has finished (n_run)

    from fedpaper.progress import on_rounds

    with _progress(n_unique, len(done), desc, progress) as bar, _log_above(bar):
        if run_fn is not None:
            for s in pending:
                check([s])
                moves = _RunsBar(bar, float(len(done)), 1)
                with on_rounds(moves.round):
                    r = run_fn(s)
                store.put(s, r)
                done[store.key(s)] = r
                n_run += 1
                moves.stored(1)
        else:
            step = batch_size or max(1, len(pending))
            # a run_fn_many that stores each result itself (under its lease: experiment.claimed)
            stored_by_fn = bool(getattr(run_fn_many, "stores_results", False))
            remaining = list(pending)
            key_of = {id(s): k for s, k in zip(specs, keys)}
            while remaining:
                if stored_by_fn:  # leased runs (experiment.claimed): take free runs before held ones
                    remaining = _free_first(store.root, remaining, key_of)
                chunk, remaining = remaining[:step], remaining[step:]
                check(chunk)
                moves = _RunsBar(bar, float(len(done)), len(chunk))
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
