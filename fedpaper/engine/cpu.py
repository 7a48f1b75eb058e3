"""CPU facts for the batched engine: allocator tuning (glibc malloc thresholds) and whether bf16
runs natively here (the precision a profile may use)."""
from __future__ import annotations

import ctypes
import os
import sys

import torch

_ALLOCATOR_TUNED = False  # the thresholds below are in force (this process, now)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: A training step whose saved-for-backward activations (memory.StepMemory.activations at the batch
#: size) exceed this keeps glibc's behaviour for large blocks (LARGE_STEP_THRESHOLDS): the paper
#: profile's 224 px ResNet-18 of FedNCA-ML (~21 MiB per sample: ~670 MiB a step at batch 32). Below it
#: the thresholds are raised for speed: LeNet (44 KiB per sample), the privlabels CNN (534 KiB), the
#: FedNCA-ML convnet (339 KiB), FedMT's CIFAR ResNet-18 (4.5 MiB x batch 10): all under 64 MiB a step.
LARGE_STEP_BYTES = 256 * 2**20
#: (trim, mmap) thresholds for large steps: buffers over 4 MiB (a large step's activations) are
#: mmapped and go back to the OS when freed, so run after run they cannot fragment the heap: a lower
#: peak than glibc's dynamic defaults (32 MiB once risen), for the same user CPU time, at the price of
#: more system time (the page faults of fresh mmaps). Only the paper profile's 224 px
#: ResNet-18 takes this path, which is dry runs and GPU hosts' CPU fallbacks in practice.
LARGE_STEP_THRESHOLDS = (8 << 20, 4 << 20)
_LARGE_SET = False  # LARGE_STEP_THRESHOLDS are in force
#: A model whose parameters take at least this many bytes (FedMT's and FedNCA-ML's ResNet-18: 45 MB)
#: also gets LARGE_STEP_THRESHOLDS and the release after its engine call (trainer.train), whatever its
#: step's activations: each client slot holds several parameter-sized copies of 45 MB, and with the
#: raised thresholds the freed copies of run after run fragment the heap (as in the FedMT paper
#: profile's 10-client ResNet-18 runs, whose kernel then grew run after run). The CPU profiles'
#: models stay far below (LeNet 0.25 MB, the privlabels CNN, the small ResNet and FedNCA-ML's convnet
#: a few MB).
LARGE_PARAM_BYTES = 32 * 2**20


def _mallopt(trim: int, mmap: int) -> bool:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_TRIM_THRESHOLD, trim)
        if not libc.mallopt(_M_MMAP_THRESHOLD, mmap):
            libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # the largest value some glibc versions accept
        return True
    except (OSError, AttributeError):  # not glibc (musl, ...): nothing to tune
        return False


def large_step(step_bytes) -> bool:
    """A training step that saves at least LARGE_STEP_BYTES for backward (None: unknown, not large)."""
    return step_bytes is not None and step_bytes >= LARGE_STEP_BYTES


def allocator_bytes(step_bytes, param_bytes: int, in_parts: bool):
    """The step size the allocator rules (allocator_tuned_for, large_step) see for an engine call: its
    step's saved activations, raised to LARGE_STEP_BYTES when its rounds train in parts (GBs of
    stacked parameter copies: FedMT Fig. 2c's 80 ResNet-18 clients) or its model has at least
    LARGE_PARAM_BYTES of parameters, so that the clients' parameter copies are mmapped and go back to
    the OS when freed instead of fragmenting the heap run after run."""
    if in_parts or param_bytes >= LARGE_PARAM_BYTES:
        return max(step_bytes or 0, LARGE_STEP_BYTES)
    return step_bytes


