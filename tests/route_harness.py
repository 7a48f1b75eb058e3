"""The route a setting takes from a notebook's call to the engine, measured by running it.

`route(fn, setting, value, **parameters)` calls `fedpaper.notebook.run(fn, overrides={setting:
value}, **parameters)` under a profiler hook (`sys.setprofile`) and, at every call into a fedpaper
function whose arguments carry the value (a dict holding `setting: value` at any depth, an object
whose attributes do, such as a RunSpec, a TrainConfig or the trainer, or an argument named after
the setting that equals it; not a call that only reads a value object: a property, hashing,
comparing), records the modules on the call stack, consecutive frames of one
module taken as one stay. A module that holds two separate stays on one such stack was entered
twice: the value went out of it and came back into it through a call (a closure, a callback).

    python -m tests.route_harness fedpals/table1 rounds 3     # every distinct stack, then the verdict

The value should be one the profile does not use for anything else (smoke profiles train 2-4
rounds: 3 collides, 7 does not), so that an integer argument that equals it by chance is rare.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import sys
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "fedpaper"
_ROOT = str(PACKAGE) + "/"


def _module(filename: str):
    """The package-relative path of a fedpaper source file (None for any other file)."""
    return filename[len(_ROOT):] if filename.startswith(_ROOT) else None


def _carries(obj, setting: str, value, depth: int = 0, seen=None) -> bool:
    if depth > 4 or obj is None or isinstance(obj, (str, bytes, float, bool, int)):
        return False
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return False
    seen.add(id(obj))
    if isinstance(obj, dict):
        if obj.get(setting) == value and type(obj.get(setting)) is type(value):
            return True
        return any(_carries(v, setting, value, depth + 1, seen) for v in list(obj.values())[:64])
    if isinstance(obj, (list, tuple)):
        return any(_carries(v, setting, value, depth + 1, seen) for v in obj[:8])
    if type(obj).__module__.startswith("fedpaper."):
        attrs = ({f.name: getattr(obj, f.name, None) for f in dataclasses.fields(obj)}
                 if dataclasses.is_dataclass(obj) else dict(getattr(obj, "__dict__", {})))
        if attrs.get(setting) == value and type(attrs.get(setting)) is type(value):
            return True
        return any(_carries(v, setting, value, depth + 1, seen) for v in list(attrs.values())[:64])
    return False


_VALUE_METHODS = {"__hash__", "__eq__", "__ne__", "__lt__", "__repr__", "__str__", "__len__", "__iter__",
                  "__getitem__", "__contains__", "__bool__"}


def _reads_a_value(frame) -> bool:
    """A call that reads a value object rather than hands the value on: a property of it (a
    RunSpec's `seed`) or one of its comparison, hashing and container methods."""
    code = frame.f_code
    if code.co_name in _VALUE_METHODS:
        return True
    if not code.co_argcount or code.co_varnames[0] != "self":
        return False
    attr = inspect.getattr_static(type(frame.f_locals.get("self")), code.co_name, None)
    return isinstance(attr, property)


def _stays(frame) -> list[tuple[str, list[str]]]:
    """[(module, [function, ...])] from the outermost fedpaper frame to `frame`."""
    frames = []
    while frame is not None:
        m = _module(frame.f_code.co_filename)
        if m is not None:
            frames.append((m, frame.f_code.co_name))
        frame = frame.f_back
    out: list = []
    for m, name in reversed(frames):
        if out and out[-1][0] == m:
            out[-1][1].append(name)
        else:
            out.append((m, [name]))
    return out


def route(fn, setting: str, value, **parameters) -> list[list[tuple[str, list[str]]]]:
    """Every distinct stack (as `_stays`) at a call into fedpaper whose arguments carry
    `setting: value`, in order of first appearance, while `notebook.run(fn, overrides={setting:
    value}, **parameters)` runs."""
    from fedpaper import notebook

    stacks: dict = {}

    def hook(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if not code.co_filename.startswith(_ROOT):
            return
        caller = frame.f_back
        if caller is not None and caller.f_code.co_filename == code.co_filename:
            return  # a call inside one module: no module is entered
        if _reads_a_value(frame):
            return
        names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount
                                 + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)]
        local = frame.f_locals
        if not any((n == setting and local.get(n) == value) or _carries(local.get(n), setting, value)
                   for n in names):
            return
        stays = _stays(frame)
        key = tuple(m for m, _ in stays)
        if key not in stacks:
            stacks[key] = stays

    overrides = dict(parameters.pop("overrides", None) or {}, **{setting: value})
    sys.setprofile(hook)
    try:
        notebook.run(fn, overrides=overrides, **parameters)
    finally:
        sys.setprofile(None)
    return list(stacks.values())


def to_round_loop(stays) -> list:
    """The stays from the notebook's call to the round loop: up to and including the driver's
    (fedpaper/driver/), whose loop consumes the rounds; what the round loop calls below it (the
    algorithm parts, the progress report) is left out."""
    for i, (m, _) in enumerate(stays):
        if m.startswith("driver/"):
            return stays[:i + 1]
    return list(stays)


def entered_twice(stays) -> list[str]:
    """The modules holding two separate stays on one stack."""
    mods = [m for m, _ in stays]
    return sorted({m for m in mods if mods.count(m) > 1})


def artifact_function(artifact_id: str):
    """The artifact function whose notebook makes `artifact_id` (it may make others beside it)."""
    from fedpaper.notebook import notebook_call
    from fedpaper.outputs.registry import implementation

    module, name = notebook_call(implementation(artifact_id).notebook)
    return getattr(importlib.import_module(module), name)


def main(argv=None) -> int:
    import os

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3:
        print("usage: python -m tests.route_harness PAPER/ARTIFACT SETTING VALUE (an integer), "
              "e.g. fedpals/table1 rounds 7")
        return 2
    artifact_id, setting, value = argv[0], argv[1], int(argv[2])
    os.environ.setdefault("FEDPAPER_PROGRESS", "0")
    stacks = route(artifact_function(artifact_id), setting, value, profile="smoke",
                   out_dir=tempfile.mkdtemp(prefix="route-"))
    bad = below = 0
    for stays in stacks:
        twice, twice_below = entered_twice(to_round_loop(stays)), entered_twice(stays)
        bad += bool(twice)
        below += bool(twice_below) and not twice
        print(" -> ".join(f"{m}({'>'.join(dict.fromkeys(names))})" for m, names in stays))
        if twice:
            print(f"   ENTERED TWICE before the round loop: {', '.join(twice)}")
        elif twice_below:
            print(f"   entered twice below the round loop: {', '.join(twice_below)}")
    print(f"{artifact_id}: {len(stacks)} distinct stacks carry {setting}={value}; {bad} enter a module twice "
          f"from the notebook to the round loop, {below} more below it")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
