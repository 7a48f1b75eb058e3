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
