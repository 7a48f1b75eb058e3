"""What machine a benchmark ran on: CPU, memory, Python/torch threading (and, for the engine
benchmark, the FL frameworks' versions). Shared by bench_engine.py and roofline.py."""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


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
        "avx512": "avx512f" in lscpu.get("Flags", ""),
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
    """One line: model, family, cores, hypervisor, AVX-512, RAM."""
    return (f"{m['cpu_model']} ({m['cpu_family_model']}), {m['nproc']} cores visible (`nproc`), hypervisor "
            f"{m['hypervisor']}, AVX-512 {'yes' if m['avx512'] else 'no'}; RAM {m['ram_gib']} GiB")


def loadavg() -> list:
    return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]
