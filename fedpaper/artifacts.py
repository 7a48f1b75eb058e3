"""The output contract, and the one call a notebook makes: `run_artifact`.

For an artifact id `paper/name`, `run_artifact` writes, atomically, into `<out>/<paper>/`:

- `<name>.png`, `<name>.pdf`  the figure (a table artifact draws its table),
- `<name>.csv`                the tidy numbers behind it: setting columns, then `method, metric,
                              mean, std` (+ `ci_low, ci_high, n_seeds` ...) where that applies, with
                              the column names of the paper's reported CSV where there is one,
- `<name>.json`               provenance (see `fedpaper.provenance`).

`<out>` is `figures/` for the quick and paper profiles and `cache_dir("smoke-figures")` for
smoke, which therefore never touches the committed figures. A paper module typically wraps it::

    def table1(*, profile="smoke", data_root=None, out_dir=None, seeds=None):
        params = {...settings of this profile...}
        return run_artifact("fedpals/table1", profile=profile, params=params,
                            compute=lambda p: _compute(p, data_root), draw=_draw,
                            datasets=["fashion-mnist", "cifar10", "pacs"],
                            optional_datasets=["pacs"], data_root=data_root,
                            out_dir=out_dir, seeds=seeds)

`compute(params) -> (table, info)`; `info` may hold `datasets` (list of dicts like
`ImageDataset.describe()`: name, source, lossy, synthetic), `seeds`, `device`, `notes` (list of
strings, e.g. shrinkage relative to the paper). `draw(table, params) -> matplotlib Figure`.
`params` reaches compute and draw as given, plus `profile`, `seeds` (resolved) and
`missing_datasets` (optional data sets that are absent) when not already set.
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import pandas as pd

from fedpaper import provenance as prov
from fedpaper.errors import BadParameterError, DataMissingError, UnknownNameError
from fedpaper.papers.catalog import (
    Claim,  # noqa: F401  (exported here too)
    dataset_available,
    dataset_info,
    get_artifact,
    missing_message,
    reported_path,
    _split_need,
)
from fedpaper.paths import cache_dir, data_root as _data_root, figures_dir
from fedpaper.store import atomic_path

PROFILES = ("smoke", "quick", "paper")
SUFFIXES = ("png", "pdf", "csv", "json")
SYNTHETIC_STAMP = "SYNTHETIC smoke data — not a result"

__all__ = ["PROFILES", "ArtifactResult", "Claim", "run_artifact", "check_profile", "output_paths",
           "committed_paths", "load_committed", "stamp_figure", "resolve_out_dir"]


@dataclass
class ArtifactResult:
    artifact_id: str
    table: pd.DataFrame
    figure: Any
    provenance: dict
    paths: dict = field(default_factory=dict)  # {"png": Path, "pdf": ..., "csv": ..., "json": ...}
    status: str = "regenerated"

    def __repr__(self):
        files = ", ".join(str(p) for p in self.paths.values())
        return f"ArtifactResult({self.artifact_id!r}, status={self.status!r}, files=[{files}])"


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise UnknownNameError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    return profile


def resolve_out_dir(profile: str, out_dir=None) -> Path:
    """smoke -> cache_dir('smoke-figures'); quick/paper -> figures_dir(); an explicit out_dir wins,
    except that smoke output may never go to the committed figures folder."""
    check_profile(profile)
    if out_dir is None:
        return cache_dir("smoke-figures") if profile == "smoke" else figures_dir()
    out = Path(out_dir).expanduser()
    if profile == "smoke" and _same_dir(out, figures_dir()):
        raise BadParameterError(
            f"out_dir={str(out)!r} is the committed figures folder; smoke output goes to a cache "
            "folder: leave out_dir=None or use --profile quick")
    return out


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def output_paths(artifact_id: str, out_dir) -> dict:
    art = get_artifact(artifact_id)
    base = Path(out_dir) / art.paper
    return {s: base / f"{art.name}.{s}" for s in SUFFIXES}


def committed_paths(artifact_id: str) -> dict:
    """Where the committed results of an artifact live (figures/<paper>/<name>.*)."""
    return output_paths(artifact_id, figures_dir())


def load_committed(artifact_id: str) -> tuple[Optional[pd.DataFrame], Optional[dict]]:
    """Our committed table and provenance for an artifact, (None, None) where absent/unreadable."""
    p = committed_paths(artifact_id)
    table = None
    if p["csv"].is_file():
        with contextlib.suppress(OSError, ValueError, pd.errors.ParserError):
            table = pd.read_csv(p["csv"])
    return table, prov.load(p["json"])


def _resolve_seeds(seeds, params: dict):
    s = seeds if seeds is not None else params.get("seeds")
    if s is None:
        return None
    if isinstance(s, int) and not isinstance(s, bool):
        if s < 1:
            raise BadParameterError(f"seeds={s} is out of range; give a number of seeds >= 1 or a list")
        return list(range(s))
    return [int(x) for x in s]


def stamp_figure(fig, text: str = SYNTHETIC_STAMP):
    """A visible diagonal watermark and a red banner, so the figure cannot pass for a result."""
    import math

    w, h = fig.get_size_inches()
    diag_pt = math.hypot(w, h) * 72
    size = max(8.0, min(28.0, 0.8 * diag_pt / (0.62 * len(text))))
    mark = fig.text(0.5, 0.5, text, transform=fig.transFigure, ha="center", va="center",
                    rotation=math.degrees(math.atan2(h, w)), rotation_mode="anchor", fontsize=size,
                    color="red", alpha=0.3, zorder=1000, fontweight="bold")
    mark.set_in_layout(False)  # never enlarges the saved (tight) bounding box
    fig.text(0.5, 1.0, text, transform=fig.transFigure, ha="center", va="bottom", fontsize=9,
             color="white", zorder=1001, bbox=dict(facecolor="red", edgecolor="none", pad=2))
    return fig


def _close(fig):
    with contextlib.suppress(Exception):
        import matplotlib.pyplot as plt

        plt.close(fig)


def _save_figure(fig, png: Path, pdf: Path):
    fig.savefig(png, format="png", dpi=150, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(pdf, format="pdf", bbox_inches="tight",
                metadata={"CreationDate": None, "ModDate": None, "Producer": None})


def _write_outputs(paths: dict, *, fig=None, table=None, record=None):
    """Write the given parts atomically: all temp files first, then rename; nothing on error."""
    with contextlib.ExitStack() as stack:
        tmp = {}
        wanted = [s for s, v in (("png", fig), ("pdf", fig), ("csv", table), ("json", record)) if v is not None]
        for s in wanted:
            tmp[s] = stack.enter_context(atomic_path(paths[s]))
        if fig is not None:
            _save_figure(fig, tmp["png"], tmp["pdf"])
        if table is not None:
            table.to_csv(tmp["csv"], index=False)
        if record is not None:
            tmp["json"].write_text(json.dumps(record, indent=2, sort_keys=False, ensure_ascii=False) + "\n",
                                   encoding="utf-8")


def _column_notes(artifact_id: str, table: pd.DataFrame) -> list[str]:
    rp = reported_path(artifact_id)
    notes = []
    if {"mean"} <= set(table.columns) and not {"method", "metric"} <= set(table.columns):
        notes.append("table has 'mean' but lacks 'method'/'metric' columns")
    if rp is not None and rp.is_file():
        cols = list(pd.read_csv(rp, nrows=0).columns)
        missing = [c for c in cols if c not in table.columns and c not in ("source",)]
        if missing:
            notes.append(f"columns of the reported csv missing from ours: {', '.join(missing)}")
    return notes


def _dataset_records(needed: Sequence[str], root: Path, info_datasets) -> list[dict]:
    """Catalog view (which copy) merged with what the loader reported (source, lossy, synthetic)."""
    given = info_datasets or []
    if isinstance(given, dict):
        given = [dict(v, name=v.get("name", k)) if isinstance(v, dict) else {"name": k, "source": v}
                 for k, v in given.items()]
    given = [prov.jsonable(g) if isinstance(g, dict) else prov.jsonable(getattr(g, "describe", lambda: {"name": str(g)})())
             for g in given]
    out = []
    seen = set()
    for need in needed:
        base, labels_only = _split_need(need)
        meta = dataset_info(base)
        rec = {"name": base, "labels_only": labels_only, "data_root": str(root),
               "available": dataset_available(need, root), "offline_copy_note": meta.copy_note}
        for g in given:
            if g.get("name") in (base, need):
                rec.update(g)
                rec["name"] = base
                seen.add(id(g))
        out.append(rec)
    out.extend(g for g in given if id(g) not in seen)
    return out


def run_artifact(artifact_id: str, *, profile: str, params: dict, compute: Callable,
                 draw: Callable, datasets: Sequence[str], data_root=None, out_dir=None,
                 seeds=None, optional_datasets: Sequence[str] = ()) -> ArtifactResult:
    """Compute (or re-render) one artifact and write its four files. See the module docstring.

    `datasets`: the data sets the artifact needs ("none" for none; "voc2007:labels" for labels
    only). `optional_datasets`: a subset whose absence still lets the artifact be regenerated in
    part (compute sees them in params["missing_datasets"] and leaves their rows out).
    """
    art = get_artifact(artifact_id)
    check_profile(profile)
    if not callable(compute) or not callable(draw):
        raise BadParameterError("compute and draw must be callables: compute(params) -> (table, info), "
                                "draw(table, params) -> Figure")
    datasets = list(datasets)
    for d in list(datasets) + list(optional_datasets):
        if d != "none":
            dataset_info(d)  # validates the name
    unknown_opt = [d for d in optional_datasets if d not in datasets]
    if unknown_opt:
        raise BadParameterError(f"optional_datasets {unknown_opt} must also be listed in datasets")
    out = resolve_out_dir(profile, out_dir)
    root = _data_root(data_root)
    paths = output_paths(artifact_id, out)
    params = dict(params)
    resolved_seeds = _resolve_seeds(seeds, params)
    params.setdefault("profile", profile)
    if resolved_seeds is not None:
        params["seeds"] = resolved_seeds

    needed = [d for d in datasets if d != "none"]
    missing = [d for d in needed if not dataset_available(d, root)]
    missing_required = [d for d in missing if d not in optional_datasets]
    if profile != "smoke" and missing_required:
        return _rerender_or_fail(art, profile, params, draw, missing_required, root, paths)
    params.setdefault("missing_datasets", [] if profile == "smoke" else missing)

    t0 = time.perf_counter()
    result = compute(params)
    wall = time.perf_counter() - t0
    try:
        table, info = result
    except (TypeError, ValueError):
        raise BadParameterError("compute(params) must return (table: DataFrame, info: dict)") from None
    if not isinstance(table, pd.DataFrame):
        raise BadParameterError(f"compute(params) returned a {type(table).__name__} as table; "
                                "return a pandas DataFrame")
    info = dict(info or {})
    ds_records = _dataset_records(needed, root, info.get("datasets"))
    synthetic = profile == "smoke" or any(d.get("synthetic") for d in ds_records)
    notes = list(info.get("notes") or [])
    if isinstance(info.get("notes"), str):
        notes = [info["notes"]]
    notes += _column_notes(artifact_id, table)

    if profile == "smoke":
        status = "regenerated at smoke profile (synthetic/tiny stand-in; not a result)"
    elif synthetic:
        status = "regenerated on SYNTHETIC stand-in data (not a result)"
    elif profile != "smoke" and missing:
        status = f"regenerated without {', '.join(missing)} (missing)"
    else:
        status = "regenerated"
    lossy = [d["name"] for d in ds_records if d.get("lossy")]

    fig = draw(table, params)
    try:
        if synthetic:
            stamp_figure(fig)
        record = prov.collect(
            artifact_id=artifact_id, profile=profile, params=params, datasets=ds_records,
            seeds=info.get("seeds", resolved_seeds), device=info.get("device"), wall_time_s=wall,
            notes=notes,
            extra={"paper": art.paper, "title": art.title, "status": status, "synthetic": synthetic,
                   "stamped": synthetic, "lossy_datasets": lossy, "methods": prov.table_methods(table),
                   "missing_datasets": missing if profile != "smoke" else [],
                   "info": {k: v for k, v in info.items() if k not in ("datasets", "notes", "seeds", "device")}},
        )
        _write_outputs(paths, fig=fig, table=table, record=record)
    finally:
        _close(fig)
    return ArtifactResult(artifact_id, table, fig, record, paths, status)


def _rerender_or_fail(art, profile, params, draw, missing, root, paths) -> ArtifactResult:
    """A needed data set is missing: re-render from the committed csv, or raise DataMissingError."""
    committed = committed_paths(art.id)
    table, committed_record = load_committed(art.id)
    if table is None:
        msg = missing_message(missing[0], root)
        more = f" (also missing: {', '.join(missing[1:])})" if len(missing) > 1 else ""
        raise DataMissingError(f"{art.id}: {msg}{more}; no committed results at {committed['csv']} "
                               "to re-render from")
    status = f"re-rendered from committed results; {', '.join(missing)} missing"
    record = dict(committed_record or {"note": "committed csv had no provenance json"})
    record["rerendered"] = {"status": status, "profile": profile, "timestamp": prov.now_iso(),
                            "git": prov.git_info(), "command": prov.command_line(),
                            "missing_datasets": missing, "data_root": str(root)}
    params = dict(params, missing_datasets=list(missing))
    fig = draw(table, params)
    try:
        if (committed_record or {}).get("synthetic"):
            stamp_figure(fig)
        in_place = _same_dir(paths["csv"].parent, committed["csv"].parent)
        # In place, the committed csv and json stay byte-identical (they still describe the run
        # that made the numbers); only the png/pdf are redrawn. Elsewhere, all four are written.
        _write_outputs(paths, fig=fig, table=None if in_place else table,
                       record=None if in_place else prov.jsonable(record))
    finally:
        _close(fig)
    return ArtifactResult(art.id, table, fig, record, paths, status)