def allocator_tuned_for(step_bytes=None) -> bool:
    """Whether an engine call whose training step saves `step_bytes` for backward gets the raised
    malloc thresholds (_tune_cpu_allocator): Linux, FEDPAPER_MALLOC_TUNING not 0, and a small step
    (under LARGE_STEP_BYTES; None: unknown, counted as small)."""
    if os.environ.get("FEDPAPER_MALLOC_TUNING", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    return not large_step(step_bytes)


def _tune_cpu_allocator(step_bytes=None):
    """glibc only, per engine call: for a small training step (allocator_tuned_for), keep freed memory
    in the heap (M_TRIM_THRESHOLD, and M_MMAP_THRESHOLD so that large activation buffers come from the
    heap, not fresh mmaps). Otherwise every training step returns its activation buffers to the OS and
    page-faults them back in, which costs a large part of a step for small CNNs on CPU. The process keeps
    its peak heap instead, and a heap of 1 GiB blocks fragments: for a large step (FedNCA-ML's 224 px
    ResNet-18) that costs resident memory over glibc's defaults and is
    worth little (page faults are a small part of a multi-second step), so a large step gets
    LARGE_STEP_THRESHOLDS, set at its first large step, also after a small model raised them in the
    same process. Results are unchanged either way.
    FEDPAPER_MALLOC_TUNING=0 disables it."""
    global _ALLOCATOR_TUNED, _LARGE_SET
    if os.environ.get("FEDPAPER_MALLOC_TUNING", "1") == "0" or not sys.platform.startswith("linux"):
        return
    if allocator_tuned_for(step_bytes):
        if not _ALLOCATOR_TUNED:
            _ALLOCATOR_TUNED, _LARGE_SET = _mallopt(1 << 30, 1 << 30), False
    elif not _LARGE_SET:
        _LARGE_SET, _ALLOCATOR_TUNED = _mallopt(*LARGE_STEP_THRESHOLDS), False


def release_freed_memory():
    """After an engine call with a large step (trainer.train, large_step), on Linux/glibc: collect the
    trainer's reference cycles (its Context holds bound methods of the trainer, so its state, e.g.
    FedCurv's per-client Fisher tensors, waits for the cyclic garbage collector otherwise) and hand the
    heap's free pages back to the OS (malloc_trim(0)). Without it the heap kept each run's peak, and
    the next run, with other tensor sizes, could not reuse all of that fragmented free memory and grew
    it further (as the FedNCA-ML paper profile's ResNet-18 runs at 224 px did, run after run, to
    well above their largest single run's peak). Not after small steps: there the collection, the
    trim and the page faults back in cost a noticeable share of a short engine call, and their heap
    is small anyway. Results are unchanged
    (no tensor is touched). FEDPAPER_MALLOC_TRIM=0 disables the trim."""
    import gc

    gc.collect()
    if os.environ.get("FEDPAPER_MALLOC_TRIM", "1") == "0" or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


# oneDNN ISA caps (ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA) that still include native bf16 instructions
_BF16_ISAS = ("AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX10", "ALL", "DEFAULT")


def bf16_native(device="cpu") -> tuple[bool, str]:
    """(native, why): does bf16 autocast run on this machine's own bf16 instructions?

    CUDA: torch.cuda.is_bf16_supported(). CPU: only when the CPU has AVX-512 BF16 (or AMX) AND
    torch runs its AVX-512 kernels (torch.backends.cpu.get_cpu_capability(), which follows
    ATEN_CPU_CAPABILITY) AND oneDNN is not capped below its bf16 ISA (ONEDNN_MAX_CPU_ISA). Elsewhere
    bf16 is emulated and several times slower than fp32 (benchmarks/bench_engine.py measures
    it). A rule on reported facts, not a timing, so that the choice (and the results key it
    enters) is the same on every run on one machine."""
    dev = torch.device(device)
    if dev.type == "cuda":
        ok = bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
        return ok, f"cuda: bf16 {'supported' if ok else 'not supported'} by {torch.cuda.get_device_name(dev) if ok else 'the GPU'}"
    if dev.type != "cpu":
        return False, f"{dev.type}: not known to run bf16 natively"
    cpu_ext = getattr(torch, "cpu", None)
    hw = any(bool(getattr(cpu_ext, f, lambda: False)()) for f in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"))
    return cpu_bf16_native(hw, torch.backends.cpu.get_cpu_capability(),
                           os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA"))


def cpu_bf16_native(hw: bool, cap: str, isa: str | None) -> tuple[bool, str]:
    """bf16_native's CPU rule on given facts (also for facts recorded elsewhere, e.g. a benchmark's
    json): hw, the CPU has AVX-512 BF16 or AMX; cap, torch's CPU capability; isa, oneDNN's ISA cap."""
    if not hw:
        return False, f"cpu: no AVX-512 BF16 / AMX instructions (torch capability {cap})"
    if not cap.startswith("AVX512"):
        return False, f"cpu: torch runs its {cap} kernels (ATEN_CPU_CAPABILITY), bf16 would be emulated"
    if isa and not isa.upper().startswith(_BF16_ISAS):
        return False, f"cpu: oneDNN capped at {isa} (ONEDNN_MAX_CPU_ISA), bf16 would be emulated"
    return True, f"cpu: AVX-512 BF16 (torch capability {cap})"


_ANNOUNCED: set = set()


def resolve_precision(requested: str, device="cpu", who: str = "") -> tuple[str, str]:
    """(precision to use, why): `requested` ("fp32" or "bf16"), with bf16 replaced by fp32 where
    bf16 is not native (bf16_native), so that a profile never runs slower than its fp32 version.
    Prints the choice once per process (per requester and outcome)."""
    if requested != "bf16":
        return requested, "as requested"
    native, why = bf16_native(device)
    used = "bf16" if native else "fp32"
    msg = f"{who + ': ' if who else ''}precision {used} ({'bf16 native' if native else 'bf16 requested, not native'}: {why})"
    if (who, used) not in _ANNOUNCED:
        _ANNOUNCED.add((who, used))
        print(msg, flush=True)
    return used, why
