"""Provenance of an artifact: code version, parameters, data, seeds, device, libraries, timing.

`staleness` says whether a committed artifact was made by the code of this checkout: its record's
"code_version" (the syntax-tree version of its paper's code, fedpaper.runs.versions; a text-scheme
one mapped through fedpaper.runs.version_map), or, for a record made before it was written, the
version of the commit it names (the version map's commit table).

Everything here works without git (commit None) and without torch imported (device from the
caller). `collect()` returns a JSON-able dict; `jsonable()` turns numpy/pandas/Path values into
plain JSON types.
"""
from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from fedpaper.blocks.data.download import copy_kind
from fedpaper.blocks.data.registry import DATASETS
from fedpaper.ground.jsonio import jsonable, now_iso
from fedpaper.ground.paths import REPO_ROOT
from fedpaper.runs.version_map import commit_version, to_new_scheme
from fedpaper.runs.versions import SCHEME, code_version, known_papers

LIBRARIES = ("python", "torch", "torchvision", "numpy", "cvxpy", "pandas", "scipy", "matplotlib", "fedpaper")


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_info() -> dict:
    """{'commit': sha or None, 'dirty': bool or None}. Dirty counts tracked changes only, outside
    figures/ (a reproduce run rewrites figures/ as it goes; those files are its output, not its code),
    and not a notebook whose cell sources are unchanged (outputs are not code)."""
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)figures")
    if status is None:
        return {"commit": commit, "dirty": None}
    changed = [line.split(maxsplit=1)[1].strip('"') for line in status.splitlines() if line.strip()]
    return {"commit": commit, "dirty": any(not _only_outputs_changed(p) for p in changed)}


def _cell_sources(text: str) -> list | None:
    """(cell type, source) of every cell of a notebook's JSON text; None if it is not one."""
    import json

    try:
        cells = json.loads(text).get("cells", [])
        return [(c.get("cell_type"), "".join(c.get("source") or "")) for c in cells]
    except (ValueError, AttributeError, TypeError):
        return None


def _only_outputs_changed(path: str) -> bool:
    """True for a notebook whose cells' sources equal the committed ones (only outputs, execution
    counts or metadata differ, e.g. after JupyterLab's autosave): not a code change."""
    if not path.endswith(".ipynb") or " -> " in path:
        return False
    try:
        now = _cell_sources((REPO_ROOT / path).read_text(encoding="utf-8"))
    except OSError:
        return False
    committed = _git("show", f"HEAD:{path}")
    return now is not None and committed is not None and now == _cell_sources(committed)


