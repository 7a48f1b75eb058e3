"""Atomic files, the on-disk results cache and resumable sweeps.

    store = ResultStore()                       # cache_dir("results"), keyed by spec + code version
    results = run_sweep(specs, run_one, desc="table1")          # one run at a time
    results = run_sweep(specs, run_fn_many=engine_batch, batch_size=8)   # several runs at once

Every write goes to a temporary file in the destination folder, is flushed and fsynced, then
renamed over the destination with os.replace, so a reader sees the old file or the new one, never
a half-written one.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import pickle
import tempfile
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

TMP_PREFIX = ".tmp-"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path next to `path`; on success it replaces `path`, on error it is removed.

    For writers that want a file name (matplotlib's savefig, pandas' to_csv).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX + path.name + ".", suffix=path.suffix, dir=path.parent)
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

# The parts of fedpaper whose source changes results (names relative to fedpaper/, globs allowed;
# a name matches <name>.py and every .py file under the folder <name>/).
# The paper modules that build federations and run specs count too; their claim checks, drawing and
# tables (papers/*_claims, *_draw, *_tables) only read results and are left out.
RESULT_MODULES = ("data", "partition", "models", "engine*", "algorithms", "metrics", "experiment",
                  "papers/fedpals", "papers/fedpals_geometry", "papers/fedpals_profiles", "papers/fedpals_real",
                  "papers/fedpals_runs", "papers/fedpals_train", "papers/privlabels", "papers/privlabels_appb",
                  "papers/privlabels_profiles", "papers/privlabels_runs")
# `fedpaper reproduce` pins the code version of its whole run here, so that a source edit while a
# long run goes on cannot invalidate the cache of the notebooks still to come (they run in kernels
# that inherit the environment).
CODE_VERSION_ENV = "FEDPAPER_CODE_VERSION"


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
    h = hashlib.sha256()
    for p in sorted(files):
        if "__pycache__" in p.parts:
            continue
        h.update(str(p.relative_to(pkg)).encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def code_version(modules: Sequence[str] = RESULT_MODULES, package_dir=PACKAGE_DIR) -> str:
    """Hash of the source files that affect results (computed once per process and module list;
    the default list's hash can be pinned for a whole run with FEDPAPER_CODE_VERSION)."""
    pinned = os.environ.get(CODE_VERSION_ENV)
    if pinned and tuple(modules) == RESULT_MODULES and Path(package_dir) == PACKAGE_DIR:
        return pinned
    return _code_version(tuple(modules), str(package_dir))


def spec_json(spec) -> str:
    """Canonical JSON of a run spec (any JSON-able dict or dataclass)."""
    from fedpaper.provenance import jsonable

    return json.dumps(jsonable(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


class ResultStore:
    """Finished runs on disk, keyed by (run spec, code version).

    Entries are pickles (dicts, pandas frames, arrays...) written atomically; an unreadable or
    partial entry counts as missing, and leftover temporary files are ignored.
    """

    SUFFIX = ".pkl"

    def __init__(self, root=None, *, code: Optional[str] = None,
                 modules: Sequence[str] = RESULT_MODULES):
        if root is None:
            from fedpaper.paths import cache_dir

            root = cache_dir("results")
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.code = code if code is not None else code_version(modules)

    def key(self, spec) -> str:
        payload = json.dumps({"spec": json.loads(spec_json(spec)), "code": self.code}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()

    def path(self, spec) -> Path:
        k = self.key(spec)
        return self.root / k[:2] / (k + self.SUFFIX)

    def _load(self, path: Path, spec):
        try:
            with open(path, "rb") as f:
                entry = pickle.load(f)
        except FileNotFoundError:
            return _MISSING
        except Exception as e:  # truncated, corrupt, or from an incompatible library version
            warnings.warn(f"ignoring unreadable result file {path} ({type(e).__name__}); it will be recomputed")
            return _MISSING
        if not isinstance(entry, dict) or entry.get("spec") != spec_json(spec) or entry.get("code") != self.code:
            return _MISSING
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

        entry = {"spec": spec_json(spec), "code": self.code, "created": now_iso(), "result": result}
        path = self.path(spec)
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as f:
                pickle.dump(entry, f, protocol=pickle.HIGHEST_PROTOCOL)
        return path

    def __len__(self) -> int:
        return sum(1 for p in self.root.glob("*/*" + self.SUFFIX) if not p.name.startswith(TMP_PREFIX))


class _Missing:
    pass


_MISSING = _Missing()


# The artifact being made (set by run_artifact): prefixes sweep bars, so that two artifacts whose
# sweeps share a description ("privlabels cifar10") still get distinct bar labels.
BAR_PREFIX: contextvars.ContextVar[str] = contextvars.ContextVar("fedpaper_bar_prefix", default="")


def _progress(total, initial, desc, enabled):
    """One bar per sweep: a widget in JupyterLab (tqdm.auto; ipywidgets is a dependency), text
    elsewhere. FEDPAPER_PROGRESS=0 turns it off, =text forces text (set by `fedpaper reproduce`
    and `make test` for the kernels they start, whose outputs nobody watches live)."""
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
    prefix = BAR_PREFIX.get()
    desc = f"{prefix}: {desc}" if prefix else desc
    return tqdm(total=total, initial=initial, desc=desc, disable=not enabled, leave=True)


@contextlib.contextmanager
def _log_above(bar):
    """fedpaper's log messages (e.g. partition notes) on their own lines above the bar."""
    import logging

    from tqdm.contrib.logging import logging_redirect_tqdm

    if getattr(bar, "disable", True):
        yield
        return
    with logging_redirect_tqdm(loggers=[logging.getLogger("fedpaper")], tqdm_class=type(bar)):
        yield


def run_sweep(specs: Iterable, run_fn: Optional[Callable] = None, *, run_fn_many: Optional[Callable] = None,
              batch_size: Optional[int] = None, store: Optional[ResultStore] = None, desc: str = "runs",
              force: bool = False, progress: bool = True) -> list:
    """Results of every spec, in order: finished runs are read from the store, the rest are run.

    Give either `run_fn(spec) -> result` (one run at a time) or `run_fn_many(list_of_specs) ->
    list_of_results` (the engine trains several runs at once; `batch_size` specs per call, default
    all pending). `run_fn_many` may also return an iterator, whose results are stored one by one as
    they come. Every result is stored as soon as it is available, so an interrupted sweep (Ctrl-C,
    kill) that is started again reuses every run that finished. `force=True` (or the environment
    variable FEDPAPER_RECOMPUTE=1, set by `fedpaper reproduce --force`) recomputes all.
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
    with _progress(n_unique, len(done), desc, progress) as bar, _log_above(bar):
        if run_fn is not None:
            for s in pending:
                r = run_fn(s)
                store.put(s, r)
                done[store.key(s)] = r
                bar.update(1)
        else:
            step = batch_size or max(1, len(pending))
            for i in range(0, len(pending), step):
                chunk = pending[i:i + step]
                results = run_fn_many(chunk)
                n = 0
                for s, r in zip(chunk, results):
                    store.put(s, r)
                    done[store.key(s)] = r
                    bar.update(1)
                    n += 1
                if n != len(chunk):
                    raise RuntimeError(f"run_fn_many returned {n} results for {len(chunk)} specs")
    return [done[k] for k in keys]
