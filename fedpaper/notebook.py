"""What a notebook calls: `run` an artifact function, then `show` its results.

    from fedpaper.notebook import run, show
    from fedpaper.papers.fedpals import table1

    result = run(table1, profile=profile, data_root=data_root, out_dir=out_dir, seeds=seeds,
                 overrides=overrides)
    show(result)

`run` makes fedpaper's errors (bad parameters, missing data: `fedpaper.errors.FedpaperError`)
show as one line `ERROR: ...` in the notebook instead of a traceback (the cell still fails, so
papermill and nbval see the error, and `fedpaper reproduce` exits 2 for bad input). `show`
prints each artifact's status and where its files were written, displays its figure (the png
written, so what is shown is the artifact), its table and, for a table with reported numbers,
ours next to the paper's (`fedpaper.report.compare_with_reported`).
"""
from __future__ import annotations

from pathlib import Path

from fedpaper.errors import FedpaperError

__all__ = ["run", "show", "one_line_errors", "side_by_side"]


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

    A function not wrapped by `fedpaper.parameters.artifact_function` (e.g. a new paper module's
    first draft) gets the same checks here, and is called without `overrides` (run_artifact
    applies them to the params it is given)."""
    from fedpaper.parameters import using

    one_line_errors()
    if getattr(artifact_function, "fedpaper_artifact_function", False):
        return artifact_function(**parameters)
    with using(**parameters) as p:
        return artifact_function(profile=p.profile, data_root=p.data_root, out_dir=p.out_dir, seeds=p.seeds)


def _results(result) -> list:
    return list(result) if isinstance(result, (list, tuple)) else [result]


def side_by_side(result):
    """Our numbers next to the paper's for an artifact with reported numbers (else None)."""
    from fedpaper.papers.catalog import get_artifact, load_reported
    from fedpaper.report import compare_with_reported

    if not get_artifact(result.artifact_id).reported:
        return None
    reported = load_reported(result.artifact_id)
    if reported is None:
        return None
    table, _ = compare_with_reported(reported, result.table)
    return None if table.empty else table


def files_line(result) -> str:
    """`files: <folder>/<paper>/<name>.{png,pdf,csv,json}`."""
    paths = [Path(p) for p in result.paths.values()]
    if not paths:
        return "files: none written"
    folder = paths[0].parent
    stem = paths[0].stem
    return f"files: {folder}/{stem}.{{{','.join(p.suffix.lstrip('.') for p in paths)}}}"


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
        cmp = side_by_side(r)
        if cmp is not None:
            ran = cmp[cmp["ours"] != "–"]
            left_out = len(cmp) - len(ran)
            display(Markdown(f"**{r.artifact_id}: ours ({r.provenance.get('profile')} profile"
                             + (", exploration" if r.exploration else "") + ") next to the paper's**"
                             + (f" ({left_out} of the paper's {len(cmp)} rows not run here)" if left_out else "")))
            display(ran if len(ran) else cmp)


# ----------------------------------------------------------------------------- the call of a notebook
def notebook_call(notebook) -> tuple[str, str]:
    """(module, function) a generated notebook calls: its `from MODULE import FUNC` call cell
    (scripts/new_notebook.py writes it), so tests and re-rendering call what the notebook calls."""
    import re

    import nbformat

    from fedpaper.paths import REPO_ROOT

    path = Path(notebook)
    nb = nbformat.read(str(path if path.is_absolute() else REPO_ROOT / path), as_version=4)
    for c in nb.cells:
        m = re.search(r"^from (\S+) import (\w+)$", c.source, re.M) if c.cell_type == "code" else None
        if m and m.group(1) != "fedpaper.notebook":
            return m.group(1), m.group(2)
    raise ValueError(f"{notebook}: no 'from MODULE import FUNC' call cell")


def artifact_function_of(notebook):
    """The artifact function a notebook calls (see notebook_call)."""
    import importlib

    module, func = notebook_call(notebook)
    return getattr(importlib.import_module(module), func)
