"""The output contract, and the one call a notebook makes: `run_artifact`.

For an artifact id `paper/name`, `run_artifact` writes, atomically, into `<out>/<paper>/`:

- `<name>.png`, `<name>.pdf`  the figure (a table artifact draws its table),
- `<name>.csv`                the tidy numbers behind it: setting columns, then `method, metric,
                              mean, std` (+ `ci_low, ci_high, n_seeds` ...) where that applies, with
                              the column names of the paper's reported CSV where there is one,
- `<name>.json`               provenance (see `fedpaper.runs.provenance`).

`<out>` is `figures/` for the quick profile, `figures/long/` and `figures/paper/` for the long and
paper profiles (so a quick run never overwrites committed long results), and
`cache_dir("smoke-figures")` for smoke, which therefore never touches the committed figures. A paper module typically wraps it::

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
import contextvars
import copy
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import pandas as pd

from fedpaper.outputs import parameters as _parameters
from fedpaper.outputs.parameters import FAITHFUL_ORDER, check_profile
from fedpaper.runs import provenance as prov
from fedpaper.ground.errors import BadParameterError, DataMissingError
from fedpaper.blocks.data.registry import dataset_available, dataset_info, missing_message, split_need
from fedpaper.papers import claims
from fedpaper.papers._common import check_claims
from fedpaper.papers.catalog import (
    DRAWS_DATA,
    Claim,  # noqa: F401  (exported here too)
    get_artifact,
    reported_path,
)
from fedpaper.ground.paths import cache_dir, data_root as _data_root, dry_run_scratch, figures_dir, unwritable_reason
from fedpaper.ground.progress import warnings_once
from fedpaper.ground.files import atomic_path
from fedpaper.runs.sweep import BAR_PREFIX, SWEEP_OWNER
from fedpaper.runs.store import spec_json

SUFFIXES = ("png", "pdf", "csv", "json")
SYNTHETIC_STAMP = "SYNTHETIC smoke data — not a result"
#: `fedpaper reproduce` names a file here; every run_artifact call (in the notebook kernels, which
#: inherit the environment) appends one JSON line: artifact, kind ("regenerated" | "rerendered"), status.
STATUS_FILE_ENV = "FEDPAPER_STATUS_FILE"
#: Set (to 1) by `fedpaper reproduce --rerender`: see rerender_requested.
RERENDER_ENV = "FEDPAPER_RERENDER"
#: While set (by `fedpaper plan`, fedpaper.plan), run_artifact hands `hook(artifact_id, compute,
#: params, missing_datasets)` the artifact instead of computing, drawing and writing it, and returns
#: what the hook returns: nothing is written, data sets may be absent.
COMPUTE_HOOK: "contextvars.ContextVar[Optional[Callable]]" = contextvars.ContextVar("fedpaper_compute_hook",
                                                                                      default=None)

__all__ = ["ArtifactResult", "Claim", "run_artifact", "output_paths", "committed_paths", "committed_profile",
           "load_committed", "profile_figures_dir", "stamp_figure", "resolve_out_dir", "exploration_dir"]


@dataclass
class ArtifactResult:
    artifact_id: str
    table: pd.DataFrame
    figure: Any
    provenance: dict
    paths: dict = field(default_factory=dict)  # {"png": Path, "pdf": ..., "csv": ..., "json": ...}
    status: str = "regenerated"

    @property
    def exploration(self) -> Optional[dict]:
        """What an exploration run changed (its provenance's `exploration`), None for a profile run."""
        return (self.provenance or {}).get("exploration")

    def __repr__(self):
        files = ", ".join(str(p) for p in self.paths.values())
        return f"ArtifactResult({self.artifact_id!r}, status={self.status!r}, files=[{files}])"


def profile_figures_dir(profile: str) -> Path:
    """Where a profile's committed results live: figures/ (quick), figures/<profile>/ (long, paper)."""
    check_profile(profile)
    if profile == "smoke":
        raise BadParameterError("smoke results are never committed; use profile quick, long or paper")
    return figures_dir() if profile == "quick" else figures_dir() / profile


def resolve_out_dir(profile: str, out_dir=None) -> Path:
    """smoke -> cache_dir('smoke-figures'); quick -> figures/; long/paper -> figures/<profile>/; an
    explicit out_dir wins, except that smoke output may never go to a committed figures folder.
    The folder is checked before any run (check_output_folder): nothing is trained for nothing."""
    check_profile(profile)
    if out_dir is None:
        out = cache_dir("smoke-figures") if profile == "smoke" else profile_figures_dir(profile)
        return check_output_folder(out, "out_dir" if profile == "smoke" else "the figures folder")
    out = Path(out_dir).expanduser()
    if profile == "smoke" and any(_same_dir(out, profile_figures_dir(p)) for p in FAITHFUL_ORDER):
        raise BadParameterError(
            f"out_dir={str(out)!r} is the committed figures folder; smoke output goes to a cache "
            "folder: leave out_dir=None or use --profile quick")
    return check_output_folder(out, "out_dir")


def check_output_folder(out: Path, what: str) -> Path:
    """`out`, or one BadParameterError line naming the folder and the fix when results cannot be
    written there (paths.unwritable_reason): raised before any training, in notebooks and the CLI
    alike (the CLI exits 2)."""
    why = unwritable_reason(out)
    if why:
        raise BadParameterError(f"cannot write results to {what} {str(out)!r}: {why}; free space or fix its "
                                "permissions, or pass another folder (out_dir= in a notebook, --out-dir on the CLI)")
    return out


def exploration_dir(profile: str, changes: dict) -> Path:
    """The scratch folder of an exploration run: cache/explore/<profile>/<hash of the changes>/."""
    import hashlib


    digest = hashlib.sha256(spec_json(changes).encode()).hexdigest()[:10]
    return cache_dir("explore", profile, digest)


def stamp_exploration(fig, changes: str, above_banner: bool = False, dry_run: bool = False):
    """A one-line subtitle above the figure saying what this exploration (or dry run) changed."""
    h = fig.get_size_inches()[1]
    y = 1.0 + (18.0 / (72.0 * h) if above_banner else 0.0)
    text = (f"DRY RUN of the paper profile (cut: {changes}); not a result" if dry_run
            else f"EXPLORATION (changed: {changes}); not the profile's result")
    fig.text(0.5, y, text, transform=fig.transFigure,
             ha="center", va="bottom", fontsize=8, color="white", zorder=1001,
             bbox=dict(facecolor="tab:blue", edgecolor="none", pad=2))
    return fig


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def output_paths(artifact_id: str, out_dir) -> dict:
    art = get_artifact(artifact_id)
    base = Path(out_dir) / art.paper
    return {s: base / f"{art.name}.{s}" for s in SUFFIXES}


def committed_profile(artifact_id: str) -> Optional[str]:
    """The most faithful profile (paper, long, quick) with a committed csv of the artifact, or None."""
    for profile in FAITHFUL_ORDER:
        if output_paths(artifact_id, profile_figures_dir(profile))["csv"].is_file():
            return profile
    return None


def committed_paths(artifact_id: str, profile: Optional[str] = None) -> dict:
    """Where the committed results of an artifact live (<profile folder>/<paper>/<name>.*); with
    profile=None, those of the most faithful profile present (quick's folder if none is)."""
    profile = profile or committed_profile(artifact_id) or "quick"
    return output_paths(artifact_id, profile_figures_dir(profile))


def load_committed(artifact_id: str, profile: Optional[str] = None) -> tuple[Optional[pd.DataFrame], Optional[dict]]:
    """Our committed table and provenance for an artifact (most faithful profile present unless
    `profile` is given), (None, None) where absent/unreadable."""
    p = committed_paths(artifact_id, profile)
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


def failed_claims(artifact_id: str, table: pd.DataFrame, profile: Optional[str] = None) -> list[str]:
    """Texts of the paper claims about this artifact that fail on `table` (other artifacts a claim
    needs are read from their committed csv of the same profile where present), as fedpaper.report
    checks them."""
    mine, tables = claim_tables(artifact_id, table, profile)
    return [r["text"] for r in check_claims(mine, tables) if r["verdict"] == "fail"]


def claim_tables(artifact_id: str, table: pd.DataFrame, profile: Optional[str] = None) -> tuple[list, dict]:
    """(the registered claims about this artifact, {artifact id: table} they are checked on):
    `table` for this artifact, the committed csv of the same profile (else the most faithful
    present) for the other artifacts a claim needs."""
    mine = [c for c in claims(get_artifact(artifact_id).paper) if artifact_id in c.artifacts]

    def other(a):
        same = load_committed(a, profile)[0] if profile in FAITHFUL_ORDER else None
        return same if same is not None else load_committed(a)[0]

    return mine, {a: (table if a == artifact_id else other(a)) for c in mine for a in c.artifacts}


CLAIM_NOTE_PREFIX = "paper claim not reproduced: "  # a provenance note per claim named on the figure


def stale_claim_stamps(artifact_ids: Sequence[str], profile: str) -> dict:
    """{artifact id: the failed-claim texts its figure should name} for each of these artifacts whose
    committed figure (this profile's folder) names others: the stamp is drawn with the figure, and a
    later artifact of the same `fedpaper reproduce` can change a claim it shares (FedMT's quick Fig.
    2b named claim 33 after Table 9 had changed it). Synthetic results and figures that draw the data
    are left alone."""
    out = {}
    for aid in artifact_ids:
        if aid in DRAWS_DATA:
            continue
        table, record = load_committed(aid, profile)
        if table is None or not record or record.get("synthetic"):
            continue
        drawn = _claim_notes(record)
        try:
            now = failed_claims(aid, table, profile)
        except Exception:  # noqa: BLE001 - a claim check never stops the figures (as caption_failed_claims)
            continue
        if now != drawn:
            out[aid] = now
    return out


def _claim_notes(record: dict) -> list:
    """The failed-claim texts a provenance record's notes name."""
    return [n[len(CLAIM_NOTE_PREFIX):] for n in record.get("notes") or [] if str(n).startswith(CLAIM_NOTE_PREFIX)]


def with_claim_notes(record: dict, failed: Sequence[str]) -> dict:
    """A provenance record whose claim notes name `failed`; its other fields as they were."""
    notes = [n for n in record.get("notes") or [] if not str(n).startswith(CLAIM_NOTE_PREFIX)]
    return {**record, "notes": notes + [CLAIM_NOTE_PREFIX + t for t in failed]}


def caption_failed_claims(fig, artifact_id: str, table: pd.DataFrame, profile: Optional[str] = None) -> list[str]:
    """A red line at the top of the figure naming each paper claim that this result does not reproduce."""
    import textwrap

    try:
        failed = failed_claims(artifact_id, table, profile)
    except Exception:  # a claim check must never stop a figure from being drawn
        return []
    if failed:
        width = max(60, int(fig.get_size_inches()[0] * 15))
        text = textwrap.fill("Paper claim NOT reproduced here: " + " | ".join(failed), width)
        fig.text(0.5, 1.0, text, transform=fig.transFigure, ha="center", va="bottom", fontsize=7.5, color="#b00020")
    return failed


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


def _report_status(artifact_id: str, kind: str, status: str, paths: dict) -> None:
    """Tell a running `fedpaper reproduce` what became of this artifact (no-op otherwise)."""
    target = os.environ.get(STATUS_FILE_ENV)
    if not target:
        return
    line = json.dumps({"artifact": artifact_id, "kind": kind, "status": status, "csv": str(paths["csv"])})
    with contextlib.suppress(OSError), open(target, "a", encoding="utf-8") as f:
        f.write(line + "\n")  # one short line per write: appends do not interleave


def read_statuses(path) -> dict[str, dict]:
    """What `_report_status` wrote: artifact id -> its last record ({} when there is no file)."""
    out: dict[str, dict] = {}
    with contextlib.suppress(FileNotFoundError):
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                out[rec["artifact"]] = rec
    return out


def _follow_seeds(notes: list, n: int) -> list:
    """A profile's notes (figure footnote, provenance) name its seed count ("2 seeds"); with
    explicit seeds they name the actual count."""
    return [re.sub(r"\b\d+ seeds\b", f"{n} seeds", x) if isinstance(x, str) else x for x in notes]


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
        base, labels_only = split_need(need)
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
    explore = _parameters.current()
    if explore.exploration:
        params = _parameters.apply_overrides(copy.deepcopy(dict(params)), where=artifact_id)
    if explore.dry_run and out_dir is None:
        out = check_output_folder(dry_run_scratch(), "the dry run's scratch folder")
    elif explore.exploration and out_dir is None:
        out = exploration_dir(profile, explore.changes())
    else:
        out = resolve_out_dir(profile, out_dir)
    root = _data_root(data_root)
    paths = output_paths(artifact_id, out)
    params = dict(params)
    resolved_seeds = _resolve_seeds(seeds, params)
    params.setdefault("profile", profile)
    if resolved_seeds is not None:
        params["seeds"] = resolved_seeds
    n_seeds = len(resolved_seeds) if explore.seeds is not None and resolved_seeds else None
    if n_seeds and isinstance(params.get("notes"), list):
        params["notes"] = _follow_seeds(params["notes"], n_seeds)
    explore_note = (f"DRY RUN of the {profile} profile: cut {explore.describe()}; every other setting is the "
                    f"{profile} profile's; not a result" if explore.dry_run else
                    f"EXPLORATION: changed {explore.describe()}; other notes describe the {profile} profile"
                    if explore.exploration else None)
    if explore_note and isinstance(params.get("notes"), list):
        params["notes"] = [explore_note] + params["notes"]  # figure footnotes drawn from the notes say it too

    needed = [d for d in datasets if d != "none"]
    missing = [d for d in needed if not dataset_available(d, root)]
    missing_required = [d for d in missing if d not in optional_datasets]
    hook = COMPUTE_HOOK.get()
    if hook is not None:
        params.setdefault("missing_datasets", [] if profile == "smoke" else missing)
        return hook(artifact_id, compute, params, missing)
    if rerender_requested() and profile != "smoke" and not explore.exploration:
        return _rerender_or_fail(art, profile, params, draw, missing_required, root, paths, asked=True)
    if profile != "smoke" and missing_required and explore.exploration:
        raise DataMissingError(f"{artifact_id}: {missing_message(missing_required[0], root)}; an exploration "
                               f"({explore.describe()}) needs the data (committed results are not re-rendered)")
    if profile != "smoke" and missing_required:
        return _rerender_or_fail(art, profile, params, draw, missing_required, root, paths)
    params.setdefault("missing_datasets", [] if profile == "smoke" else missing)

    t0 = time.perf_counter()
    token = BAR_PREFIX.set(artifact_id)
    owner = SWEEP_OWNER.set(None if explore.exploration else (artifact_id, profile))  # the store's index
    try:
        with warnings_once(artifact_id):  # each distinct warning once, counted, after the bars
            result = compute(params)
    finally:
        SWEEP_OWNER.reset(owner)
        BAR_PREFIX.reset(token)
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
    if n_seeds:
        notes = _follow_seeds(notes, n_seeds)
    if explore_note and explore_note not in notes:
        notes = [explore_note] + notes
    notes += _column_notes(artifact_id, table)

    if explore.dry_run:
        status = f"dry run of the {profile} profile (cut: {explore.describe()}; not a result)"
    elif profile == "smoke":
        status = "regenerated at smoke profile (synthetic/tiny stand-in; not a result)"
    elif synthetic:
        status = "regenerated on SYNTHETIC stand-in data (not a result)"
    elif profile != "smoke" and missing:
        status = f"regenerated without {', '.join(missing)} (missing)"
    else:
        status = "regenerated"
    lossy = [d["name"] for d in ds_records if d.get("lossy")]

    fig = draw(table, params)
    exploration = ({"changes": explore.changes(), "out_dir": str(out),
                    "note": "exploration: parameters differ from the profile's; never scored in the report"}
                   if explore.exploration else None)
    dry_run = ({"profile": profile, "cut": explore.changes(),
                "note": f"dry run (fedpaper reproduce --profile {profile} --dry-run): the {profile} profile's settings "
                        "and code paths, cut only in the settings named in `cut`; not a result"}
               if explore.dry_run else None)
    try:
        if synthetic:
            stamp_figure(fig)
        else:
            notes += [CLAIM_NOTE_PREFIX + t for t in caption_failed_claims(fig, artifact_id, table, profile)]
        if exploration:
            stamp_exploration(fig, explore.describe(), above_banner=synthetic, dry_run=explore.dry_run)
        record = prov.collect(
            artifact_id=artifact_id, profile=profile, params=params, datasets=ds_records,
            seeds=info.get("seeds", resolved_seeds), device=info.get("device"), wall_time_s=wall,
            notes=notes,
            extra={"paper": art.paper, "title": art.title, "status": status, "synthetic": synthetic,
                   "stamped": synthetic, "lossy_datasets": lossy, "methods": prov.table_methods(table),
                   "missing_datasets": missing if profile != "smoke" else [],
                   "info": {k: v for k, v in info.items() if k not in ("datasets", "notes", "seeds", "device")},
                   **({"exploration": exploration} if exploration else {}),
                   **({"dry_run": dry_run} if dry_run else {})},
        )
        _write_outputs(paths, fig=fig, table=table, record=record)
    finally:
        _close(fig)
    _report_status(artifact_id, "regenerated", status, paths)
    return ArtifactResult(artifact_id, table, fig, record, paths, status)


def rerender_refusal(missing: Sequence[str], root) -> str:
    """Why an artifact of catalog.DRAWS_DATA with committed results is not re-rendered, and what to do."""
    why = ("its figure shows images of the data set, which a re-render from committed results cannot "
           "draw (no data are read); its committed png/pdf are kept")
    if missing:
        return f"{why}; to regenerate it, {missing_message(missing[0], root)}"
    return f"{why}; regenerate it instead (without --rerender)"


def rerender_requested() -> bool:
    """`fedpaper reproduce --rerender` (FEDPAPER_RERENDER=1, inherited by the notebook kernels):
    every artifact is redrawn from its committed csv and json, nothing is trained, no data is read."""
    return os.environ.get(RERENDER_ENV, "") not in ("", "0")


#: Profile settings resolved from the machine at hand (engine.cpu.resolve_precision, and the notes that
#: state it); a re-render uses
#: the committed run's values.
MACHINE_RESOLVED = ("precision", "precision_rule", "notes")


def _rerender_or_fail(art, profile, params, draw, missing, root, paths, asked=False) -> ArtifactResult:
    """A needed data set is missing (or `asked`: --rerender): re-render from the committed csv,
    or raise DataMissingError (BadParameterError: --rerender of a DRAWS_DATA artifact, data present).

    The figure is drawn from the committed csv with the params the committed run was drawn with
    (its provenance's missing_datasets, never this machine's), so re-rendering on a machine without
    the data gives the figure that was committed (issue 32, items 4 and 5). An artifact whose figure
    shows images of the data set (catalog.DRAWS_DATA) is never re-rendered: one line, nothing written."""
    own = profile in FAITHFUL_ORDER and committed_paths(art.id, profile)["csv"].is_file()
    source = profile if own else None  # this profile's results, else the most faithful present
    committed = committed_paths(art.id, source)
    table, committed_record = load_committed(art.id, source)
    if table is None:
        if asked and not missing:
            raise DataMissingError(f"{art.id}: no committed {profile} results at {committed['csv']} to re-render "
                                   "from; run it without --rerender to regenerate it")
        msg = missing_message(missing[0], root)
        more = f" (also missing: {', '.join(missing[1:])})" if len(missing) > 1 else ""
        raise DataMissingError(f"{art.id}: {msg}{more}; no committed results at {committed['csv']} "
                               "to re-render from")
    if art.id in DRAWS_DATA:
        raise (DataMissingError if missing else BadParameterError)(f"{art.id}: {rerender_refusal(missing, root)}")
    status = ("re-rendered from committed results" + (" (--rerender)" if asked else "")
              + (f"; {', '.join(missing)} missing" if missing else ""))
    record = dict(committed_record or {"note": "committed csv had no provenance json"})
    record["rerendered"] = {"status": status, "profile": profile, "timestamp": prov.now_iso(),
                            "git": prov.git_info(), "command": prov.command_line(),
                            "missing_datasets": missing, "data_root": str(root)}
    # Settings this machine resolves for itself (the precision a CPU runs natively) are taken from the
    # committed run too, so the subtitle drawn is the committed one on any CPU.
    ran = (committed_record or {}).get("params") or {}
    params = dict(params, **{k: ran[k] for k in MACHINE_RESOLVED if k in ran},
                  missing_datasets=list((committed_record or {}).get("missing_datasets") or []))
    fig = draw(table, params)
    try:
        failed = None
        if (committed_record or {}).get("synthetic"):
            stamp_figure(fig)
        else:
            failed = caption_failed_claims(fig, art.id, table, profile)
        in_place = _same_dir(paths["csv"].parent, committed["csv"].parent)
        # In place, the committed csv and json stay byte-identical (they still describe the run
        # that made the numbers); only the png/pdf are redrawn, and the json's claim notes where the
        # claims the figure names have changed (they are a judgement of the numbers, made now).
        # Elsewhere, all four are written.
        restamped = (in_place and failed is not None and committed_record
                     and failed != _claim_notes(committed_record))
        _write_outputs(paths, fig=fig, table=None if in_place else table,
                       record=(with_claim_notes(committed_record, failed) if restamped
                               else None if in_place else prov.jsonable(record)))
    finally:
        _close(fig)
    _report_status(art.id, "rerendered", status, paths)
    return ArtifactResult(art.id, table, fig, record, paths, status)
