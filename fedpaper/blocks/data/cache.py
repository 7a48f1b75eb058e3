"""Parse-once caching of data sets as a single uncompressed ``.npz`` under ``cache_dir("data")``.

The cache file name holds the data set name and a hash of the source files' paths, sizes and
modification times (plus a format version), so a changed or moved source is parsed again. Files
are written to a temporary name and then moved into place with ``os.replace``, so a reader never
sees a half-written file even when several processes parse at once. Each file holds the SHA-256
of every array (and of the metadata); a file that does not match is reported on the console and
parsed again, like an unreadable one.
"""
from __future__ import annotations

import hashlib
import json
import struct
import zipfile
from pathlib import Path

import numpy as np

from fedpaper.ground.errors import DataCorruptError, FedpaperError
from fedpaper.ground.paths import cache_dir
from fedpaper.ground.console import warn_console
from fedpaper.ground.files import atomic_path, clean_stale_temps

#: Bump when the parsed layout changes, so old cache files are ignored.
CACHE_VERSION = 1
_META_KEY = "__meta__"
_SUMS_KEY = "__sha256__"


def _sha256(a: np.ndarray) -> str:
    """SHA-256 of an array's dtype, shape and C-order bytes."""
    h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    h.update(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    return h.hexdigest()


def source_key(name: str, sources: list[Path]) -> str:
    """A short hash of the data set name and each source file's path, size and mtime."""
    parts = [name, str(CACHE_VERSION)]
    for path in sorted(Path(p) for p in sources):
        st = path.stat()
        parts.append(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def cache_path(name: str, key: str) -> Path:
    """Where the parsed arrays of `name` for source key `key` live."""
    return cache_dir("data") / f"{name}-{key}.npz"


def _read_stored_member(fh, info: zipfile.ZipInfo) -> np.ndarray:
    """One uncompressed .npy member of a zip, read straight into a fresh array (a single copy)."""
    fh.seek(info.header_offset)
    local = fh.read(30)
    if local[:4] != b"PK\x03\x04":
        raise ValueError("bad zip local header")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    fh.seek(info.header_offset + 30 + name_len + extra_len)
    version = np.lib.format.read_magic(fh)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read_header(fh)
    if dtype.hasobject:
        raise ValueError("object arrays are not cached")
    arr = np.empty(shape, dtype=dtype, order="F" if fortran else "C")
    if arr.size and fh.readinto(memoryview(arr.reshape(-1, order="A")).cast("B")) != arr.nbytes:
        raise EOFError("truncated cache file")
    return arr


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Read an uncompressed .npz (as np.savez writes it) faster than np.load.

    np.load copies each member through zipfile in small chunks; here each array is read with one
    readinto at its offset in the file. Compressed members fall back to np.load.
    """
    arrays = {}
    with zipfile.ZipFile(path) as zf, open(path, "rb") as fh:
        for info in zf.infolist():
            key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            if info.compress_type == zipfile.ZIP_STORED:
                arrays[key] = _read_stored_member(fh, info)
            else:
                with np.load(path, allow_pickle=False) as npz:
                    arrays[key] = npz[key]
    return arrays


def load_cached(name: str, key: str) -> tuple[dict[str, np.ndarray], dict] | None:
    """The cached arrays and metadata, or None when there is no cache file or it is corrupt
    (unreadable, or not matching its checksums: then a warning names it, and it is parsed again)."""
    path = cache_path(name, key)
    if not path.is_file():
        return None
    try:
        arrays = read_npz(path)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        warn_console(f"parsed-array cache {path} is unreadable ({type(e).__name__}); parsing the source again")
        return None
    sums = json.loads(arrays.pop(_SUMS_KEY).tobytes().decode()) if _SUMS_KEY in arrays else None
    if sums is not None:
        bad = sorted(k for k in set(arrays) | set(sums) if k not in arrays or sums.get(k) != _sha256(arrays[k]))
        if bad:
            warn_console(f"parsed-array cache {path} does not match its checksum ({', '.join(bad)}); "
                         "parsing the source again")
            return None
    meta = json.loads(arrays.pop(_META_KEY).tobytes().decode()) if _META_KEY in arrays else {}
    if sums is None:  # written before checksums: add them now
        save_cached(name, key, arrays, meta)
    return arrays, meta


def save_cached(name: str, key: str, arrays: dict[str, np.ndarray], meta: dict) -> Path:
    """Write the arrays, JSON-able metadata and their SHA-256 sums atomically; returns the path."""
    path = cache_path(name, key)
    payload = dict(arrays)
    payload[_META_KEY] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    sums = {k: _sha256(v) for k, v in payload.items()}
    payload[_SUMS_KEY] = np.frombuffer(json.dumps(sums, sort_keys=True).encode(), dtype=np.uint8)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **payload)
    return path


def _corrupt_errors() -> tuple:
    import pickle
    import zlib

    errors = [OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error, pickle.UnpicklingError]
    try:
        from PIL import UnidentifiedImageError

        errors.append(UnidentifiedImageError)
    except ImportError:
        pass
    return tuple(errors)


#: What reading a truncated or garbled source file raises (gzip, zip, pickle, JPEG, IDX).
CORRUPT_ERRORS = _corrupt_errors()


def corrupt_error(name: str, path, e: BaseException) -> DataCorruptError:
    """One line: which file of data set `name` is corrupt, what failed, and the two fixes."""
    detail = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return DataCorruptError(
        f"{name}: {path} is truncated or corrupt ({type(e).__name__}{': ' + detail if detail else ''}); "
        f"re-download it (delete it, then copy it again from the offline copies or call "
        f"load_dataset('{name}', download=True)); if only the parsed arrays are at fault, delete "
        f"{cache_dir('data') / (name + '-*.npz')}")


def cached_parse(name: str, sources: list[Path], parse) -> tuple[dict[str, np.ndarray], dict]:
    """Return ``parse()`` (a pair arrays, meta), reading it from the cache when the sources are unchanged."""
    key = source_key(name, sources)
    clean_stale_temps(cache_dir("data"))
    hit = load_cached(name, key)
    if hit is not None:
        return hit
    try:
        arrays, meta = parse()
    except FedpaperError:
        raise
    except CORRUPT_ERRORS as e:
        src = sources[0] if len(sources) == 1 else f"one of {', '.join(str(s) for s in sources)}"
        raise corrupt_error(name, src, e) from e
    save_cached(name, key, arrays, meta)
    return arrays, meta
