"""Memory of one training step, and how many runs fit one engine call on the device at hand.

The engine trains R runs x m clients as stacked slots (trainer.py), so a group's memory grows with
its number of runs. What one step holds (`StepMemory`, measured once per model, input shape,
batch size, precision and device by `step_memory`):

- per slot, parameter-sized tensors: the slot's parameters, the anchor copy (the round's start),
  the gradients, the optimiser's new parameters while the old ones are alive, and the optimiser
  state (SGD 0, SGD with momentum 1, Adam/AdamW 2 copies): (4 + state) x the parameter bytes;
- per slot, the float32 input batch the trainer gathers for all slots at once (B rows, read from
  the compact pools: fedpaper.blocks.data.compact);
- the tensors saved for backward by one slot's forward pass (activations, autocast copies of the
  weights), measured with torch.autograd.graph.saved_tensors_hooks on a real forward pass of the
  model at batch 2 and 4 (linear in the batch size: saved = fixed + B x per sample). The "vmap"
  and "captured" backends hold them for every slot at once, "loop" for one slot at a time, "grouped" for one pass
  of backends.pass_width(B) slots.

`runs_that_fit` turns that into the number of runs one engine call may train: the group's data
pools, evaluation batch and activations plus (per-run bytes) x runs must fit MEMORY_FRACTION of
the memory available on the device (`available_bytes`: CPU /proc/meminfo MemAvailable; CUDA
torch.cuda.mem_get_info), never more than the caller's cap (executors.run_specs: max_batch=16).
An estimate, not a bound: algorithm state (e.g. SCAFFOLD's control variates), server steps and
allocator slack are not counted, which the fraction leaves room for. The grouping never changes a
run's numbers (the engine is batch-invariant on CPU: tests/engine/test_cpu.py), only how many
train at once.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache

import torch

from fedpaper.blocks.models import build_model, has_batchnorm
from fedpaper.engine.backends import choose_backend, pass_width, widest_conv
from fedpaper.engine.evaluate import autocast
from fedpaper.engine.grouped import GroupedForward

MEMORY_FRACTION = 0.5  # of the device's available memory that one engine call may plan to use
GIB = 1024 ** 3
#: What one evaluation pass may plan for (eval_batch_that_fits), counted generously as the training
#: step's saved-for-backward bytes per sample times the rows of the pass (a no-grad forward holds far
#: less: a layer's input and output at a time). Binds only for large inputs: the paper profile's
#: 224 px ResNet-18 of FedNCA-ML (21 MiB per sample -> 195 rows instead of 2,048; at 2,048 rows its
#: first convolution's output alone is 6.6 GB) and FedMT's CIFAR ResNet-18 (4.5 MiB -> 916); never
#: for the CPU profiles' models (LeNet 44 KiB, privlabels CNN 534 KiB, FedNCA-ML convnet 339 KiB per
#: sample: 2,048 rows fit), whose results stay bit-identical.
EVAL_BYTES = 4 * GIB


@dataclass(frozen=True)
class StepMemory:
    """Bytes of one slot's training step (see the module docstring)."""

    param_bytes: int  # one copy of the model's parameters
    state_copies: int  # optimiser state, in parameter copies
    saved_fixed: int  # saved-for-backward bytes that do not grow with the batch (e.g. autocast weight copies)
    saved_per_sample: int  # saved-for-backward bytes per sample
    input_row_bytes: int  # one float32 input row
    backend: str  # the backend the engine picks for this model on this device (backends.choose_backend)

    PARAM_COPIES = 4  # parameters, anchor, gradients, the optimiser's new parameters

    def slot_params(self) -> int:
        return (self.PARAM_COPIES + self.state_copies) * self.param_bytes

    def activations(self, batch: int) -> int:
        """Saved-for-backward bytes of one slot's forward pass on `batch` rows."""
        return self.saved_fixed + batch * self.saved_per_sample

    def run_bytes(self, slots: int, batch: int) -> int:
        """Bytes one run adds to a group: its `slots` clients' parameter copies and input batches,
        and (vmap and captured: every slot's pass at once) their activations; the captured backend
        also keeps a static copy of each slot's parameters and batch for its graph to read."""
        per_slot = self.slot_params() + batch * self.input_row_bytes
        if self.backend in ("vmap", "captured"):
            per_slot += self.activations(batch)
        if self.backend == "captured":
            per_slot += self.slot_params() + batch * self.input_row_bytes
        return slots * per_slot

    def group_bytes(self, batch: int, eval_batch: int) -> int:
        """Bytes a group holds whatever its number of runs: the activations of one loop slot or one
        grouped pass, and one evaluation batch of inputs (as many rows as eval_batch_that_fits)."""
        act = {"loop": self.activations(batch), "grouped": pass_width(batch) * self.activations(batch)}
        return act.get(self.backend, 0) + eval_batch_that_fits(self, eval_batch) * self.input_row_bytes


