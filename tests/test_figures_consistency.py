"""Committed figures equal what the code draws (issue 32, item 5).

Every committed figure (figures/ for quick, figures/long/ for long) is re-rendered from its own
committed csv and json, the way `fedpaper reproduce --rerender` does (FEDPAPER_RERENDER=1: nothing
trained, no data read; here with an empty data root and into a scratch folder), and compared with
the committed png: identical bytes, or the same size and pixels within RMS_TOLERANCE (0-255 scale),
which absorbs anti-aliasing differences between font libraries but not a changed word (a changed
subtitle line gives an RMS of about 15). A failure names the stale files and the command that
redraws them.
"""
import os
from pathlib import Path

import pytest

from fedpaper.outputs.artifacts import RERENDER_ENV, output_paths, profile_figures_dir
from fedpaper.claims.catalog import DRAWS_DATA
from fedpaper.ground.paths import REPO_ROOT

RMS_TOLERANCE = 2.0
PROFILES = ("quick", "long")
NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*/*.ipynb"))


def _artifacts(nb: Path) -> list:
    import json

    return json.loads(nb.read_text(encoding="utf-8"))["metadata"].get("fedpaper", {}).get("artifacts", [])


def _committed(profile: str, artifact_id: str) -> dict:
    return output_paths(artifact_id, REPO_ROOT / "figures" / ("" if profile == "quick" else profile))


# DRAWS_DATA: artifacts whose drawing shows images of the data set (not in their csv); a re-render
# refuses them (tests/outputs/test_rerender_draws_data.py), so their committed figures come from real runs.

CASES = [(profile, nb) for profile in PROFILES for nb in NOTEBOOKS
         if any(_committed(profile, a)["png"].is_file() for a in _artifacts(nb))
         and not set(_artifacts(nb)) <= DRAWS_DATA]


def rms(a_png: Path, b_png: Path) -> float:
    """Root mean square difference of two pngs on the 0-255 scale (inf for different sizes)."""
    import matplotlib.image as mimage
    import numpy as np

    a, b = mimage.imread(str(a_png)), mimage.imread(str(b_png))
    if a.shape != b.shape:
        return float("inf")
    return float(np.sqrt((((a - b) * 255.0) ** 2).mean()))


@pytest.fixture(scope="module")
def rerender_env(tmp_path_factory):
    empty = tmp_path_factory.mktemp("no-data")
    env = {RERENDER_ENV: "1", "FEDPAPER_DATA": str(empty), "MPLBACKEND": "Agg", "FEDPAPER_PROGRESS": "0",
           "FEDPAPER_FIGURES": str(REPO_ROOT / "figures"), "FEDPAPER_CACHE": str(tmp_path_factory.mktemp("cache"))}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield tmp_path_factory.mktemp("rerendered")
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.mark.parametrize("profile,nb", CASES, ids=[f"{p}:{n.relative_to(REPO_ROOT / 'notebooks')}" for p, n in CASES])
def test_committed_figures_are_what_the_code_draws(rerender_env, profile, nb):
    from fedpaper.notebook import artifact_function_of

    assert profile_figures_dir(profile).resolve() == (REPO_ROOT / "figures" / ("" if profile == "quick" else profile)).resolve()
    out = rerender_env / profile
    results = artifact_function_of(nb)(profile=profile, out_dir=str(out))
    results = results if isinstance(results, (list, tuple)) else [results]
    stale = []
    for r in results:
        committed = _committed(profile, r.artifact_id)["png"]
        if not committed.is_file() or r.artifact_id in DRAWS_DATA:
            continue
        assert r.status.startswith("re-rendered"), f"{r.artifact_id}: {r.status}"
        new = Path(r.paths["png"])
        if new.read_bytes() == committed.read_bytes():
            continue
        d = rms(new, committed)
        if d > RMS_TOLERANCE:
            stale.append(f"{committed.relative_to(REPO_ROOT)} (RMS {d:.1f})")
    assert not stale, (f"committed figures differ from what the code draws: {', '.join(stale)}; redraw them with "
                       f"`fedpaper reproduce --rerender --profile {profile} --only "
                       + " ".join(_artifacts(nb)) + "` and commit the pngs/pdfs")


def test_figures_that_draw_the_data_are_committed_from_real_runs():
    """The DRAWS_DATA figures were made with the data present (regenerated, not re-rendered)."""
    import json

    for profile in PROFILES:
        for aid in DRAWS_DATA:
            js = _committed(profile, aid)["json"]
            if js.is_file():
                rec = json.loads(js.read_text(encoding="utf-8"))
                assert "rerendered" not in rec and rec.get("status") == "regenerated", (profile, aid)
