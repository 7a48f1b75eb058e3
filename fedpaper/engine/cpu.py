"""CPU facts for the batched engine: allocator tuning (glibc malloc thresholds) and whether bf16
runs natively here (the precision a profile may use)."""
from __future__ import annotations

import ctypes
import os
import sys

import torch

_ALLOCATOR_TUNED = False


def _tune_cpu_allocator():
    """glibc only, once per process: keep freed memory in the heap (M_TRIM_THRESHOLD, and
    M_MMAP_THRESHOLD so that large activation buffers come from the heap, not fresh mmaps).
    Otherwise every training step returns its activation buffers to the OS and page-faults them
    back in, which costs up to ~40% of a step for small CNNs on CPU. The process keeps its peak
    heap instead. Results are unchanged. FEDPAPER_MALLOC_TUNING=0 disables it."""
    global _ALLOCATOR_TUNED
    if _ALLOCATOR_TUNED or os.environ.get("FEDPAPER_MALLOC_TUNING", "1") == "0" or not sys.platform.startswith("linux"):
        return
    _ALLOCATOR_TUNED = True
    try:
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)
        if not libc.mallopt(M_MMAP_THRESHOLD, 1 << 30):
            libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)  # the largest value some glibc versions accept
    except (OSError, AttributeError):  # not glibc (musl, ...): nothing to tune
        pass


# oneDNN ISA caps (ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA) that still include native bf16 instructions
_BF16_ISAS = ("AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX512_CORE_AMX", "AVX10", "ALL", "DEFAULT")


def bf16_native(device="cpu") -> tuple[bool, str]:
    """(native, why): does bf16 autocast run on this machine's own bf16 instructions?

    CUDA: torch.cuda.is_bf16_supported(). CPU: only when the CPU has AVX-512 BF16 (or AMX) AND
    torch runs its AVX-512 kernels (torch.backends.cpu.get_cpu_capability(), which follows
    ATEN_CPU_CAPABILITY) AND oneDNN is not capped below its bf16 ISA (ONEDNN_MAX_CPU_ISA). Elsewhere
    bf16 is emulated and several times slower than fp32 (benchmarks/results/precision.md: 6-16x on
    AVX2). A rule on reported facts, not a timing, so that the choice (and the results key it
    enters) is the same on every run on one machine."""
    dev = torch.device(device)
    if dev.type == "cuda":
        ok = bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
        return ok, f"cuda: bf16 {'supported' if ok else 'not supported'} by {torch.cuda.get_device_name(dev) if ok else 'the GPU'}"
    if dev.type != "cpu":
        return False, f"{dev.type}: not known to run bf16 natively"
    cap = torch.backends.cpu.get_cpu_capability()
    cpu_ext = getattr(torch, "cpu", None)
    hw = any(bool(getattr(cpu_ext, f, lambda: False)()) for f in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"))
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
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
