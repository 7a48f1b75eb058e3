#!/usr/bin/env python3
"""Write the standard short notebook of an artifact: notebooks/<PAPER>/<NAME>.ipynb.

    python scripts/new_notebook.py PAPER NAME "ARTIFACT_IDS" "CALL" [--section S] [--root DIR] [--force]
    python scripts/new_notebook.py --refresh NOTEBOOK...   # rewrite the standard cells of existing ones

    python scripts/new_notebook.py fedpals table1 "fedpals/table1" fedpaper.papers.fedpals.table1 \
        --section "Sec 5.1, Table 1"

ARTIFACT_IDS: space- or comma-separated ids the notebook regenerates. CALL: the dotted path of the
function that regenerates them; it is called through fedpaper.notebook.run as CALL(profile=...,
data_root=..., out_dir=..., seeds=..., overrides=...) and returns an ArtifactResult (or a list of
them, one per artifact); fedpaper.notebook.show displays them.

Cells: a markdown title naming the artifacts and the paper section; the `parameters` cell
(smoke defaults, read by papermill); the call; a cell showing the figure and the table; then,
read-only (cell metadata editable/deletable false), four header + call pairs that explain the run:
show_specs (run specs, what was shrunk from the paper), show_seeds (per-seed table),
show_vs_paper (ours next to the paper's), show_claims (this artifact's claim verdicts and causes).
Kernel spec: python3. The artifact ids are stored in the notebook metadata (fedpaper.outputs.artifacts),
which is how `fedpaper reproduce` finds the notebook of an artifact.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

REPO_ROOT = Path(__file__).resolve().parents[1]

PARAMETERS = '''profile = "smoke"  # smoke (synthetic, seconds) | quick | long | paper
data_root = None  # None: $FEDPAPER_DATA, ../shared/data, ~/.fedpaper/data
out_dir = None  # None: figures/ (quick, paper), the cache (smoke), a scratch folder (exploration)
seeds = None  # None: the profile's default; an int n means seeds 0..n-1
overrides = {}  # profile settings to change, e.g. {"rounds": 4, "mu": 0.1}: an exploration (fedpaper.outputs.parameters)'''


SHOW = "show(result)  # status, where the files are, the figure and its table"

#: How the title cell tells a reader to run the notebook with papermill: with fedpaper's engine, bad
#: input (a profile, data_root, seeds or overrides typo) is one line `ERROR: ...` and exit code 2,
#: where papermill's default engine prints its traceback of PapermillExecutionError first.
PAPERMILL = "papermill --engine fedpaper"


def papermill_command(paper: str, name: str) -> str:
    return f"`{PAPERMILL} notebooks/{paper}/{name}.ipynb out.ipynb -p profile quick`."

#: The read-only cells after the run (issue 32, item 6): a one-line markdown header and one call
#: each; fedpaper.notebook owns what they show. Their metadata (editable/deletable false) makes
#: JupyterLab refuse edits, so a reader changes parameters, not explanations.
EXPLAIN = [
    ("### What ran: the profile's run specs, and what was shrunk from the paper",
     "show_specs(result)  # methods, seeds, data, rounds, clients; every parameter (from the provenance json)"),
    ("### The per-seed numbers behind the figure",
     "show_seeds(result)  # one column per seed"),
    ("### Ours next to the paper's reported numbers",
     "show_vs_paper(result)  # difference = ours - paper"),
    ("### The paper's claims on this artifact, checked on this run, with their computed causes",
     "show_claims(result)  # verdicts as figures/REPORT.md states them for the committed results"),
]
READ_ONLY = {"editable": False, "deletable": False}


def call_source(module: str, func: str) -> str:
    """The call cell: fedpaper.notebook.run gives one-line errors for bad parameters."""
    setup = f"from {module} import {func}\n" if module else ""
    return ("from fedpaper.notebook import run, show, show_claims, show_seeds, show_specs, show_vs_paper\n" + setup + "\n"
            f"result = run({func}, profile=profile, data_root=data_root, out_dir=out_dir, seeds=seeds,\n"
            f"             overrides=overrides)")


def explain_cells() -> list:
    """The read-only header + call pairs that follow `show(result)` (EXPLAIN)."""
    cells = []
    for header, call in EXPLAIN:
        for c in (new_markdown_cell(header), new_code_cell(call)):
            c.metadata.update(READ_ONLY)
            cells.append(c)
    return cells


def _renumber(nb) -> None:
    """Cell ids 0, 1, 2, ... (what the committed notebooks use: stable, diff-friendly)."""
    for i, c in enumerate(nb.cells):
        c["id"] = str(i)


def refresh(path: Path) -> None:
    """Rewrite the parameters, call, show and explaining cells of an existing notebook (its title
    markdown kept; anything after the show cell is replaced by the standard explaining cells)."""
    nb = nbformat.read(str(path), as_version=4)
    params = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    m = None
    for src in re.findall(r"^from (\S+) import (\w+)", nb.cells[params + 1].source, re.M):
        if src[0] != "fedpaper.notebook":
            m = src
    if m is None:
        raise SystemExit(f"new_notebook: {path}: no 'from MODULE import FUNC' in the call cell")
    if params > 0 and nb.cells[0].cell_type == "markdown":  # the title's papermill command, as make_notebook writes it
        paper = nb.metadata.get("fedpaper", {}).get("paper", path.parent.name)
        nb.cells[0].source = re.sub(r"^`papermill .*?`\.$", papermill_command(paper, path.stem), nb.cells[0].source,
                                    flags=re.M)
    nb.cells[params].source = PARAMETERS
    nb.cells[params + 1].source = call_source(m[0], m[1])
    nb.cells[params + 2].source = SHOW
    nb.cells = nb.cells[: params + 3] + explain_cells()
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    _renumber(nb)
    nbformat.validate(nb)
    nbformat.write(nb, str(path))


def _split_ids(ids: str) -> list[str]:
    return [i for i in re.split(r"[,\s]+", ids.strip()) if i]


def make_notebook(paper: str, name: str, artifact_ids, call: str, section: str | None = None):
    ids = _split_ids(artifact_ids) if isinstance(artifact_ids, str) else list(artifact_ids)
    if not ids:
        raise SystemExit("new_notebook: give at least one artifact id, e.g. \"fedpals/table1\"")
    titles = []
    try:
        sys.path.insert(0, str(REPO_ROOT))
        from fedpaper.claims.catalog import ARTIFACTS, PAPER_TITLES, get_artifact

        for i in ids:
            titles.append(f"`{i}`: {get_artifact(i).title}")
        paper_title = PAPER_TITLES.get(paper, paper)
    except ImportError:  # pragma: no cover - generator used outside the repo
        titles = [f"`{i}`" for i in ids]
        paper_title = paper
    module, _, func = call.rpartition(".")
    where = f", {section}" if section else ""
    md = "\n".join([
        f"# {', '.join('`' + i + '`' for i in ids)}",
        "",
        f"Paper: {paper_title}{where}.",
        "",
        *[f"- {t}" for t in titles],
        "",
        "Writes `<out>/<paper>/<name>.png`, `.pdf`, `.csv` (the numbers) and `.json` (provenance) for "
        "each artifact. The defaults below are the smoke profile (tiny synthetic stand-ins, stamped "
        "as such, written to the cache); for real results run",
        f"`fedpaper reproduce --only {' '.join(ids)} --profile quick` or",
        papermill_command(paper, name),
    ])
    call_cell = call_source(module, func or call)
    show = SHOW
    params = new_code_cell(PARAMETERS)
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[new_markdown_cell(md), params, new_code_cell(call_cell), new_code_cell(show),
                             *explain_cells()])
    _renumber(nb)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["fedpaper"] = {"paper": paper, "artifacts": ids}
    nbformat.validate(nb)
    return nb


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--refresh"]:  # new_notebook.py --refresh NOTEBOOK...
        for nb in argv[1:]:
            refresh(Path(nb))
            print(nb)
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("paper")
    p.add_argument("name")
    p.add_argument("artifact_ids")
    p.add_argument("call")
    p.add_argument("--section", default=None, help="paper section, e.g. 'Sec 5.1, Table 1'")
    p.add_argument("--root", default=str(REPO_ROOT), help="repository root (default: this repo)")
    p.add_argument("--force", action="store_true", help="overwrite an existing notebook")
    a = p.parse_args(argv)
    path = Path(a.root) / "notebooks" / a.paper / f"{a.name}.ipynb"
    if path.exists() and not a.force:
        print(f"new_notebook: {path} exists; pass --force to overwrite it", file=sys.stderr)
        return 2
    nb = make_notebook(a.paper, a.name, a.artifact_ids, a.call, a.section)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
