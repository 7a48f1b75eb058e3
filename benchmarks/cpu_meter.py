"""How much CPU other processes used while a benchmark round ran (the machine is shared).

`snapshot()` reads the system-wide busy CPU time (/proc/stat, without steal) and the CPU time of
this process and all its live descendants (psutil where installed: the Ray workers of a Flower
simulation are descendants of the driver). `foreign_cores(a, b)` is then the average number of
cores that *other* processes kept busy between two snapshots: about 0 on an otherwise idle machine.
"""
from __future__ import annotations

import os
import time

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _system_busy_s() -> float:
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except OSError:
        return float("nan")
    user, nice, system, idle, iowait, irq, softirq, steal = v
    return (user + nice + system + irq + softirq) / _TICK


def _tree_cpu_s() -> float:
    own = time.process_time()
    try:
        import psutil

        for ch in psutil.Process().children(recursive=True):
            try:
                t = ch.cpu_times()
                own += t.user + t.system
            except psutil.Error:
                pass
    except ImportError:
        pass
    return own


def snapshot() -> tuple:
    """(wall s, system-wide busy CPU s, CPU s of this process tree)."""
    return time.perf_counter(), _system_busy_s(), _tree_cpu_s()


def foreign_cores(a: tuple, b: tuple) -> float:
    """Cores used by other processes between snapshots a and b (clipped at 0)."""
    wall = b[0] - a[0]
    if wall <= 0:
        return float("nan")
    return max(0.0, ((b[1] - a[1]) - (b[2] - a[2])) / wall)


def own_cores(a: tuple, b: tuple) -> float:
    """Cores used by this process tree between snapshots a and b."""
    wall = b[0] - a[0]
    return (b[2] - a[2]) / wall if wall > 0 else float("nan")
