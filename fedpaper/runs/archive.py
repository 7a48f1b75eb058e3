"""Finished runs of the results cache to and from a portable, checksummed archive, so that a sweep
too long for one sitting (or one machine) runs in pieces: run with `--max-hours`, export, commit or
copy the archive, import it on the next machine, run the same command again.

    fedpaper cache export ARCHIVE [--only ID_OR_PAPER ...] [--profile P]
    fedpaper cache import ARCHIVE

An archive is a gzip-compressed tar file holding MANIFEST.json and one member entries/<key>.pkl per
run: the cache entry's bytes as stored (a pickle behind its own SHA-256 header, fedpaper.runs.store).
The manifest records the format, when and from which git commit it was made, the code versions
of the papers it holds (fedpaper.runs.versions.code_version: a run is reused only by the same code),
the SHA-256 and size of every member, and which artifact and profile each run belongs to (the
store's index, so that a later export of the same artifact includes the imported runs).

Export takes the entries readable by the current code (selected through the store's index by
`--only` artifact ids or paper names and `--profile`, or every entry; with both, the CLI first
records every run the artifacts need at that profile, plan.record_runs); corrupt entries are left
out with a warning. Import reads and checks the whole archive before it writes anything: every
member's SHA-256 against the manifest, every entry's own checksum, and that each entry's spec and
code version hash to its key; any mismatch, a truncated or foreign file: one line, nothing
written. Entries are pickles, as in the cache itself: import archives you trust (your own).
When the archive's code version of a paper differs from this checkout's, import (and later
`fedpaper reproduce`) says so in one line, with the commit to run from.

Runs keyed by the text-hash code versions used before the syntax-tree scheme
(fedpaper.runs.version_map) are moved to the syntax-tree version of the same source as they are
imported, and `migrate_archive` (`fedpaper cache rekey --scheme --archive A`) rewrites an archive so:
no run is retrained, only its key and code version change; the manifest keeps the commit that made
the runs and says what was moved ("migrated").
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import pickle
import re
import tarfile
from pathlib import Path
from typing import Optional

from fedpaper.ground.errors import FedpaperError
from fedpaper.ground.console import warn_console
from fedpaper.ground.files import ChecksumError, atomic_path, atomic_write_text, verified_payload, with_checksum
from fedpaper.runs.store import ResultStore
from fedpaper.runs.version_map import to_new_scheme
from fedpaper.runs.versions import CODE_VERSION_ENV, SCHEME, code_version
from fedpaper.ground.jsonio import now_iso
from fedpaper.runs.provenance import git_info

FORMAT = "fedpaper-results-archive"
VERSION = 1
MANIFEST = "MANIFEST.json"
ENTRY_DIR = "entries"
IMPORTS_DIR = "imports"  # in the store: one record per imported archive (manifest without entries)


class ArchiveError(FedpaperError):
    """A missing, foreign, truncated or corrupt archive, or nothing to export (one line, exit 2)."""

def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _entry(data: bytes, where: str) -> dict:
    """The cache entry {"spec", "code", "created", "result"} of stored bytes; ArchiveError if they do
    not match their checksum or do not unpickle."""
    try:
        payload = verified_payload(data)
        entry = pickle.loads(data if payload is None else payload)
    except ChecksumError:
        raise ArchiveError(f"{where} does not match its own checksum (corrupt)") from None
    except Exception as e:  # truncated or garbled pickle
        raise ArchiveError(f"{where} cannot be read ({type(e).__name__})") from None
    if not isinstance(entry, dict) or not {"spec", "code", "result"} <= entry.keys():
        raise ArchiveError(f"{where} is not a fedpaper result entry")
    return entry


def entry_key(entry: dict) -> str:
    """The store key of an entry, recomputed from its spec and code version (ResultStore.key)."""
    payload = json.dumps({"spec": json.loads(entry["spec"]), "code": entry["code"]}, sort_keys=True)
    return _sha256(payload.encode())


def _paper_of(entry: dict) -> Optional[str]:
    spec = json.loads(entry["spec"])
    return spec.get("paper") if isinstance(spec, dict) else None


def _current_code(paper: Optional[str], store: ResultStore) -> str:
    return store.code if store.code is not None else code_version(paper)


# ----------------------------------------------------------------------------- export
def _selected_indexes(store: ResultStore, only, profile) -> list[tuple[str, str]]:
    """(artifact, profile) indexes matching `only` (artifact ids or paper names) and `profile`."""
    out = []
    for art, prof in store.indexes():
        if profile is not None and prof != profile:
            continue
        if only and not any(art == o or art.split("/", 1)[0] == o for o in only):
            continue
        out.append((art, prof))
    return out


def export_archive(path, store: Optional[ResultStore] = None, *, only=None, profile=None) -> dict:
    """Write the selected finished runs to `path` (see the module docstring); returns a summary
    {"path", "entries", "bytes", "skipped_stale", "skipped_corrupt", "papers"}."""

    store = store if store is not None else ResultStore()
    indexes = []
    if only or profile is not None:
        for art, prof in _selected_indexes(store, only, profile):
            indexes.append({"artifact": art, "profile": prof, "runs": store.recorded(art, prof)})
        if not indexes:
            what = " ".join(only or []) + (f" (profile {profile})" if profile else "")
            raise ArchiveError(f"no runs of {what.strip()} are recorded in the cache {store.root}; run `fedpaper "
                               "reproduce` for them first (each sweep it reaches records its runs)")
        wanted = sorted({k for ix in indexes for k in ix["runs"]})
    else:
        wanted = store.keys()
    entries, members, stale, corrupt = {}, {}, 0, 0
    for key in wanted:
        p = store.entry_path(key)
        if not p.is_file():
            continue  # recorded but not finished (a sweep stopped at its deadline)
        data = p.read_bytes()
        try:
            entry = _entry(data, f"cache entry {p}")
        except ArchiveError as e:
            warn_console(f"{e}; left out of the archive (it will be recomputed)")
            corrupt += 1
            continue
        paper = _paper_of(entry)
        if entry["code"] != _current_code(paper, store):
            stale += 1  # made by other code: the current code cannot reuse it
            continue
        entries[key] = {"sha256": _sha256(data), "bytes": len(data), "paper": paper, "code": entry["code"],
                        "created": entry.get("created")}
        members[key] = data
    if not entries:
        raise ArchiveError(f"nothing to export from {store.root}: no finished run of the current code "
                           f"matches the selection ({stale} made by other code versions)")
    papers = sorted({e["paper"] for e in entries.values() if e["paper"]})
    versions = {p: sorted({e["code"] for e in entries.values() if e["paper"] == p}) for p in papers}
    for ix in indexes:
        ix["runs"] = {k: v for k, v in ix["runs"].items() if k in entries}
    manifest = {"format": FORMAT, "version": VERSION, "created": now_iso(), "git": git_info(),
                "selection": {"only": list(only or []), "profile": profile},
                "code_versions": versions, "entries": entries, "indexes": indexes}
    path = _write_archive(path, manifest, members)
    return {"path": path, "entries": len(entries), "bytes": path.stat().st_size, "skipped_stale": stale,
            "skipped_corrupt": corrupt, "papers": versions}


def _write_archive(path, manifest: dict, members: dict) -> Path:
    blob = json.dumps(manifest, indent=1, sort_keys=True).encode()
    path = Path(path)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, \
                tarfile.open(fileobj=gz, mode="w") as tar:
            _add(tar, MANIFEST, blob)
            for key in sorted(members):
                _add(tar, f"{ENTRY_DIR}/{key}{ResultStore.SUFFIX}", members[key])
    return path


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))


# ----------------------------------------------------------------------------- import
def read_archive(path) -> tuple[dict, dict]:
    """(manifest, {key: entry bytes}) of an archive, every check done (see the module docstring);
    ArchiveError names the first problem."""
    path = Path(path)
    if not path.is_file():
        raise ArchiveError(f"archive {path} does not exist; give the path of a file made by `fedpaper cache export`")
    members: dict[str, bytes] = {}
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for m in tar:
                if not m.isfile():
                    raise ArchiveError(f"{path} holds {m.name!r}, which is not a plain file: not a fedpaper results archive")
                members[m.name] = tar.extractfile(m).read()
            while tar.fileobj.read(1 << 20):  # to the end of the gzip stream: checks its CRC and length
                pass
    except ArchiveError:
        raise
    except (tarfile.ReadError, gzip.BadGzipFile, OSError) as e:
        raise ArchiveError(f"{path} is not a fedpaper results archive (a .tar.gz made by `fedpaper cache export`)"
                           f" or is damaged ({type(e).__name__}); copy it again") from None
    except (EOFError, tarfile.TarError, Exception) as e:  # zlib.error, truncated streams
        raise ArchiveError(f"{path} is truncated or corrupt ({type(e).__name__}); copy it again") from None
    if MANIFEST not in members:
        raise ArchiveError(f"{path} has no {MANIFEST}: not a fedpaper results archive")
    try:
        manifest = json.loads(members.pop(MANIFEST))
    except ValueError:
        raise ArchiveError(f"{path}: its {MANIFEST} is not valid JSON (corrupt archive)") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArchiveError(f"{path} is not a fedpaper results archive (its manifest names no format {FORMAT!r})")
    if manifest.get("version") != VERSION:
        raise ArchiveError(f"{path} is a version {manifest.get('version')} archive; this fedpaper reads version "
                           f"{VERSION} (use the fedpaper that made it)")
    listed = manifest.get("entries") or {}
    names = {f"{ENTRY_DIR}/{k}{ResultStore.SUFFIX}": k for k in listed}
    extra = sorted(set(members) - set(names))
    missing = sorted(set(names) - set(members))
    if missing or extra:
        raise ArchiveError(f"{path}: {len(missing)} entries of its manifest are missing and {len(extra)} files are "
                           f"not in it (first: {(missing or extra)[0]}); the archive is incomplete or altered")
    out = {}
    for name, key in names.items():
        data = members[name]
        if _sha256(data) != listed[key].get("sha256") or len(data) != listed[key].get("bytes"):
            raise ArchiveError(f"{path}: {name} does not match its SHA-256 in the manifest (corrupt archive); "
                               "copy it again or export it again")
        entry = _entry(data, f"{path}: {name}")
        if entry_key(entry) != key:
            raise ArchiveError(f"{path}: {name} holds the result of another run than its name says (altered archive)")
        out[key] = data
    return manifest, out


def import_archive(path, store: Optional[ResultStore] = None) -> dict:
    """Check the whole archive, then add its runs to the store (existing ones are kept) and its
    index records; returns {"entries", "added", "papers", "notes"} (notes: code-version lines)."""
    store = store if store is not None else ResultStore()
    manifest, entries = read_archive(path)
    manifest, entries, _ = migrate_members(manifest, entries)
    added = 0
    for key, data in entries.items():
        dest = store.entry_path(key)
        if dest.is_file() and _sha256(dest.read_bytes()) == _sha256(data):
            continue
        with atomic_path(dest) as tmp:
            Path(tmp).write_bytes(data)
        added += 1
    for ix in manifest.get("indexes") or []:
        _merge_index(store, ix, entries)
    record = {k: v for k, v in manifest.items() if k not in ("entries", "indexes")}
    record.update(archive=str(Path(path).resolve()), n_entries=len(entries))
    atomic_write_text(store.root / IMPORTS_DIR / f"{_sha256(json.dumps(manifest, sort_keys=True).encode())[:16]}.json",
                      json.dumps(record, indent=1, sort_keys=True))
    return {"entries": len(entries), "added": added, "papers": manifest.get("code_versions") or {},
            "notes": code_notes(record, store)}


_NAME = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)?")


def _merge_index(store: ResultStore, ix: dict, keys) -> None:
    """Add an archive's index record (only its runs that the archive holds) to the store's index."""
    art, prof, runs = ix.get("artifact"), ix.get("profile"), ix.get("runs") or {}
    if not (isinstance(art, str) and isinstance(prof, str) and _NAME.fullmatch(art) and _NAME.fullmatch(prof)
            and "/" not in prof and ".." not in art + prof and isinstance(runs, dict)):
        return  # not a name this fedpaper writes: ignored (never a path)
    merged = {**store.recorded(art, prof), **{k: v for k, v in runs.items() if k in keys}}
    atomic_write_text(store.index_path(art, prof),
                      json.dumps({"artifact": art, "profile": prof, "runs": dict(sorted(merged.items()))},
                                 indent=0, sort_keys=True))


# ----------------------------------------------------------------------------- code scheme
def scheme_migrated(entry: dict, vmap: Optional[dict] = None) -> Optional[dict]:
    """The entry keyed by the syntax-tree version of the source its text-scheme code version names
    (its result untouched, a "scheme" stamp {"from", "to", "name"} added), or None when its code
    version is not a text-scheme version of the map (already migrated, pinned, or unknown)."""
    new = to_new_scheme(entry["code"], _paper_of(entry), vmap)
    if new is None or new == entry["code"]:
        return None
    return {**entry, "code": new, "scheme": {"from": entry["code"], "to": new, "name": SCHEME}}


def entry_bytes(entry: dict) -> bytes:
    """The stored bytes of a cache entry (ResultStore's format: a pickle behind its checksum)."""
    return with_checksum(pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL))


