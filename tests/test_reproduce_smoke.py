"""`fedpaper reproduce --profile smoke` as a user types it, in a subprocess: it ends with exit 0 (a
smoke run has no committed results to restamp), says only what the selected artifacts need, and
writes only the artifacts asked for."""
import os
import subprocess
import sys

import pytest

from fedpaper import cli
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


def test_only_the_data_the_selection_needs_is_mentioned(tmp_path):
    """fedpals/fig9 needs no data set: on a machine without any, the run says nothing about the others."""
    (tmp_path / "nodata").mkdir()
    proc = reproduce(tmp_path, "--profile", "smoke", "--only", "fedpals/fig9", data_root=tmp_path / "nodata")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "report: " in proc.stdout, proc.stdout
    assert not [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("here:")], proc.stdout


def test_a_running_notebook_says_how_it_is_getting_on(tmp_path, monkeypatch, capfd):
    """Progress that moves while a notebook runs (its own bars go to its executed copy): a line every
    PROGRESS_EVERY_S with the time it has run."""
    monkeypatch.setenv("FEDPAPER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FEDPAPER_FIGURES", str(tmp_path / "figures"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(cli, "PROGRESS_EVERY_S", 0.5)
    assert cli.main(["reproduce", "--profile", "smoke", "--only", "fedpals/fig9", "--no-report"]) == 0
    err = capfd.readouterr().err
    ticks = [ln for ln in err.splitlines() if ln.startswith("running notebooks/fedpals/fig9.ipynb: ")]
    assert len(ticks) >= 2, err
    assert ticks[0] != ticks[-1], ticks  # the time moves


def test_progress_line_names_the_runs_done():
    class Store:
        def progress(self, aid, profile):
            return (12, 40) if aid == "fedpals/table1" else None

    line = cli.progress_line("notebooks/fedpals/table1.ipynb", 150.2, ["fedpals/table1", "fedpals/x"], "quick", Store())
    assert line == "running notebooks/fedpals/table1.ipynb: 2 min 30 s; fedpals/table1 12 of 40 runs done"


def test_only_one_artifact_of_a_notebook_that_makes_several(tmp_path):
    """notebooks/fedpals/label_marginals.ipynb makes Figs 2a, 2b, 5a, 5b and 6a; --only fedpals/fig2a makes 2a."""
    proc = reproduce(tmp_path, "--profile", "smoke", "--only", "fedpals/fig2a", "--no-report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert written(tmp_path) == ["fedpals/fig2a"], proc.stdout
    assert [ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("regenerated")] == ["fedpals/fig2a:"]


def test_out_dir_that_is_a_file_is_told_so(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    proc = reproduce(tmp_path, "--profile", "smoke", "--only", "fedpals/fig9", "--out-dir", str(blocker))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [f"fedpaper: error: cannot write results to out_dir {str(blocker)!r}: {blocker} "
                                        "is a file, not a folder; pass a folder (out_dir= in a notebook, --out-dir "
                                        "on the CLI)"], proc.stderr
