"""The output contract: what the pipeline (fedpaper.outputs.pipeline) writes for an artifact.

For an artifact id `paper/name`, it writes, atomically, into `<out>/<paper>/`:

- `<name>.png`, `<name>.pdf`  the figure (a table artifact draws its table),
- `<name>.csv`                the tidy numbers behind it: setting columns, then `method, metric,
                              mean, std` (+ `ci_low, ci_high, n_seeds` ...) where that applies, with
                              the column names of the paper's reported CSV where there is one,
- `<name>.json`               provenance (see `fedpaper.runs.provenance`).

`<out>` is `figures/` for the quick profile, `figures/long/` and `figures/paper/` for the long and
paper profiles (so a quick run never overwrites committed long results), and
`cache_dir("smoke-figures")` for smoke, which therefore never touches the committed figures.
Here too: the committed results (read back by the report and by a re-render), the claim notes a
figure carries, and the re-render from committed results when a data set is missing.
"""
from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import pandas as pd

from fedpaper.outputs.parameters import FAITHFUL_ORDER, check_profile
from fedpaper.runs import provenance as prov
from fedpaper.ground.errors import BadParameterError, DataMissingError
from fedpaper.blocks.data.registry import missing_message
from fedpaper.outputs.registry import claims
from fedpaper.claims import check_claims
from fedpaper.claims.catalog import (
    DRAWS_DATA,
    Claim,  # noqa: F401  (exported here too)
    artifact_ids,
    get_artifact,
)
from fedpaper.ground.paths import cache_dir, figures_dir, unwritable_reason
from fedpaper.ground.files import atomic_path
from fedpaper.runs.store import spec_json

SUFFIXES = ("png", "pdf", "csv", "json")
SYNTHETIC_STAMP = "SYNTHETIC smoke data — not a result"
#: `fedpaper reproduce` names a file here; every artifact the pipeline makes (in the notebook kernels, which
#: inherit the environment) appends one JSON line: artifact, kind ("regenerated" | "rerendered"), status.
STATUS_FILE_ENV = "FEDPAPER_STATUS_FILE"
#: Set (to 1) by `fedpaper reproduce --rerender`: see rerender_requested.
RERENDER_ENV = "FEDPAPER_RERENDER"
#: `fedpaper reproduce --only ID ...` names the selected artifact ids here (comma-separated), inherited by the
#: notebook kernels: a notebook that makes several artifacts makes only those (requested).
ONLY_ENV = "FEDPAPER_ONLY"

