"""Output folders are checked before any training: an unwritable or full folder fails at once with
one line naming the folder and the fix (BadParameterError in a notebook, exit 2 on the CLI)."""
import os
import subprocess
import sys
import time
from collections import namedtuple

import pytest

from fedpaper.outputs import artifacts as A
from pipeline_harness import run_artifact
from fedpaper.ground.errors import BadParameterError
from fedpaper.ground.paths import unwritable_reason


def _never(*a, **k):
    raise AssertionError("trained although the output folder cannot be written")


def test_out_dir_under_a_file_fails_before_compute(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(BadParameterError, match=r"cannot write results to out_dir .*a-file.* is a file, not a folder; "
                                                 r"pass a folder \(out_dir= in a notebook, --out-dir on the CLI\)$"):
        run_artifact("fedpals/table1", profile="quick", params={}, compute=_never, draw=_never,
                       datasets=["none"], out_dir=blocker / "out")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a chmod 555 folder; the file case above covers it")
def test_read_only_out_dir_fails_before_compute(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(BadParameterError, match="is not writable"):
            run_artifact("fedpals/table1", profile="quick", params={}, compute=_never, draw=_never,
                           datasets=["none"], out_dir=ro)
    finally:
        ro.chmod(0o755)


def test_full_out_dir_is_refused(tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr("shutil.disk_usage", lambda p: usage(10**9, 10**9 - 2**20, 2**20))
    why = unwritable_reason(tmp_path)
    assert why and "1 MiB free" in why
    with pytest.raises(BadParameterError, match="MiB free"):
        A.resolve_out_dir("quick", tmp_path / "new")


def test_writable_missing_folder_is_fine_and_not_created(tmp_path):
    assert unwritable_reason(tmp_path / "not" / "yet") is None
    assert not (tmp_path / "not").exists()
    assert not list(tmp_path.iterdir())  # the probe file is gone


def test_cli_unwritable_out_dir_exits_2_with_one_line_in_seconds(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    env = {**os.environ, "FEDPAPER_CACHE": str(tmp_path / "cache")}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "fedpaper.cli", "reproduce", "--profile", "quick", "--only",
                        "fedpals/table1", "--no-download", "--out-dir", str(blocker / "out")],
                       capture_output=True, text=True, env=env, timeout=60)
    took = time.perf_counter() - t0
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and "a-file is a file, not a folder" in lines[0] and "--out-dir" in lines[0], lines
    assert "free space" not in lines[0] and "permissions" not in lines[0], lines
    assert took < 5, took
