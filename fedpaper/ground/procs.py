"""Processes: the one check of whether a process still runs (temporary files, leases, download
staging folders all ask it). Ground layer: imports nothing from fedpaper.
"""
from __future__ import annotations

import contextlib
import os


def pid_alive(pid: int) -> bool:
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
