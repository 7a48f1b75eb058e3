"""CPU facts for the batched engine: allocator tuning (glibc malloc thresholds) and whether bf16
runs natively here (the precision a profile may use)."""
from __future__ import annotations

import ctypes
import os
import sys

import torch

_IN_FORCE = None  # the (trim, mmap) thresholds this process set last (None: glibc's own)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: (trim, mmap) thresholds of an engine call on Linux/glibc: blocks under 1 GiB come from the heap
#: and freed memory stays there, so a step reuses the previous step's activation buffers instead of
#: mmapping fresh ones and page-faulting them in (glibc's defaults mmap blocks over 128 KiB to
#: 32 MiB, and the kernel zero-fills every page of each fresh mmap).
RAISED_THRESHOLDS = (1 << 30, 1 << 30)
#: (trim, mmap) thresholds of an engine call whose rounds train their clients in parts (their stacked
#: parameter copies exceed memory.SLOT_BYTES: FedMT Fig. 2c's 40 and 80 ResNet-18 clients): every
#: buffer over 4 MiB is mmapped and goes back to the OS when freed, so that the parts' parameter copies,
#: freed and made again part after part, cannot fragment the heap and grow it within the call.
PARTS_THRESHOLDS = (8 << 20, 4 << 20)
#: A training step whose saved-for-backward activations (memory.StepMemory.activations at the batch
#: size) reach this is large (the paper profile's 224 px ResNet-18 of FedNCA-ML, ~21 MiB per sample):
#: its engine call hands its heap back to the OS when it ends (release_freed_memory), so that the
#: heap's peak of one run is not kept, fragmented, for the next. The CPU profiles' steps stay below:
#: LeNet (44 KiB per sample), the privlabels CNN (534 KiB), the FedNCA-ML convnet (339 KiB), FedMT's
#: CIFAR ResNet-18 (4.5 MiB x batch 10).
LARGE_STEP_BYTES = 256 * 2**20
#: A model whose parameters take at least this many bytes (FedMT's and FedNCA-ML's ResNet-18: 45 MB)
#: also counts as a large step (allocator_bytes), whatever its step's activations: each client slot
#: holds several parameter-sized copies of it, which the release hands back after the call. The CPU
#: profiles' models stay far below (LeNet 0.25 MB, the privlabels CNN, the small ResNet and
#: FedNCA-ML's convnet a few MB).
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
    """The step size the allocator rule (large_step) sees for an engine call: its step's saved
    activations, raised to LARGE_STEP_BYTES when its rounds train in parts (GBs of stacked parameter
    copies: FedMT Fig. 2c's 80 ResNet-18 clients) or its model has at least LARGE_PARAM_BYTES of
    parameters, so that the memory of its clients' parameter copies goes back to the OS after the
    call (release_freed_memory)."""
    if in_parts or param_bytes >= LARGE_PARAM_BYTES:
        return max(step_bytes or 0, LARGE_STEP_BYTES)
    return step_bytes


def allocator_tuned() -> bool:
    """Whether engine calls set malloc thresholds of the engine's (_tune_cpu_allocator): on Linux
    unless FEDPAPER_MALLOC_TUNING=0."""
    return os.environ.get("FEDPAPER_MALLOC_TUNING", "1") != "0" and sys.platform.startswith("linux")


def _tune_cpu_allocator(in_parts: bool = False):
    """glibc only, per engine call: PARTS_THRESHOLDS when its rounds train their clients in parts,
    else RAISED_THRESHOLDS (M_TRIM_THRESHOLD and M_MMAP_THRESHOLD), set when they are not in force
    already. RAISED_THRESHOLDS keep activation buffers in the heap: otherwise every training step
    returns them to the OS and page-faults them back in, which costs a large part of a step, for the
    small CNNs of the CPU profiles as for the 224 px ResNet-18 of the paper profile. The process keeps
    its peak heap within an engine call; an engine call with a large step hands it back when it ends
    (release_freed_memory, called by trainer.train). Results are unchanged either way.
    FEDPAPER_MALLOC_TUNING=0 disables it."""
    global _IN_FORCE
    want = PARTS_THRESHOLDS if in_parts else RAISED_THRESHOLDS
    if allocator_tuned() and _IN_FORCE != want and _mallopt(*want):
        _IN_FORCE = want


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
