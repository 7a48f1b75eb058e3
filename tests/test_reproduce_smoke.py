"""`fedpaper reproduce --profile smoke` as a user types it, in a subprocess: it ends with exit 0 (a
smoke run has no committed results to restamp), says only what the selected artifacts need, and
writes only the artifacts asked for."""
import os
import subprocess
import sys

import pytest

from fedpaper.ground.paths import REPO_ROOT


def reproduce(tmp_path, *args, data_root=None, timeout=600):
    """`fedpaper reproduce ...` with the cache, figures and README in tmp_path (one torch thread)."""
    env = dict(os.environ, FEDPAPER_CACHE=str(tmp_path / "cache"), FEDPAPER_FIGURES=str(tmp_path / "figures"),
               FEDPAPER_README=str(tmp_path / "README.md"), OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    if data_root is not None:
        env["FEDPAPER_DATA"] = str(data_root)
    return subprocess.run([sys.executable, "-m", "fedpaper.cli", "reproduce", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO_ROOT, env=env)


def written(tmp_path) -> list[str]:
    """The artifacts (csv files) a smoke run wrote, as ids."""
    root = tmp_path / "cache" / "smoke-figures"
    return sorted(f"{p.parent.name}/{p.stem}" for p in root.glob("*/*.csv"))


@pytest.mark.parametrize("extra", [(), ("--no-report", "--force")], ids=["with-report", "no-report-force"])
def test_smoke_reproduce_of_one_artifact_exits_0(tmp_path, extra):
    proc = reproduce(tmp_path, "--profile", "smoke", "--only", "fedpals/fig9", *extra)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "error" not in proc.stderr.lower() and "Traceback" not in out, out
    assert "regenerated     fedpals/fig9" in proc.stdout, out
    assert written(tmp_path) == ["fedpals/fig9"]


def test_smoke_table1_exits_0(tmp_path):
    proc = reproduce(tmp_path, "--profile", "smoke", "--only", "fedpals/table1", "--no-report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert written(tmp_path) == ["fedpals/table1"]