def migrate_members(manifest: dict, members: dict, vmap: Optional[dict] = None) -> tuple[dict, dict, dict]:
    """(manifest, {key: bytes}, {old key: new key}) of an archive's runs with every text-scheme
    entry moved to the syntax-tree scheme (scheme_migrated); the input unchanged when none is."""
    moved, out, listed = {}, {}, dict(manifest.get("entries") or {})
    for key, data in members.items():
        entry = _entry(data, f"archive entry {key}")
        new = scheme_migrated(entry, vmap)
        if new is None:
            out[key] = data
            continue
        data = entry_bytes(new)
        new_key = entry_key(new)
        moved[key] = new_key
        out[new_key] = data
        listed[new_key] = {**listed.pop(key, {}), "sha256": _sha256(data), "bytes": len(data), "code": new["code"]}
    if not moved:
        return manifest, members, moved
    versions: dict[str, set] = {}
    for e in listed.values():
        if e.get("paper"):
            versions.setdefault(e["paper"], set()).add(e["code"])
    indexes = []
    for ix in manifest.get("indexes") or []:
        runs = {}
        for k, v in (ix.get("runs") or {}).items():
            runs[moved.get(k, k)] = {**v, "code": listed[moved[k]]["code"]} if k in moved else v
        indexes.append({**ix, "runs": runs})
    old_versions = manifest.get("code_versions") or {}
    history = list(manifest.get("migrated") or []) + [{"scheme": SCHEME, "at": now_iso(), "git": git_info(),
                                                        "runs": len(moved), "from_code_versions": old_versions}]
    manifest = {**manifest, "entries": listed, "indexes": indexes, "migrated": history,
                "code_versions": {p: sorted(v) for p, v in sorted(versions.items())}}
    return manifest, out, moved


