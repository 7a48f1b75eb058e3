"""`fedpaper reproduce --rerender --profile P` redraws only what is committed at P: a notebook's other
artifacts (FedPALS Fig. 8b has long results, no paper ones) are not drawn from another profile's
results into P's folder."""
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_rerender_at_a_profile_writes_only_the_artifacts_committed_at_it(tmp_path):
    assert (REPO / "figures/paper/fedpals/fig8a.csv").is_file() and not (REPO / "figures/paper/fedpals/fig8b.csv").exists()
    assert (REPO / "figures/long/fedpals/fig8b.csv").is_file()
    env = dict(os.environ, FEDPAPER_CACHE=str(tmp_path / "cache"), FEDPAPER_PROGRESS="0", OMP_NUM_THREADS="1",
               MPLBACKEND="Agg", FEDPAPER_FIGURES=str(REPO / "figures"))  # read the committed results (conftest moves them)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "fedpaper.cli", "reproduce", "--rerender", "--profile", "paper",
                        "--only", "fedpals", "--no-report", "--no-download", "--out-dir", str(out)],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    written = {p.name for p in out.rglob("fig8*.csv")}
    assert "fig8a.csv" in written and "fig8b.csv" not in written, written
    assert "fedpals/fig8b: not re-rendered: no committed paper results" in r.stdout
