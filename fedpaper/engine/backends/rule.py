"""The registry of backends and the fixed rule that picks one.

The backends (one class each: loop.py, vmap.py, grouped.py) compute the same function: each slot's
gradients of its own loss and the local step built on them. They differ by float rounding (and by
which random numbers dropout draws), so the choice is made by a fixed rule on the model, the device
and the precision, never by timing: a rerun of the same spec on the same machine is bit-identical,
and (loop, grouped) so is a run trained in another group (tests/engine/test_cpu.py).
"""
from __future__ import annotations

import torch

from fedpaper.ground.errors import BadParameterError
from fedpaper.engine.backends.base import Backend, ModelFacts
from fedpaper.engine.backends.captured import CapturedBackend
from fedpaper.engine.backends.grouped import GroupedBackend
from fedpaper.engine.backends.loop import LoopBackend
from fedpaper.engine.backends.vmap import VmapBackend

#: every backend by name: the one table choose_backend, make_backend and the tests read
REGISTRY: dict = {cls.name: cls for cls in (VmapBackend, LoopBackend, GroupedBackend, CapturedBackend)}
BACKENDS = ("auto", *REGISTRY)


#: auto on CPU: the grouped backend for CNNs whose widest convolution has fewer output channels than
#: this (per precision), the loop backend from it on: the grouped backend is used only for the widths
#: of the privlabels CNN at which it measured at least as fast as the loop backend (one CPU thread;
#: benchmarks/bench_backends.py measures both), and it falls behind as the convolutions widen
GROUPED_MAX_CONV = {"fp32": 32, "bf16": 64}


def widest_conv(model: torch.nn.Module) -> int:
    """The most output channels of any Conv2d in `model` (0 without one)."""
    return max((m.out_channels for m in model.modules() if isinstance(m, torch.nn.Conv2d)), default=0)


def choose_backend(requested: str, device: torch.device, batchnorm: bool, grouped_ok: bool, model: str,
                   conv_width: int = 0, precision: str = "fp32") -> tuple:
    """(backend, rule): the backend to train with and the rule that chose it.

    An explicit backend is used as asked where its class `supports` the model (REGISTRY); else its
    stated fallback (`fallback`: "grouped" for a BatchNorm model trains with "loop", the grouped
    forward has no BatchNorm layer; "captured" off CUDA trains with "vmap", the step it captures) or
    one clear error. "auto" never picks "captured" (captured.py says when it may): "vmap" on CUDA;
    on CPU "loop" for BatchNorm models, "grouped" where the model supports it, except for a model
    whose widest convolution (`conv_width`, widest_conv) has GROUPED_MAX_CONV[precision] output
    channels or more: "loop". A rule on the model, the device and the precision, never a timing
    (see the module docstring)."""
    if requested not in BACKENDS:
        choices = ", ".join(repr(b) for b in BACKENDS)
        raise BadParameterError(f"backend={requested!r}; choose one of {choices}")
    device = torch.device(device)
    facts = ModelFacts(model, batchnorm, grouped_ok, conv_width)
    if requested != "auto":
        cls = REGISTRY[requested]
        if cls.supports(facts, device, precision):
            return requested, "requested"
        return cls.fallback(facts, device, precision)
    if device.type == "cuda":
        return "vmap", "auto: cuda, batchnorm model -> vmap" if batchnorm else "auto: cuda -> vmap"
    if batchnorm:
        return "loop", "batchnorm model: loop"
    if not GroupedBackend.supports(facts, device, precision):
        return "loop", "auto: cpu, model not grouped-capable -> loop"
    limit = GROUPED_MAX_CONV.get(precision, GROUPED_MAX_CONV["fp32"])
    if conv_width >= limit:
        return "loop", f"auto: cpu, {precision}, widest convolution {conv_width} >= {limit} channels -> loop"
    return "grouped", "auto: cpu, grouped-capable model -> grouped"


def make_backend(name: str, template, grouped=None, channels_last: bool = True, precision: str = "fp32",
                 device=None) -> Backend:
    """The backend object `name` (a REGISTRY key, as choose_backend returns) for one model template."""
    if name not in REGISTRY:
        raise BadParameterError(f"backend={name!r} is not registered; choose one of {tuple(REGISTRY)}")
    return REGISTRY[name](template, grouped, channels_last, precision, device)


def SlotGradients(template, grouped, backend: str, channels_last: bool = True) -> Backend:  # noqa: N802
    """The backend object for `backend` (make_backend): called as before, it returns the slots'
    gradients (a SlotStep)."""
    return make_backend(backend, template, grouped, channels_last)
