"""Atomic files and the on-disk results cache.

Every write goes to a temporary file in the destination folder, is flushed and fsynced, then
renamed over the destination with os.replace, so a reader sees the old file or the new one, never
a half-written one.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

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
