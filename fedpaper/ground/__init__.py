"""The ground layer: what every other layer may use and which imports nothing of fedpaper above it.

- `files`: atomic writes, stale temporary files, checksummed payloads
- `procs`: the one process-liveness check
- `jsonio`: JSON-serialisable copies and UTC time stamps
- `console`: warnings that also reach the console from a notebook kernel

ARCHITECTURE.md lists the layers above it.
"""
