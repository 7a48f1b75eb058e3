"""Kill safety of `fedpaper reproduce`: after SIGKILL of its process group the notebook kernel dies
too and stale temporary files go on the next start; Ctrl-C ends with one line and exit code 130."""
import glob
import os
import signal
import subprocess
import sys
import time

import pytest

from fedpaper.runs import store as S
from fedpaper.ground import files as GF
from fedpaper.ground.paths import REPO_ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

ARTIFACT = "fedpals/table1"  # a smoke sweep of several runs


def _processes_with(marker: str) -> list[int]:
    """Pids whose environment holds FEDPAPER_CACHE=<marker> (the command and its kernel)."""
    out = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"FEDPAPER_CACHE={marker}".encode() in env:
            out.append(int(d[6:]))
    return out


def _start_smoke_sweep(cache, until="a result is stored"):
    env = dict(os.environ, FEDPAPER_CACHE=str(cache), PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    proc = subprocess.Popen([sys.executable, "-m", "fedpaper.cli", "reproduce", "--profile", "smoke", "--only",
                             ARTIFACT, "--no-report", "--force"], cwd=REPO_ROOT, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    def ready():
        if until == "a result is stored":  # the kernel is in the sweep
            return bool(list((cache / "results").glob("*/*.pkl")))
        return len(_processes_with(str(cache))) >= 2  # the kernel runs

    t0 = time.time()
    while not ready():
        if proc.poll() is not None or time.time() - t0 > 90:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"not ready ({until}): {proc.communicate()}")
        time.sleep(0.1)
    return proc


def _entries(cache):
    return len(list((cache / "results").glob("*/*.pkl")))


def test_sigkill_of_the_command_kills_the_kernel_and_stale_temps_go(tmp_path):
    cache = tmp_path / "cache"
    proc = _start_smoke_sweep(cache)
    kernels = [p for p in _processes_with(str(cache)) if p != proc.pid]
    assert kernels, "no kernel process found"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    t0 = time.time()
    while _processes_with(str(cache)) and time.time() - t0 < 5:
        time.sleep(0.05)
    gone_after = time.time() - t0
    assert not _processes_with(str(cache)), "the kernel outlived the killed command"
    assert gone_after < 1.0, gone_after
    n = _entries(cache)
    time.sleep(1.0)
    assert _entries(cache) == n  # nothing writes any more
    # a temporary file of the dead kernel (as a kill mid-write leaves) is removed on the next start
    folder = next((cache / "results").glob("*/"))
    stale = folder / f"{GF.TMP_PREFIX}x.pkl.{kernels[0]}.abcd1234.pkl"
    stale.write_bytes(b"")
    S.ResultStore(cache / "results")
    assert not list((cache / "results").rglob(GF.TMP_PREFIX + "*"))


def test_ctrl_c_is_one_line_and_exit_130(tmp_path):
    cache = tmp_path / "cache"
    proc = _start_smoke_sweep(cache, until="the kernel runs")
    time.sleep(2)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "zmq" not in err.lower(), err
    lines = [ln for ln in err.splitlines() if ln.strip() and "notebooks:" not in ln]  # tqdm's bar aside
    assert lines == ["fedpaper: interrupted; finished runs are cached, run the same command again to resume"]
    t0 = time.time()
    while _processes_with(str(cache)) and time.time() - t0 < 5:
        time.sleep(0.05)
    assert not _processes_with(str(cache))
