"""What a long computation shows while it runs: bar labels, progress inside runs, warnings once.

- `bar_label(artifact_id, desc)`: a sweep bar's label inside an artifact is the artifact id, plus
  the sweep's own short name at most once (a desc that names the paper, the artifact or another
  artifact adds nothing and is dropped: `fedmt/fig2a`, `fedpals/table1 cifar10 C=3`).
- `on_rounds(callback)` / `round_done(rnd, rounds, n_runs)`: the engine reports each finished
  round of the `n_runs` runs it trains together; the sweep that started the training turns that
  into progress inside its runs (so a bar moves, with an ETA, while a long run trains: `RunsBar`).
  The engine only calls `round_done`; it never knows who listens.
- `running()` / `while_running(...)`: what code that takes no such argument learns of the
  computation running now: the round listener above, and the runs layer's sweep scope
  (fedpaper.runs.sweep.current_scope), which a paper's compute never passes on.
- `warnings_once(where)`: fedpaper's log records inside the block are collected, and each distinct
  message is logged once when the block ends, counted (`... (x12)`); messages that differ only in
  their numbers count as one, the numbers shown as ranges (`6-12 images ...`). Nothing is printed
  while a bar is drawn, so no warning lands inside a bar's line.

This module imports nothing of fedpaper: every layer may use it.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import re
from typing import Callable, Optional


@dataclasses.dataclass(frozen=True)
class Running:
    """What code that takes no such argument learns of the computation running now (`running()`):
    `rounds`, the listener of the trainer's round reports (`on_rounds`, `round_done`), and `scope`,
    an object of a layer above that this module never reads (the runs layer's sweep scope:
    fedpaper.runs.sweep.current_scope)."""

    rounds: Optional[Callable[[int, int, int], None]] = None
    scope: object = None


# Context variable: code in the results' code versions (the trainer, a paper's compute) calls down with no such argument.
_RUNNING: contextvars.ContextVar[Running] = contextvars.ContextVar("fedpaper_running", default=Running())
_ARTIFACT_WORD = re.compile(r"^(fig|table)[0-9]\w*$")


# ------------------------------------------------------------------------------ bar labels
def bar_label(artifact_id: str, desc: str) -> str:
    """The label of a sweep's bar: `desc` outside an artifact; inside one the artifact id plus
    what `desc` adds (its words after the paper's name, less the artifact's own name and any
    other artifact's name), so the label holds the artifact id once and no other artifact's."""
    desc = (desc or "").strip()
    if not artifact_id:
        return desc or "runs"
    paper, _, name = artifact_id.partition("/")
    words = desc.replace(artifact_id, " ").split()
    kept = [w for w in words if w not in (paper, name, artifact_id) and not w.startswith(paper + "/")
            and not _ARTIFACT_WORD.match(w)]
    return " ".join([artifact_id] + kept)


# ------------------------------------------------------------------------ the computation running now
def running() -> Running:
    """What the computation running now set (Running() outside any)."""
    return _RUNNING.get()


@contextlib.contextmanager
def while_running(**changes):
    """Inside the block, `running()` has the fields `changes` (of Running), the others kept."""
    token = _RUNNING.set(dataclasses.replace(_RUNNING.get(), **changes))
    try:
        yield
    finally:
        _RUNNING.reset(token)


# ------------------------------------------------------------------------ rounds in runs
def on_rounds(callback: Callable[[int, int, int], None]):
    """Inside the block, `callback(rnd, rounds, n_runs)` is called after each training round."""
    return while_running(rounds=callback)


def round_done(rnd: int, rounds: int, n_runs: int) -> None:
    """Called by the engine after round `rnd` of `rounds` of the `n_runs` runs it trains."""
    cb = _RUNNING.get().rounds
    if cb is not None:
        cb(rnd, rounds, n_runs)


class RunsBar:
    """Moves a sweep's bar (a tqdm bar counting runs) inside a batch of `size` runs as the engine
    reports rounds (`round`, the listener `on_rounds` takes: n_runs runs advanced one round of
    `rounds`), and to whole runs as their results are stored (`stored`), never past the batch's end."""

    def __init__(self, bar, start: float, size: int):
        self.bar, self.start, self.size, self.credit = bar, start, size, 0.0

    def _to(self, target: float):
        target = min(target, self.start + self.size)
        if target > self.bar.n:
            self.bar.update(target - self.bar.n)

    def round(self, rnd: int, rounds: int, n_runs: int):
        self.credit += n_runs / max(1, rounds)
        self._to(self.start + self.credit)

    def stored(self, n_done: int):
        self.credit = max(self.credit, float(n_done))
        self._to(self.start + n_done)


# ------------------------------------------------------------------------ warnings once
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _fmt(values: list[str]) -> str:
    nums = sorted(set(values), key=float)
    return nums[0] if len(nums) == 1 else f"{nums[0]}-{nums[-1]}"


class _Collector(logging.Handler):
    def __init__(self):
        super().__init__()
        self.seen: dict = {}  # (logger, level, template) -> [count, [numbers per occurrence]]

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = record.getMessage()
        except Exception:  # a bad format string: keep the raw text
            msg = str(record.msg)
        key = (record.name, record.levelno, _NUMBER.sub("{}", msg.replace("{", "{{").replace("}", "}}")))
        entry = self.seen.setdefault(key, [0, []])
        entry[0] += 1
        entry[1].append(_NUMBER.findall(msg))

    def lines(self) -> list[tuple[str, int, str]]:
        """(logger name, level, text) per distinct message, in order of first appearance."""
        out = []
        for (name, level, template), (count, numbers) in self.seen.items():
            text = template.format(*[_fmt(list(col)) for col in zip(*numbers)]) if numbers[0] else \
                template.format()
            out.append((name, level, text + (f" (x{count})" if count > 1 else "")))
        return out


def collecting() -> bool:
    """Whether fedpaper's log records are being collected (by `warnings_once`) now: its collector
    is the "fedpaper" logger's handler."""
    return any(isinstance(h, _Collector) for h in logging.getLogger("fedpaper").handlers)


@contextlib.contextmanager
def warnings_once(where: str = ""):
    """fedpaper's log records inside the block, each distinct message logged once at its end
    (prefixed by `where`, counted). Nested blocks leave the collecting to the outermost one."""
    if collecting():
        yield
        return
    root = logging.getLogger("fedpaper")
    collector = _Collector()
    saved = root.handlers[:], root.propagate
    root.handlers, root.propagate = [collector], False
    try:
        yield
    finally:
        root.handlers, root.propagate = saved
        for name, level, text in collector.lines():
            logging.getLogger(name).log(level, f"{where}: {text}" if where else text)
