"""The ground layer: what every other layer may use and which imports nothing of fedpaper above it.

- `files`: atomic writes, stale temporary files, checksummed payloads
- `procs`: the one process-liveness check
- `jsonio`: JSON-serialisable copies and UTC time stamps
- `console`: warnings that also reach the console from a notebook kernel
- `errors`: fedpaper's exceptions (one line naming the problem and the fix)
- `paths`: where the repository, the caches and the figures are
- `progress`: progress bars that move in a terminal, a notebook and a log

ARCHITECTURE.md lists the layers above it.
"""
