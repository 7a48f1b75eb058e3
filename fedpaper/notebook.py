"""What a notebook calls: `run` an artifact function, then `show` its results and explain them.

    from fedpaper.notebook import run, show
    from fedpaper.papers.fedpals import table1

    result = run(table1, profile=profile, data_root=data_root, out_dir=out_dir, seeds=seeds,
                 overrides=overrides)
    show(result)
    show_specs(result)     # what ran: methods, seeds, rounds, clients, and what was shrunk from the paper
    show_seeds(result)     # the per-seed numbers behind the figure
    show_vs_paper(result)  # ours next to the paper's reported numbers
    show_claims(result)    # the paper's claims about this artifact, checked, with their computed causes

`run` makes fedpaper's errors (bad parameters, missing data: `fedpaper.ground.errors.FedpaperError`)
show as one line `ERROR: ...` in the notebook instead of a traceback (the cell still fails, so
papermill and nbval see the error, and `fedpaper reproduce` exits 2 for bad input; `papermill
--engine fedpaper` prints that line alone: fedpaper.papermill_engine). `show`
prints each artifact's status and where its files were written, displays its figure (the png
written, so what is shown is the artifact) and its table. The four `show_*` calls read only the
result (its table and provenance), the papers' reported numbers and the registered claims, so
the notebook explains its run without any logic of its own (scripts/new_notebook.py writes them
into read-only cells after the run).
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from fedpaper.ground.errors import FedpaperError
from fedpaper.runs.provenance import runs_text
from fedpaper.claims.catalog import get_artifact, load_reported
from fedpaper.outputs import pipeline
from fedpaper.ground import paths
from fedpaper.report import artifact_claims, claim_line, compare_with_reported, verdict_line

__all__ = ["run", "show", "show_specs", "show_seeds", "show_vs_paper", "show_claims", "one_line_errors",
           "side_by_side", "run_specs", "seed_table", "notebook_call", "artifact_function_of"]


def _one_line(shell, etype, value, tb, tb_offset=None):
    """IPython custom exception handler: `ERROR: <message>` (the message is already one line).

    IPython does not display what a custom handler returns, so it is sent as the cell's error
    output here (ename/evalue stay the exception's, which papermill and the CLI read)."""
    stb = [f"\x1b[0;31mERROR\x1b[0m: {value}"]
    shell._showtraceback(etype, value, stb)
    return stb


def one_line_errors() -> bool:
    """In an IPython kernel, show FedpaperError as one line; elsewhere do nothing. True if set."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    if FedpaperError not in (getattr(shell, "custom_exceptions", ()) or ()):
        shell.set_custom_exc((FedpaperError,), _one_line)
    return True


def run(artifact_function, **parameters):
    """`artifact_function(**parameters)` with one-line errors (see the module docstring).

    A function not wrapped by `fedpaper.outputs.pipeline.artifact_function` (e.g. a new paper
    module's first draft, returning its ArtifactJob(s)) is wrapped here, so it gets the same checks
    and pipeline."""

    one_line_errors()
    if not getattr(artifact_function, "fedpaper_artifact_function", False):
        artifact_function = pipeline.artifact_function(artifact_function)
    return artifact_function(**parameters)


def _results(result) -> list:
    return list(result) if isinstance(result, (list, tuple)) else [result]


def side_by_side(result):
    """Our numbers next to the paper's for an artifact with reported numbers (else None)."""

    if not get_artifact(result.artifact_id).reported:
        return None
    reported = load_reported(result.artifact_id)
    if reported is None:
        return None
    table, _ = compare_with_reported(reported, result.table)
    return None if table.empty else table


def files_line(result) -> str:
    """`files: <folder>/<paper>/<name>.{png,pdf,csv,json}`."""
    files = [Path(p) for p in result.paths.values()]
    if not files:
        return "files: none written"
    folder = files[0].parent
    stem = files[0].stem
    return f"files: {folder}/{stem}.{{{','.join(p.suffix.lstrip('.') for p in files)}}}"


def show(result) -> None:
    """Status, files, figure, table and side-by-side of each result (see the module docstring)."""
    from IPython.display import Image, Markdown, display

    for r in _results(result):
        print(f"{r.artifact_id}: {r.status}")
        if r.exploration:
            changed = ", ".join(f"{k}={v}" for k, v in r.exploration["changes"].items())
            print(f"exploration ({changed}): written to a scratch folder, not to figures/; "
                  "never scored in the report")
        print(files_line(r))
        png = r.paths.get("png")
        if png is not None and Path(png).is_file():
            display(Image(filename=str(png)))
        elif r.figure is not None:
            display(r.figure)
        display(r.table)


def _title(r, what: str) -> str:
    prof = (r.provenance or {}).get("profile", "?")
    return f"**{r.artifact_id}: {what}** ({prof} profile" + (", exploration" if r.exploration else "") + ")"


def show_vs_paper(result) -> None:
    """Ours next to the paper's reported numbers (side_by_side), for each result that has them."""
    from IPython.display import Markdown, display

    for r in _results(result):
        cmp = side_by_side(r)
        if cmp is None:
            print(f"{r.artifact_id}: the paper reports no table of numbers for it (see the figure)")
            continue
        ran = cmp[cmp["ours"] != "–"]
        left_out = len(cmp) - len(ran)
        display(Markdown(_title(r, "ours next to the paper's")
                         + (f"; {left_out} of the paper's {len(cmp)} rows not run here" if left_out else "")))
        display(ran if len(ran) else cmp)


# Run parameters shown first in the specs (the rest follow in their own order).
_FIRST = ("rounds", "num_clients", "clients", "local_epochs", "epochs", "lr", "batch_size", "data_fraction")


def _short(v, width: int = 90) -> str:
    t = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    return t if len(t) <= width else t[: width - 3] + "..."


def run_specs(result) -> tuple[list[str], "object"]:
    """(summary lines, parameter table) of one result, from its provenance: methods, seeds, data
    sets, device and time, what differs from the paper (the run's notes), then every parameter."""

    rec = result.provenance or {}
    params = dict(rec.get("params") or {})
    notes = [n for n in rec.get("notes") or [] if not str(n).startswith("paper claim not reproduced")]
    data = []
    for d in rec.get("datasets") or []:
        flags = [f for f, on in (("lossy copy", d.get("lossy")), ("SYNTHETIC", d.get("synthetic")),
                                 ("labels only", d.get("labels_only"))) if on]
        data.append(d.get("name", "?") + (f" ({', '.join(flags)})" if flags else ""))
    seeds = rec.get("seeds") or params.get("seeds")
    lines = [f"methods: {', '.join(rec.get('methods') or []) or 'none named in the table'}",
             (f"seeds: {len(seeds)} ({_short(seeds)})" if isinstance(seeds, list) and seeds
              else "seeds: none (no random draw in this artifact)" if not seeds else f"seeds: {seeds}"),
             f"data: {', '.join(data) or 'none'}"
             + (f"; made without {', '.join(rec['missing_datasets'])}" if rec.get("missing_datasets") else ""),
             f"device: {rec.get('device', '?')}; wall time {float(rec.get('wall_time_s') or 0):.0f} s"
             + (f" ({runs_text(rec)})" if runs_text(rec) else "")
             + (f"; code {str((rec.get('git') or {}).get('commit', ''))[:10]}" if rec.get("git") else "")]
    lines += [f"differs from the paper: {n}" for n in notes]
    keys = [k for k in _FIRST if k in params] + [k for k in params if k not in _FIRST and k not in ("notes", "seeds")]
    table = pd.DataFrame({"parameter": keys, "value": [_short(params[k]) for k in keys]})
    return lines, table


def show_specs(result) -> None:
    """What ran (run_specs): the profile's methods, seeds, data, rounds, clients, and what was
    shrunk or chosen differently from the paper, from the provenance json written with the figure."""
    from IPython.display import Markdown, display

    for r in _results(result):
        lines, table = run_specs(r)
        display(Markdown(_title(r, "run specs") + "\n\n" + "\n".join(f"- {x}" for x in lines)))
        with pd.option_context("display.max_colwidth", 100, "display.max_rows", 200):
            display(table)


def seed_table(result):
    """The per-seed values behind a result: its table with the `per_seed` column (';'-joined, one
    value per seed, '-' for none) spread into one column per seed; a table with a `seed` column is
    already per seed; None when the table has neither."""

    t = result.table
    if t is None:
        return None
    if "seed" in t.columns:
        return t
    if "per_seed" not in t.columns:
        return None
    seeds = (result.provenance or {}).get("seeds") or []
    split = [[] if pd.isna(v) or str(v) in ("", "nan") else str(v).split(";") for v in t["per_seed"]]
    n = max((len(x) for x in split), default=0)
    names = [f"seed {seeds[i]}" if i < len(seeds) else f"seed #{i}" for i in range(n)]
    values = pd.DataFrame([[pd.to_numeric(v, errors="coerce") for v in x] + [float("nan")] * (n - len(x))
                           for x in split], index=t.index, columns=names, dtype=float)
    keep = [c for c in t.columns if c not in ("per_seed", "ci_low", "ci_high", "sem", "source", "val_mean")
            and not c.endswith("_per_seed")]
    return pd.concat([t[keep], values], axis=1)


def show_seeds(result) -> None:
    """The per-seed numbers behind each result (seed_table)."""
    from IPython.display import Markdown, display

    for r in _results(result):
        t = seed_table(r)
        if t is None:
            print(f"{r.artifact_id}: its table holds no per-seed values (not a per-seed result); the table above is all")
            continue
        display(Markdown(_title(r, "per seed") + f"; {len(t)} rows"))
        with pd.option_context("display.max_rows", 500):
            display(t)


def show_claims(result) -> None:
    """The paper's claims about each artifact, checked on this run's table as REPORT.md checks the
    committed ones (fedpaper.report.artifact_claims): one line per claim as REPORT.md's summary
    writes it (report.claim_line: verdict, claim, the number that decides it, its cause), the full
    evidence folded below."""
    from IPython.display import Markdown, display


    for r in _results(result):
        rec = r.provenance or {}
        res = artifact_claims(r.artifact_id, r.table, rec, rec.get("profile"))
        if not res:
            print(f"{r.artifact_id}: no claim of the paper is registered on this artifact")
            continue
        warn = (" Synthetic stand-in data: these verdicts test the code path, not the paper."
                if rec.get("synthetic") else "")
        evidence = "\n".join(f"- {verdict_line(x)}" for x in res)
        display(Markdown(_title(r, f"the paper's claims on it, checked on this run ({len(res)})") + "." + warn
                         + "\n\n" + "\n".join(f"- {claim_line(x)}" for x in res)
                         + "\n\n<details><summary>the evidence of each claim</summary>\n\n" + evidence
                         + "\n\n</details>"))


# ----------------------------------------------------------------------------- the call of a notebook
def notebook_call(notebook) -> tuple[str, str]:
    """(module, function) a generated notebook calls: its `from MODULE import FUNC` call cell
    (scripts/new_notebook.py writes it), so tests and re-rendering call what the notebook calls."""
    import json
    import re

    path = Path(notebook)
    # the notebook's JSON read directly (nbformat 4: a cell's source is a string or a list of lines):
    # importing nbformat costs seconds, and this only looks for one line
    nb = json.loads((path if path.is_absolute() else paths.REPO_ROOT / path).read_text(encoding="utf-8"))
    for c in nb.get("cells", []):
        source = "".join(c.get("source", "")) if isinstance(c.get("source"), list) else c.get("source", "")
        m = re.search(r"^from (\S+) import (\w+)$", source, re.M) if c.get("cell_type") == "code" else None
        if m and m.group(1) != "fedpaper.notebook":
            return m.group(1), m.group(2)
    raise ValueError(f"{notebook}: no 'from MODULE import FUNC' call cell")


def artifact_function_of(notebook):
    """The artifact function a notebook calls (see notebook_call)."""
    import importlib

    module, func = notebook_call(notebook)
    return getattr(importlib.import_module(module), func)