def migrate_archive(path, vmap: Optional[dict] = None) -> dict:
    """Rewrite an archive with its text-scheme runs moved to the syntax-tree scheme (no run
    retrained; see migrate_members); nothing written when none is. Returns {"path", "entries",
    "moved", "before", "after"} (before and after: the manifest's code versions, {paper: [...]})."""
    manifest, members = read_archive(path)
    new_manifest, new_members, moved = migrate_members(manifest, members, vmap)
    if moved:
        _write_archive(path, new_manifest, new_members)
    return {"path": Path(path), "entries": len(members), "moved": len(moved),
            "before": manifest.get("code_versions") or {}, "after": new_manifest.get("code_versions") or {}}


# ----------------------------------------------------------------------------- code versions
def code_notes(record: dict, store: Optional[ResultStore] = None, papers=None) -> list[str]:
    """One line per paper (of `papers`, default all) whose runs in an imported archive were made
    by a code version other than this checkout's: they will not be reused; what to do."""
    store = store if store is not None else ResultStore()
    commit = (record.get("git") or {}).get("commit")
    dirty = " with uncommitted changes" if (record.get("git") or {}).get("dirty") else ""
    notes = []
    for paper, versions in sorted((record.get("code_versions") or {}).items()):
        if papers is not None and paper not in papers:
            continue
        current = _current_code(paper, store)
        if current in versions:
            continue
        at = f"commit {commit[:12]}{dirty}" if commit else "the commit that made it (not recorded)"
        pin = {"core": versions[-1].split("+")[0], paper: versions[-1].split("+")[-1]}
        notes.append(f"the {paper} runs of {Path(record.get('archive', '?')).name} were made by code version "
                     f"{versions[-1]} ({at}) but this checkout's is {current}, so `fedpaper reproduce` will not "
                     f"reuse them: run from {at} (git checkout {commit[:12] if commit else '<commit>'}), or, if "
                     f"your changes cannot affect results, check that and keep them: `fedpaper cache rekey --only "
                     f"{paper}` (retrains the cheapest run, compares its metrics within a tolerance), or pin it unchecked: "
                     f"export {CODE_VERSION_ENV}='{json.dumps(pin)}'")
    return notes


def imported_notes(papers, store: Optional[ResultStore] = None) -> list[str]:
    """code_notes of every archive imported into the store, for these papers (for `reproduce`)."""
    store = store if store is not None else ResultStore()
    papers = [p for p in papers if not _has_current_runs(store, p)]  # already run with this code: moved on
    latest: dict[str, dict] = {}  # paper -> the most recent import holding it
    for p in (store.root / IMPORTS_DIR).glob("*.json"):
        try:
            record = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for paper in record.get("code_versions") or {}:
            if paper in papers and str(record.get("created", "")) >= str(latest.get(paper, {}).get("created", "")):
                latest[paper] = record
    return [n for paper, rec in sorted(latest.items()) for n in code_notes(rec, store, [paper])]


def _has_current_runs(store: ResultStore, paper: str) -> bool:
    """Whether any recorded run of `paper` under this checkout's code version is finished here."""
    current = _current_code(paper, store)
    for art, prof in store.indexes():
        if art.split("/", 1)[0] == paper and any(
                v.get("code") == current and store.entry_path(k).is_file() for k, v in store.recorded(art, prof).items()):
            return True
    return False
