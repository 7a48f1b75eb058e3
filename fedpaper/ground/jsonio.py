"""JSON helpers: a JSON-serialisable copy of any result value, and the UTC time stamps every record
carries. Ground layer: imports nothing from fedpaper.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import os


def jsonable(obj):
    """A JSON-serialisable copy of obj (numpy scalars/arrays, Paths, sets, dataclasses, NaN->None)."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return None if math.isnan(obj) else (str(obj) if math.isinf(obj) else obj)
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((jsonable(v) for v in obj), key=repr)
    if isinstance(obj, os.PathLike):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(dataclasses.asdict(obj))
    if hasattr(obj, "tolist"):  # numpy / torch
        return jsonable(obj.tolist())
    if hasattr(obj, "item"):
        return jsonable(obj.item())
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    if callable(obj):
        return getattr(obj, "__qualname__", repr(obj))
    return repr(obj)


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
