"""Atomic files: every write goes to a temporary file in the destination folder, is flushed and
fsynced, then renamed over the destination with os.replace, so a reader sees the old file or the
new one, never a half-written one; temporary files a killed writer left are removed on the next
start (`clean_stale_temps`); checksummed payloads (`with_checksum`, `verified_payload`).

Ground layer: imports nothing from fedpaper but the ground.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Optional

from fedpaper.ground.procs import pid_alive

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
            stale = (not pid_alive(int(m.group(1))) if m
                     else time.time() - p.stat().st_mtime > LEGACY_TMP_AGE_S)
            if stale and p.is_file():
                p.unlink()
                removed.append(p)
    return removed


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