#: What one round's local training may plan for its clients' stacked steps before they train in
#: parts (trainer.train_slots). A constant, not the machine's free memory, so that a run's
#: numbers never depend on where it runs. Binds only for many large models: FedMT Fig. 2c's 80
#: ResNet-18 clients at the paper profile (80 x 5 parameter copies of 45 MB: 18 GB in one part);
#: every CPU profile's round (LeNet, privlabels CNN, FedNCA-ML convnet, the small ResNet) stays one
#: part, so their results are unchanged.
SLOT_BYTES = 4 * GIB


def parted(slots: int, per_slot: int, kept_per_slot: int, limit: int | None = None) -> tuple[int, int]:
    """(clients per part, bytes) of a round's `slots` clients whose stacked steps take `per_slot`
    bytes each, `kept_per_slot` of which every slot holds for the whole round (its start and its
    trained parameters, for the aggregation): one part when all fit `limit` (SLOT_BYTES unless
    given), else as many per part as fit beside what every slot keeps, at least 1."""
    limit = SLOT_BYTES if limit is None else int(limit)
    if slots * per_slot <= limit:
        return slots, slots * per_slot
    held = kept_per_slot * slots
    n = int(max(1, min(slots, (limit - held) // max(1, per_slot - kept_per_slot))))
    return n, held + n * (per_slot - kept_per_slot)


def slots_that_fit(mem: StepMemory, slots: int, batch: int, limit: int | None = None) -> int:
    """How many of a round's `slots` clients train at once (trainer.train_slots): `parted` with
    each slot's stacked step (run_bytes: (4 + optimiser state) parameter copies, an input batch,
    and under vmap the activations) and the two parameter copies every slot keeps."""
    return parted(slots, mem.run_bytes(1, batch), 2 * mem.param_bytes, limit)[0]


def slots_of(data: dict, idx, slots: int) -> dict:
    """An algorithm's per-round data (prepare_round: e.g. FedMT's pseudo-labelled rows and lookup)
    for the slots `idx` of `slots`: each entry with one item per slot (a tensor or array whose
    leading dimension is `slots`, or a list of that length) taken at `idx`; the rest kept."""
    import numpy as np

    out = {}
    for k, v in (data or {}).items():
        if isinstance(v, torch.Tensor) and v.dim() and v.shape[0] == slots:
            out[k] = v.index_select(0, torch.as_tensor(idx, device=v.device))
        elif isinstance(v, np.ndarray) and v.ndim and v.shape[0] == slots:
            out[k] = v[idx]
        elif isinstance(v, (list, tuple)) and len(v) == slots:
            out[k] = type(v)(v[i] for i in idx)
        else:
            out[k] = v
    return out


def eval_batch_that_fits(mem: StepMemory, eval_batch: int) -> int:
    """Rows per evaluation pass: the configured eval_batch, fewer where the pass would plan for more
    than EVAL_BYTES (see there); at least 1. The evaluation batch never changes a run's key."""
    return int(max(1, min(int(eval_batch), EVAL_BYTES // max(1, mem.saved_per_sample))))


def saved_tensor_bytes(model: torch.nn.Module, x: torch.Tensor, precision: str = "fp32") -> int:
    """Bytes of the tensors one forward pass of `model` on `x` saves for backward (each storage
    once; the parameters' and the input's own storages are not counted: they are held anyway)."""
    held = {p.untyped_storage().data_ptr() for p in model.parameters()} | {x.untyped_storage().data_ptr()}
    seen: set = set()
    total = 0

    def pack(t):
        nonlocal total
        st = t.untyped_storage()
        if st.data_ptr() not in held and st.data_ptr() not in seen:
            seen.add(st.data_ptr())
            total += st.nbytes()
        # the same storage without its graph: a saved *output* packed as itself would hold its own grad_fn,
        # a reference cycle through autograd's C++ graph that Python's collector never frees
        return t.detach()

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            autocast(precision, x.device):
        out = model(x)
    del out
    return total


def _state_copies(optimizer: str, momentum: float) -> int:
    return {"sgd": 1 if momentum else 0, "adam": 2, "adamw": 2}.get(optimizer, 2)


@lru_cache(maxsize=64)
def _measure(model: str, kwargs_json: str, input_shape: tuple, precision: str, device: str, optimizer: str,
             momentum: float, backend: str) -> StepMemory:
    kwargs = json.loads(kwargs_json)
    if kwargs.get("pretrained"):  # the same architecture; no weights needed to count bytes
        kwargs["pretrained"] = False
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in kwargs.items()}
    dev = torch.device(device)
    with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):  # the runs' RNG stays as it was
        net = build_model(model, **kwargs).to(dev).train()
        saved = {b: saved_tensor_bytes(net, torch.zeros(b, *input_shape, device=dev), precision) for b in (2, 4)}
        grouped_ok = GroupedForward.build(net, tuple(input_shape)) is not None
    per_sample = max(0, (saved[4] - saved[2]) // 2)
    params = sum(p.numel() * p.element_size() for p in net.parameters())
    chosen, _ = choose_backend(backend, dev, has_batchnorm(net), grouped_ok, model, widest_conv(net), precision)
    row = 4
    for s in input_shape:
        row *= int(s)
    return StepMemory(params, _state_copies(optimizer, momentum), max(0, saved[2] - 2 * per_sample), per_sample,
                      row, chosen)


def step_memory(config, input_shape: tuple, optimizer=None) -> StepMemory:
    """The StepMemory of TrainConfig `config` on inputs of `input_shape` (C, H, W), measured once
    per process; `optimizer` (an optim.OptimSpec) overrides the config's (an algorithm's own)."""
    opt = optimizer or config.optim()
    return _measure(config.model, json.dumps(config.model_kwargs, sort_keys=True, default=list),
                    tuple(int(s) for s in input_shape), config.precision, str(torch.device(config.device)),
                    opt.kind, float(opt.momentum), config.backend)


def available_bytes(device) -> int:
    """Memory available for new allocations on `device`: CUDA's free memory
    (torch.cuda.mem_get_info), else the OS's MemAvailable (/proc/meminfo; elsewhere the free
    physical pages)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[0])
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def pools_bytes(pools) -> int:
    """Bytes of a Pools' tensors (compact image pools count their uint8 pixels)."""
    tensors = [pools.x_train, pools.y_train, pools.x_test, pools.y_test]
    tensors += [t for pair in pools.labels.values() for t in pair]
    return sum(int(t.nbytes) if hasattr(t, "nbytes") else t.numel() * t.element_size() for t in tensors)


@dataclass(frozen=True)
class GroupBudget:
    """How many runs one engine call may train here, and why."""

    runs: int  # at most `cap`, at least 1
    cap: int
    per_run: int  # bytes
    fixed: int  # bytes: pools, evaluation batch, activations held once per group
    budget: int  # bytes: MEMORY_FRACTION x available
    device: str

    def notice(self, desc: str = "runs") -> str:
        return (f"{desc}: memory budget: {self.runs} run(s) per engine call instead of {self.cap} "
                f"({self.per_run / GIB:.2f} GiB per run + {self.fixed / GIB:.2f} GiB shared, "
                f"{MEMORY_FRACTION:.0%} of {self.budget / MEMORY_FRACTION / GIB:.1f} GiB available on {self.device})")

    def one_run_too_big(self) -> bool:
        """Even one run (its clients' stacked parameter copies, the pools, one step) is estimated
        to need more than all the memory available on the device."""
        return self.fixed + self.per_run > self.budget / MEMORY_FRACTION

    def too_big_notice(self, desc: str = "runs") -> str:
        return (f"{desc}: one run needs about {(self.fixed + self.per_run) / GIB:.1f} GiB ({self.per_run / GIB:.2f} GiB "
                f"for its clients' stacked parameter copies and steps + {self.fixed / GIB:.2f} GiB shared), more than "
                f"the {self.budget / MEMORY_FRACTION / GIB:.1f} GiB available on {self.device}: it may be killed "
                "for memory; free memory or use a larger machine (`fedpaper plan` gives every artifact's run peak)")


def runs_that_fit(method, config, pools, clients: int, cap: int) -> GroupBudget:
    """The GroupBudget of runs of `method` with TrainConfig `config` on `pools`, `clients` clients
    per run (participation applied as the trainer does), at most `cap` runs."""
    optimizer = getattr(method.algorithm(), "optimizer", None) if hasattr(method, "algorithm") else None
    mem = step_memory(config, tuple(pools.x_train.shape[1:]), optimizer)
    slots = max(1, int(round(config.participation * clients)))
    per_run = parted(slots, mem.run_bytes(1, config.batch_size), 2 * mem.param_bytes)[1]  # in parts if need be
    fixed = pools_bytes(pools) + mem.group_bytes(config.batch_size, config.eval_batch)
    budget = int(MEMORY_FRACTION * available_bytes(config.device))
    runs = max(1, min(cap, (budget - fixed) // max(1, per_run)))
    return GroupBudget(int(runs), cap, per_run, fixed, budget, str(config.device))
