"""A group of runs that runs out of device memory is split, not lost.

The engine trains a group of runs in one call (fedpaper.runs.experiment.plan_groups sizes it by
an estimate of the device's memory: engine.memory.runs_that_fit). An estimate can be wrong (the
allocator's slack, an algorithm's state it does not count, another process on the same GPU), so a
CUDA out-of-memory error (`torch.OutOfMemoryError`) in one engine call does not end the sweep:
`split_on_oom` frees the cached memory (`torch.cuda.empty_cache`), splits the group in halves and
trains each half, recursively down to one run, and yields each part's results as soon as that part
has trained, so the caller stores them at once (a run already trained is never trained again or
lost). The smaller size is remembered per group configuration (`group_limit`), so the later groups
of that configuration in this process start at it (their first engine call trains that many runs);
one line says so. A run that does not fit even alone raises `OneRunTooBigError`, one line naming the
fix. `train_in_parts` is how every executor (fedpaper.runs.executors) trains one of
experiment.plan_groups' groups; `train_planned` plans a sweep's chunk into those groups and trains
each (the local sweep's training, fedpaper.runs.sweep.leased).

A run's numbers do not depend on its group (the engine is batch-invariant on the CPU,
tests/engine/test_cpu.py), so the split changes the speed only.
"""
from __future__ import annotations

import gc
from typing import Callable, Hashable, Iterator, Optional

import torch

from fedpaper.ground.errors import FedpaperError
from fedpaper.runs import experiment

#: The largest group size that did not run out of memory, per group configuration (method,
#: TrainConfig, pools key), after an out-of-memory error in this process.
_LIMITS: dict = {}


class OneRunTooBigError(FedpaperError, torch.OutOfMemoryError):
    """One run alone does not fit the device's memory (the message names the run and the fix)."""


def group_limit(key: Hashable) -> Optional[int]:
    """The group size at which groups of configuration `key` start after an out-of-memory error in
    this process (None: no such error)."""
    return _LIMITS.get(key)


def clear_limits() -> None:
    """Forget every recorded group size (a new device, a test)."""
    _LIMITS.clear()


def free_device_memory() -> None:
    """Drop unreachable tensors and hand the CUDA allocator's cached blocks back to the device."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[0][:200] if lines else type(e).__name__


def split_on_oom(items: list, train: Callable[[list], list], key: Hashable, desc: str = "runs",
                 name: Callable[[object], str] = repr) -> Iterator[tuple[int, object]]:
    """(index in `items`, result) of every item, part by part as each engine call ends.

    `train(part)` trains a list of items in one engine call and returns their results in order.
    The items start in one part, or in parts of `group_limit(key)` where an earlier group of this
    configuration ran out of memory. A part that raises torch.OutOfMemoryError is split in halves
    (the first half trained first), each retried, down to one item; the smaller size is recorded
    for `key` and one line says so. One item that runs out of memory alone raises OneRunTooBigError
    (`name(item)` names it). Results already yielded stay valid whatever follows."""
    n = len(items)
    limit = _LIMITS.get(key) or n
    parts = [list(range(i, min(n, i + limit))) for i in range(0, n, limit)]
    while parts:
        part = parts.pop(0)
        try:
            results = train([items[i] for i in part])
        except torch.OutOfMemoryError as e:
            if isinstance(e, OneRunTooBigError):
                raise
            why = _first_line(e)
        else:
            yield from zip(part, results)
            continue
        # outside the except block: the error's traceback (and the tensors its frames hold) is gone
        free_device_memory()
        if len(part) == 1:
            raise OneRunTooBigError(
                f"{desc}: one run does not fit the device's memory even alone ({name(items[part[0]])}; "
                f"torch: {why}); give it a smaller batch_size or eval_batch, bf16 precision, or a device "
                "with more memory") from None
        half = (len(part) + 1) // 2
        _LIMITS[key] = min(half, _LIMITS.get(key) or half)
        print(f"{desc}: out of device memory training {len(part)} runs in one engine call; training them as "
              f"{half} + {len(part) - half} runs (later groups of this configuration start at "
              f"{_LIMITS[key]} runs)", flush=True)
        parts[:0] = [part[:half], part[half:]]


def group_key(st) -> tuple:
    """What the runs of one engine call share (experiment.group_setups groups by it): method,
    TrainConfig, pools key."""
    return (st.method, st.config, st.pools_key)


def _run_name(st) -> str:
    return f"{getattr(st.method, 'name', st.method)}, seed {st.federation.seed}, {st.pools_key[0]}, {st.config.model}"


def train_in_parts(setups: list, progress: bool, desc: str = "runs") -> Iterator[tuple[int, dict]]:
    """(index in `setups`, result) of every run of one group of experiment.plan_groups, as
    experiment.train_group trains them: the whole group in one engine call, or, after the device ran
    out of memory, in smaller parts (`split_on_oom`), each part's results as soon as it ends."""
    return split_on_oom(setups, lambda part: experiment.train_group(part, progress), group_key(setups[0]), desc,
                        _run_name)


def train_planned(specs: list, *, build: Callable, max_batch: int, desc: str = "runs") -> Iterator[tuple[int, dict]]:
    """(position in `specs`, result) of every run, engine call by engine call as each ends: the
    groups experiment.plan_groups forms of `specs` (`build(spec)` makes each setup), each trained by
    `train_in_parts`. The engine's own per-method bar stays off: the sweep's bar is the one bar."""
    for group in experiment.plan_groups(specs, build, max_batch, desc):
        positions, setups = zip(*group)
        for i, r in train_in_parts(list(setups), False, desc):
            yield positions[i], r
