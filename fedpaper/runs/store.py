"""The on-disk results cache: finished runs keyed by (run spec, code version of the spec's paper).

    store = ResultStore()      # cache_dir("results"); a dry run's: ResultStore(cache_dir("dry-run", "results"))
    store.put(spec, result); store.get(spec)

Its writes are the ground layer's atomic files; resumable sweeps over it are `fedpaper.runs.sweep`,
the code versions `fedpaper.runs.versions`.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import pickle
from pathlib import Path
from typing import Optional

from fedpaper.ground.console import warn_console
from fedpaper.ground.files import (TMP_PREFIX, ChecksumError, atomic_write_bytes, atomic_write_text, clean_stale_temps,
                                   verified_payload, with_checksum)
from fedpaper.ground.jsonio import jsonable, now_iso
from fedpaper.ground.paths import cache_dir
from fedpaper.runs.versions import code_version, spec_paper

def spec_json(spec) -> str:
    """Canonical JSON of a run spec (any JSON-able dict or dataclass)."""
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
            root = cache_dir("results")
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