@lru_cache(maxsize=None)
def library_versions() -> dict:
    versions = {"python": platform.python_version()}
    for lib in LIBRARIES[1:]:
        try:
            versions[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            versions[lib] = None
    return versions


def device_description(device=None) -> str:
    """The device a run used, naming the card for CUDA ("cuda (NVIDIA H100 80GB HBM3)"): the device
    string given by the run, else what torch (if already imported) would use."""
    torch = sys.modules.get("torch")
    if device is not None and not str(device).startswith("cuda"):
        return str(device)
    if torch is not None:
        try:
            if torch.cuda.is_available():
                index = torch.device(str(device)).index if device is not None else None
                return f"{device or 'cuda'} ({torch.cuda.get_device_name(index or 0)})"
        except Exception:  # pragma: no cover - broken driver
            pass
    return "cpu" if device is None else str(device)


def _cpuinfo(*fields: str) -> str | None:
    """The first of `fields` (lower case) in Linux /proc/cpuinfo, else platform.processor(), or None."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith(fields) and ":" in line:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


@lru_cache(maxsize=None)
def cpu_model() -> str | None:
    """The CPU's model name (Linux /proc/cpuinfo, else platform.processor()), or None."""
    return _cpuinfo("model name", "hardware", "cpu model")


@lru_cache(maxsize=None)
def cpu_vendor() -> str | None:
    """The CPU's vendor (GenuineIntel, AuthenticAMD; else platform.processor()), or None: bitwise results
    can differ between vendors at the same torch and CPU capability (MKL and oneDNN take vendor paths)."""
    return _cpuinfo("vendor_id")


def machine_description() -> dict:
    """Platform, CPU model and count, and torch's intra-op thread count (None when torch is not
    imported): results computed on a CPU can depend on both (float summation order)."""
    torch = sys.modules.get("torch")
    return {"platform": platform.platform(), "cpu_model": cpu_model(), "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads() if torch is not None else None}


def table_methods(table) -> list[str] | None:
    """The methods a results table holds (its `method` column), None if it has none."""
    if table is None or "method" not in table:
        return None
    return sorted({str(m) for m in table["method"]})


def table_mismatches(table, rec: dict) -> list[str]:
    """Where a provenance record contradicts its results table: seeds (seed_mismatches), the
    methods it lists, and a profile that differs from its params' profile. [] if none."""
    out = seed_mismatches(table, rec)
    if "methods" in rec and rec["methods"] != table_methods(table):
        out.append(f"provenance lists methods {rec['methods']} but the table holds {table_methods(table)}")
    params_profile = (rec.get("params") or {}).get("profile")
    if params_profile is not None and params_profile != rec.get("profile"):
        out.append(f"profile {rec.get('profile')!r} but params say {params_profile!r}")
    return out


def seed_mismatches(table, rec: dict) -> list[str]:
    """What a results table says about its seeds that its provenance record contradicts: more seeds
    in an `n_seeds` column, or more `per_seed` entries, than the record's `seeds` lists. [] if none."""
    seeds = rec.get("seeds")
    if not isinstance(seeds, list) or table is None:
        return []
    out = []
    if "n_seeds" in table and len(table) and int(table["n_seeds"].max()) > len(seeds):
        out.append(f"n_seeds up to {int(table['n_seeds'].max())} but provenance lists {len(seeds)} seeds {seeds}")
    if "per_seed" in table and len(table):
        most = max(len(str(v).split(";")) for v in table["per_seed"])
        if most > len(seeds):
            out.append(f"per_seed holds up to {most} values but provenance lists {len(seeds)} seeds {seeds}")
    return out


def command_line() -> str:
    """The command that produced the artifact (FEDPAPER_COMMAND, set by the CLI, wins)."""
    cmd = os.environ.get("FEDPAPER_COMMAND")
    if cmd:
        return cmd
    argv = sys.argv or [""]
    if "ipykernel" in argv[0] or "ipykernel_launcher" in " ".join(argv):
        return "interactive notebook kernel"
    return " ".join(shlex.quote(a) for a in argv)


def dataset_copies(datasets, profile: str | None = None) -> list:
    """The data-set records, each that names its data root with `copy`: which copy the result used.

    `copy` is "original download" (fetched by fedpaper from the source), "offline copy" or "own
    copy" (fedpaper.blocks.data.download.copy_kind); `replaces_lossy_offline_copy` is True when a result
    comes from an original where the project's offline copy is lossy (CIFAR, DermaMNIST).
    Smoke runs use stand-ins, so their records are left as they are.
    """
    out = list(datasets or [])
    if profile == "smoke":
        return out
    for i, d in enumerate(out):
        if not (isinstance(d, dict) and d.get("name") in DATASETS and d.get("data_root")):
            continue
        if d.get("synthetic") or d.get("available") is False:
            continue
        d = out[i] = dict(d)
        d.setdefault("copy", copy_kind(d["name"], d["data_root"]))
        if d["copy"] != "offline copy" and DATASETS[d["name"]].lossy_offline:
            d.setdefault("replaces_lossy_offline_copy", True)
    return out


def collect(*, artifact_id: str, profile: str, params: dict, datasets: list, seeds, device=None,
            wall_time_s: float | None = None, notes=None, extra: dict | None = None) -> dict:
    """The provenance record written next to an artifact as <name>.json."""
    rec = {
        "artifact_id": artifact_id,
        "profile": profile,
        "git": git_info(),
        "params": jsonable(params),
        "datasets": jsonable(dataset_copies(datasets, profile)),
        "seeds": jsonable(seeds),
        "device": device_description(device),
        "machine": machine_description(),
        "libraries": library_versions(),
        "wall_time_s": None if wall_time_s is None else round(float(wall_time_s), 3),
        "timestamp": now_iso(),
        "command": command_line(),
        "code_version": artifact_code_version(artifact_id),
        "code_scheme": SCHEME,
        "notes": jsonable(list(notes) if isinstance(notes, (list, tuple)) else ([notes] if notes else [])),
    }
    if extra:
        rec.update(jsonable(extra))
    return rec


def _paper_of(artifact_id: str | None) -> str | None:
    paper = str(artifact_id or "").split("/", 1)[0]
    return paper if paper in known_papers() else None


def artifact_code_version(artifact_id: str | None) -> str:
    """The code version an artifact's runs are keyed by: "core+paper" of its paper (runs.versions)."""
    return code_version(_paper_of(artifact_id))


def recorded_code_version(rec: dict) -> tuple[str | None, str]:
    """(the syntax-tree code version a provenance record says its artifact was made by, how it is
    known): its "code_version" ("recorded"; a text-scheme one "mapped" through the version map),
    else its commit's version ("commit"; "commit, uncommitted changes" when the tree was dirty);
    (None, why) when none can be told."""
    paper = rec.get("paper") or _paper_of(rec.get("artifact_id"))
    recorded = rec.get("code_version")
    if recorded:
        if rec.get("code_scheme") == SCHEME:
            return recorded, "recorded"
        mapped = to_new_scheme(recorded, paper)
        return (mapped, "mapped") if mapped else (None, f"text-scheme version {recorded} not in the version map")
    git = rec.get("git") or {}
    version = commit_version(git.get("commit"), paper)
    if version is None:
        return None, f"commit {str(git.get('commit'))[:10]} not in the version map"
    return version, "commit, uncommitted changes" if git.get("dirty") else "commit"


def staleness(rec: dict, current: str | None = None) -> str | None:
    """None when a committed artifact was made by this checkout's code (`current`, default its
    paper's code_version), else one short mark: "stale: made by <version>" (a version made from a
    dirty tree counts as stale: its code is not known), or "code version not known (<why>)"."""
    version, how = recorded_code_version(rec)
    if version is None:
        return f"code version not known ({how})"
    current = current if current is not None else artifact_code_version(rec.get("paper") or rec.get("artifact_id"))
    if version == current and how != "commit, uncommitted changes":
        return None
    short = "+".join(part[:8] for part in version.split("+"))
    return f"stale: made by {short}" + (" with uncommitted changes" if how == "commit, uncommitted changes" else "")


def compute_record(results) -> dict:
    """What the runs behind an artifact cost, from their results' engine logs (experiment._result):
    runs, training samples, and the engine's wall and process-CPU seconds (evaluation included),
    each engine call's samples and seconds split evenly over the runs it trained ("runs" in its log;
    a log without it counts as one run per call, as the FedPALS sweep on CPU trains). Summed
    over every run, so it is the compute of a sweep made in pieces, not of the last piece; a run
    whose log predates "cpu_seconds" counts in "runs_without_cpu_seconds"."""
    out = {"runs": 0, "training_samples": 0, "train_wall_s": 0.0, "train_cpu_s": 0.0, "runs_without_cpu_seconds": 0,
           "devices": [], "backends": []}
    for r in results:
        log = (r or {}).get("log") or {}
        share = max(1, int(log.get("runs") or 1))
        out["runs"] += 1
        out["training_samples"] += int(log.get("samples") or 0) // share
        out["train_wall_s"] += float(log.get("train_seconds") or 0.0) / share
        if log.get("cpu_seconds") is None:
            out["runs_without_cpu_seconds"] += 1
        else:
            out["train_cpu_s"] += float(log["cpu_seconds"]) / share
        for k, key in (("devices", "device"), ("backends", "backend")):
            if log.get(key) and log[key] not in out[k]:
                out[k].append(log[key])
    out["train_wall_s"], out["train_cpu_s"] = round(out["train_wall_s"], 1), round(out["train_cpu_s"], 1)
    return out


def summary(rec: dict) -> str:
    """One line for the report: profile, device, commit, seeds, data flags."""
    git = rec.get("git") or {}
    commit = (git.get("commit") or "no git")[:10] + (" (dirty)" if git.get("dirty") else "")
    seeds = rec.get("seeds")
    n = len(seeds) if isinstance(seeds, list) else seeds
    flags = []
    for d in rec.get("datasets") or []:
        if isinstance(d, dict):
            tag = d.get("name", "?")
            if d.get("synthetic"):
                tag += " SYNTHETIC"
            if d.get("lossy"):
                tag += " lossy"
            if d.get("copy") == "original download":
                tag += " original download"
                if d.get("replaces_lossy_offline_copy"):
                    tag += " (replaces the lossy offline copy)"
            flags.append(tag)
    parts = [f"profile {rec.get('profile')}", f"device {rec.get('device')}", f"commit {commit}",
             f"seeds {n}"]
    if flags:
        parts.append("data " + ", ".join(flags))
    if rec.get("wall_time_s") is not None:
        parts.append(f"{rec['wall_time_s']:.0f} s")
    if runs_text(rec):
        parts.append(runs_text(rec))
    return "; ".join(parts)


def runs_text(rec: dict) -> str:
    """"3 computed, 591 of 594 runs from the cache" (the pipeline's `runs` count), or "" without runs."""
    runs = rec.get("runs") or {}
    if not runs.get("runs"):
        return ""
    return f"{runs['computed']} computed, {runs['from_cache']} of {runs['runs']} runs from the cache"


def load(path: str | os.PathLike) -> dict | None:
    """A provenance json, or None if absent or unreadable."""
    import json

    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
