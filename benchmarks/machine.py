"""What machine a benchmark ran on: CPU, memory, Python/torch threading (and, for the engine
benchmark, the FL frameworks' versions). Shared by bench_engine.py and roofline.py."""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

# The instruction-set flags that decide which kernels oneDNN / ATen pick (lscpu "Flags"), in this order.
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx_vnni",
             "amx_tile", "amx_bf16", "amx_int8")
# Environment variables that cap the ISA oneDNN and ATen use: the AVX2 path on an AVX-512 CPU.
AVX2_EMULATION_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}


def _sh(cmd: str) -> str:
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


def machine(frameworks: bool = True) -> dict:
    """lscpu/meminfo/torch facts; with `frameworks`, also the flwr and ray versions."""
    import torch

    lscpu = {k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in _sh("lscpu").splitlines() if ":" in ln)}
    mem = next((ln.split()[1] for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")), "0")
    out = {
        "nproc": os.cpu_count(),
        "cpu_model": lscpu.get("Model name", platform.processor()),
        "cpu_family_model": f"family {lscpu.get('CPU family', '?')} model {lscpu.get('Model', '?')}",
        "hypervisor": lscpu.get("Hypervisor vendor", "none"),
        "avx512": "avx512f" in lscpu.get("Flags", "").split(),
        "cpu_flags": [f for f in ISA_FLAGS if f in lscpu.get("Flags", "").split()],
        "ram_gib": round(int(mem) / 2**20, 1),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "torch_parallel": [ln for ln in torch.__config__.parallel_info().splitlines()
                           if ln.startswith(("ATen parallel backend", "MKL", "MKLDNN", "OpenMP"))],
        "gpu": "none (no GPU in this session)" if not torch.cuda.is_available() else torch.cuda.get_device_name(0),
        "kernel": platform.release(),
    }
    if frameworks:
        try:
            import flwr
            import ray

            out["flwr"], out["ray"] = flwr.__version__, ray.__version__
        except Exception as exc:  # noqa: BLE001
            out["flwr"] = f"not importable: {type(exc).__name__}: {exc}"
    return out


def cpu_line(m: dict) -> str:
    """One line: model, family, cores, hypervisor, AVX-512, ISA flags (where recorded), RAM."""
    flags = f"; flags {' '.join(m['cpu_flags']) or 'none of ' + ' '.join(ISA_FLAGS)}" if "cpu_flags" in m else ""
    return (f"{m['cpu_model']} ({m['cpu_family_model']}), {m['nproc']} cores visible (`nproc`), hypervisor "
            f"{m['hypervisor']}, AVX-512 {'yes' if m['avx512'] else 'no'}{flags}; RAM {m['ram_gib']} GiB")


def isa_line(m: dict, env: dict | None, capabilities=()) -> str:
    """What instruction set the measured processes were allowed: the CPU's own, or capped by `env`
    (ONEDNN_MAX_CPU_ISA / ATEN_CPU_CAPABILITY as set for them); `capabilities`: what torch reported
    (torch.backends.cpu.get_cpu_capability()) in those processes."""
    seen = f"; torch CPU capability in the processes: {', '.join(sorted(set(capabilities)))}" if capabilities else ""
    if env is None:
        return f"ISA: not recorded by this run (ONEDNN_MAX_CPU_ISA / ATEN_CPU_CAPABILITY unknown){seen}"
    caps = {k: v for k, v in env.items() if k in AVX2_EMULATION_ENV}
    if not caps:
        return f"ISA: the CPU's own (no ONEDNN_MAX_CPU_ISA / ATEN_CPU_CAPABILITY set){seen}"
    set_ = " ".join(f"{k}={v}" for k, v in sorted(caps.items()))
    if caps == AVX2_EMULATION_ENV and m.get("avx512"):
        return f"**AVX2 emulated on {m['cpu_model']}** (an AVX-512 CPU): {set_} in every contender process{seen}"
    return f"ISA capped: {set_} in every contender process (CPU AVX-512: {'yes' if m.get('avx512') else 'no'}){seen}"


def loadavg() -> list:
    return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]


def run_line(m: dict) -> str:
    """A study's second header line: the CPU, torch and its threads, OMP_NUM_THREADS and the load."""
    import torch

    return (f"# CPU: {cpu_line(m)}; torch {torch.__version__}, {torch.get_num_threads()} thread(s); "
            f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; load before {loadavg()}")
