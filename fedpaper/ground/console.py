"""Console messages that reach the user from a notebook kernel too. Ground layer."""
from __future__ import annotations

import contextlib
import sys
import warnings


def warn_console(message: str) -> None:
    """warnings.warn, and inside a notebook kernel also the process's own stderr, which
    `fedpaper reproduce` (the kernel's parent) shows on its console."""
    warnings.warn(message, stacklevel=3)
    real = sys.__stderr__
    if real is not None and sys.stderr is not real:
        with contextlib.suppress(OSError, ValueError):
            print(f"fedpaper: warning: {message}", file=real, flush=True)