__all__ = ["ArtifactResult", "Claim", "output_paths", "committed_paths", "committed_profile",
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
    if not why:
        return out
    where = "out_dir= in a notebook, --out-dir on the CLI"
    path = Path(out).expanduser().absolute()
    file = next((a for a in (path, *path.parents) if a.exists() and not a.is_dir()), None)
    if file is not None:  # the folder, or one above it, is a file
        raise BadParameterError(f"cannot write results to {what} {str(out)!r}: {file} is a file, not a folder; "
                                f"pass a folder ({where})")
    raise BadParameterError(f"cannot write results to {what} {str(out)!r}: {why}; free space or fix its "
                            f"permissions, or pass another folder ({where})")


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


def committed_records(root=None) -> list[Path]:
    """The provenance jsons of every committed artifact under `root` (figures/ by default), of all
    profiles: `<paper>/<name>.json` and `<profile>/<paper>/<name>.json` of a known artifact id. The
    report's own figures (summary/, with their source lists) are not artifacts and are left out."""
    root = Path(root) if root is not None else figures_dir()
    known = set(artifact_ids())
    return [p for p in sorted(root.glob("*/*.json")) + sorted(root.glob("*/*/*.json"))
            if f"{p.parent.name}/{p.stem}" in known]


def load_committed(artifact_id: str, profile: Optional[str] = None) -> tuple[Optional[pd.DataFrame], Optional[dict]]:
    """Our committed table and provenance for an artifact (most faithful profile present unless
    `profile` is given), (None, None) where absent/unreadable."""
    p = committed_paths(artifact_id, profile)
    table = None
    if p["csv"].is_file():
        with contextlib.suppress(OSError, ValueError, pd.errors.ParserError):
            table = pd.read_csv(p["csv"])
    return table, prov.load(p["json"])


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
    are left alone, and so is the smoke profile (its results are never committed)."""
    out = {}
    if profile not in FAITHFUL_ORDER:
        return out
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


def close_figure(fig):
    with contextlib.suppress(Exception):
        import matplotlib.pyplot as plt

        plt.close(fig)


def _save_figure(fig, png: Path, pdf: Path):
    fig.savefig(png, format="png", dpi=150, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(pdf, format="pdf", bbox_inches="tight",
                metadata={"CreationDate": None, "ModDate": None, "Producer": None})


def write_outputs(paths: dict, *, fig=None, table=None, record=None):
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


def report_status(artifact_id: str, kind: str, status: str, paths: dict) -> None:
    """Tell a running `fedpaper reproduce` what became of this artifact (no-op otherwise)."""
    target = os.environ.get(STATUS_FILE_ENV)
    if not target:
        return
    line = json.dumps({"artifact": artifact_id, "kind": kind, "status": status, "csv": str(paths["csv"])})
    with contextlib.suppress(OSError), open(target, "a", encoding="utf-8") as f:
        f.write(line + "\n")  # one short line per write: appends do not interleave


def read_statuses(path) -> dict[str, dict]:
    """What `report_status` wrote: artifact id -> its last record ({} when there is no file)."""
    out: dict[str, dict] = {}
    with contextlib.suppress(FileNotFoundError):
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(line)
                out[rec["artifact"]] = rec
    return out


def rerender_refusal(missing: Sequence[str], root) -> str:
    """Why an artifact of catalog.DRAWS_DATA with committed results is not re-rendered, and what to do."""
    why = ("its figure shows images of the data set, which a re-render from committed results cannot "
           "draw (no data are read); its committed png/pdf are kept")
    if missing:
        return f"{why}; to regenerate it, {missing_message(missing[0], root)}"
    return f"{why}; regenerate it instead (without --rerender)"


def requested(artifact_id: str) -> bool:
    """False when `fedpaper reproduce --only` selected other artifacts and not this one (ONLY_ENV), else True."""
    only = os.environ.get(ONLY_ENV, "")
    return not only or artifact_id in only.split(",")


def rerender_requested() -> bool:
    """`fedpaper reproduce --rerender` (FEDPAPER_RERENDER=1, inherited by the notebook kernels):
    every artifact is redrawn from its committed csv and json, nothing is trained, no data is read."""
    return os.environ.get(RERENDER_ENV, "") not in ("", "0")


#: Profile settings resolved from the machine at hand (engine.cpu.resolve_precision, and the notes that
#: state it); a re-render uses
#: the committed run's values.
MACHINE_RESOLVED = ("precision", "precision_rule", "notes")


def rerender_or_fail(art, profile, params, draw, missing, root, paths, asked=False) -> ArtifactResult:
    """A needed data set is missing (or `asked`: --rerender): re-render from the committed csv,
    or raise DataMissingError (BadParameterError: --rerender of a DRAWS_DATA artifact, data present).

    The figure is drawn from the committed csv with the params the committed run was drawn with
    (its provenance's missing_datasets, never this machine's), so re-rendering on a machine without
    the data gives the figure that was committed. An artifact whose figure
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
        write_outputs(paths, fig=fig, table=None if in_place else table,
                       record=(with_claim_notes(committed_record, failed) if restamped
                               else None if in_place else prov.jsonable(record)))
    finally:
        close_figure(fig)
    report_status(art.id, "rerendered", status, paths)
    return ArtifactResult(art.id, table, fig, record, paths, status)
