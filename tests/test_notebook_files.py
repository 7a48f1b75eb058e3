"""The committed notebooks are exactly what the nbstripout git filter stages (Makefile, .gitattributes):
otherwise every fresh clone shows them modified, every run's provenance says "dirty", and each
`git status` runs the filter over them."""
import copy
import re
from pathlib import Path

import nbformat
import pytest
from nbstripout import strip_output

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").rglob("*.ipynb"))


def _extra_keys() -> list:
    m = re.search(r'^NBSTRIPOUT_EXTRA_KEYS\s*:?=\s*(.+)$', (REPO / "Makefile").read_text(), re.M)
    return m.group(1).strip().strip('"').split() if m else []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(REPO)))
def test_committed_notebook_is_in_the_filters_normal_form(path):
    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    stripped = strip_output(copy.deepcopy(nb), keep_output=False, keep_count=False, keep_id=False,
                            extra_keys=_extra_keys())
    assert nb == stripped, f"{path.name}: not in nbstripout's normal form; run `git add --renormalize {path}`"


def _new_notebook_module():
    from repo_scripts import load_script

    return load_script("scripts/new_notebook.py")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(REPO)))
def test_committed_notebook_is_what_the_generator_writes(path, tmp_path):
    """`scripts/new_notebook.py --refresh` changes nothing: the standard cells, the read-only cells
    that explain the run included, are the generator's (issue 32, item 6)."""
    import shutil

    copy_ = tmp_path / path.name
    shutil.copy(path, copy_)
    _new_notebook_module().refresh(copy_)
    assert copy_.read_bytes() == path.read_bytes(), \
        f"{path.name}: not the generator's cells; run `python scripts/new_notebook.py --refresh {path.relative_to(REPO)}`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(REPO)))
def test_notebook_explains_its_run_in_read_only_cells(path):
    nb = nbformat.read(path, as_version=4)
    show = next(i for i, c in enumerate(nb.cells) if c.source.startswith("show(result)"))
    tail = nb.cells[show + 1:]
    calls = [c.source.split("(")[0] for c in tail if c.cell_type == "code"]
    assert calls == ["show_specs", "show_seeds", "show_vs_paper", "show_claims"], path.name
    for c in tail:
        assert c.metadata.get("editable") is False and c.metadata.get("deletable") is False, (path.name, c.source)
    headers = [c.source for c in tail if c.cell_type == "markdown"]
    assert len(headers) == 4 and all(h.startswith("### ") and "\n" not in h for h in headers), path.name


def test_explaining_calls_work_on_every_committed_result(monkeypatch, capsys):
    """show_specs / show_seeds / show_vs_paper / show_claims on every committed result (figures/ and
    figures/long/, the table shapes the notebooks meet at quick and long): no error, something shown."""
    import IPython.display

    from fedpaper import notebook as N
    from fedpaper.outputs.artifacts import ArtifactResult, committed_records, load_committed

    monkeypatch.setenv("FEDPAPER_FIGURES", str(REPO / "figures"))
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **kw: shown.extend(objs))
    ids = sorted({f"{p.parent.name}/{p.stem}" for p in committed_records(REPO / "figures")})
    assert len(ids) > 50
    for aid in ids:
        for profile in ("quick", "long"):
            table, rec = load_committed(aid, profile)
            if table is None:
                continue
            r = ArtifactResult(aid, table, None, rec)
            for show in (N.show_specs, N.show_seeds, N.show_vs_paper, N.show_claims):
                before = len(shown)
                show(r)
                assert len(shown) > before or capsys.readouterr().out.startswith(aid + ": "), \
                    (aid, profile, show.__name__)
    assert shown
