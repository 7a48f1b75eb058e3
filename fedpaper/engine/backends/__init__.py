"""The engine's backends: objects that each own a whole local step of all slots.

One class per backend, registered in rule.REGISTRY (the table choose_backend reads): "vmap" maps
torch.func.grad over the slots (vmap.py), "loop" takes torch.autograd.grad slot by slot (loop.py),
"grouped" runs all slots in one forward and backward pass (grouped.py), "captured" replays the
vmap backend's whole step as one CUDA graph (captured.py, CUDA only, chosen when asked). Each has `supports(facts,
device, precision)` (a rule), its gradient entry (`__call__`, a SlotStep) and the local step
(`step`: gradients, correction, optimiser update; base.py). What they share and how they differ:
rule.py's docstring and ARCHITECTURE.md ("Adding a backend").
"""
from fedpaper.engine.backends.base import Backend, ModelFacts, SlotStep
from fedpaper.engine.backends.captured import CapturedBackend
from fedpaper.engine.backends.grouped import GroupedBackend, padded_slots, pass_width, safe_width
from fedpaper.engine.backends.loop import LoopBackend
from fedpaper.engine.backends.rule import BACKENDS, GROUPED_MAX_CONV, REGISTRY, SlotGradients, choose_backend, \
    make_backend, widest_conv
from fedpaper.engine.backends.vmap import VmapBackend

__all__ = ["Backend", "CapturedBackend", "ModelFacts", "SlotStep", "GroupedBackend", "LoopBackend", "VmapBackend", "REGISTRY",
           "BACKENDS", "GROUPED_MAX_CONV", "SlotGradients", "choose_backend", "make_backend", "widest_conv",
           "safe_width", "pass_width", "padded_slots"]
