"""`fedpaper reproduce --workers N` (what `make figures` runs): N notebooks at once, each kernel with one
torch thread, on one results cache. Two notebooks that need the same runs (FedPALS Table 1 and its compute
ladder, whose top rung is the profile's Table 1) run side by side at smoke: every artifact is written once,
no run is stored twice, both kernels train, and the command says what it runs and how long it took."""
import json
import os
import subprocess
import sys
import textwrap
from collections import Counter

import pytest

from fedpaper import cli
from fedpaper.ground.paths import REPO_ROOT

# Loaded by every Python process started with this folder on PYTHONPATH (the CLI and its kernels): logs each
# store write (the run's key) and each artifact's status report (its csv), with the writing process's pid.
HOOK = textwrap.dedent('''
    import importlib.abc, importlib.util, json, os, sys

    LOG = os.environ["FEDPAPER_TEST_WRITE_LOG"]

    def log(kind, name):
        with open(LOG, "a") as f:
            f.write(json.dumps({"kind": kind, "name": name, "pid": os.getpid()}) + "\\n")

    def patch(module):
        if module.__name__ == "fedpaper.runs.store":
            put = module.ResultStore.put
            def logged_put(self, spec, result):
                log("run", self.key(spec))
                return put(self, spec, result)
            module.ResultStore.put = logged_put
        elif module.__name__ == "fedpaper.outputs.artifacts":
            report = module.report_status
            def logged_report(artifact_id, kind, status, paths):
                log("artifact", str(paths["csv"]))
                return report(artifact_id, kind, status, paths)
            module.report_status = logged_report

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name not in ("fedpaper.runs.store", "fedpaper.outputs.artifacts"):
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            exec_module = spec.loader.exec_module
            def exec_and_patch(module):
                exec_module(module)
                patch(module)
            spec.loader.exec_module = exec_and_patch
            return spec

    sys.meta_path.insert(0, Finder())
''')


def test_two_workers_share_one_cache_and_train_no_run_twice(tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    log = tmp_path / "writes.jsonl"
    env = dict(os.environ, FEDPAPER_CACHE=str(tmp_path / "cache"), FEDPAPER_FIGURES=str(tmp_path / "figures"),
               FEDPAPER_README=str(tmp_path / "README.md"), MPLBACKEND="Agg", FEDPAPER_TEST_WRITE_LOG=str(log),
               PYTHONPATH=os.pathsep.join(p for p in [str(hook), os.environ.get("PYTHONPATH")] if p))
    env.pop("OMP_NUM_THREADS", None)  # --workers sets it for the kernels
    proc = subprocess.run([sys.executable, "-m", "fedpaper.cli", "reproduce", "--profile", "smoke", "--only",
                           "fedpals/table1", "fedpals/scaling", "--workers", "2", "--no-report"],
                          capture_output=True, text=True, timeout=900, cwd=REPO_ROOT, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Traceback" not in out, out
    assert "2 workers, one torch thread each" in proc.stdout, out
    assert "fedpals: 2 notebook(s), 2 artifact(s)" in proc.stdout, out
    assert "took " in proc.stdout.splitlines()[-1], out

    writes = [json.loads(line) for line in log.read_text().splitlines()]
    runs = Counter(w["name"] for w in writes if w["kind"] == "run")
    artifacts = Counter(w["name"] for w in writes if w["kind"] == "artifact")
    assert runs and max(runs.values()) == 1, [k for k, n in runs.items() if n > 1]  # no run trained twice
    assert artifacts and max(artifacts.values()) == 1, artifacts  # every artifact (a ladder's rungs too) made once
    figures = tmp_path / "cache" / "smoke-figures" / "fedpals"
    assert {str(figures / "table1.csv"), str(figures / "scaling.csv")} <= set(artifacts), artifacts
    trainers = {w["pid"] for w in writes if w["kind"] == "run"}
    assert len(trainers) == 2, "both kernels should have trained runs side by side"
    # the ladder's top rung is Table 1 at the profile: it read Table 1's runs instead of training them again
    scaling = json.loads((figures / "scaling.json").read_text())
    table1 = json.loads((figures / "table1.json").read_text())
    assert scaling["runs"]["runs"] + table1["runs"]["runs"] > len(runs), (scaling["runs"], table1["runs"], len(runs))


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_bad_workers_is_one_line(value):
    with pytest.raises(cli.UsageError, match="--workers .* positive number .* or 'auto'"):
        cli.resolve_workers(value)


def test_auto_workers_is_at_least_one_and_at_most_the_cores():
    n = cli.resolve_workers("auto")
    assert 1 <= n <= len(os.sched_getaffinity(0))


def test_makefile_figures_runs_one_worker_per_free_core():
    make = subprocess.run(["make", "-n", "figures"], capture_output=True, text=True, cwd=REPO_ROOT)
    line = next(ln for ln in make.stdout.splitlines() if "fedpaper reproduce" in ln)
    assert "--workers auto" in line, make.stdout


def _stat(monkeypatch, samples):
    """cli._cpu_times returns the (free, total) tick pairs of `samples` in turn."""
    it = iter(samples)
    monkeypatch.setattr(cli, "_cpu_times", lambda: next(it))
    monkeypatch.setattr(cli.time, "sleep", lambda s: None)
    monkeypatch.setattr(cli.os, "cpu_count", lambda: 2)


def test_auto_workers_counts_the_cores_free_now_not_the_load_average(monkeypatch):
    """Right after an install the one-minute load average still reads ~1 on an idle 2-core machine; the
    free cores are measured over a short sample instead."""
    monkeypatch.setattr(cli.os, "getloadavg", lambda: (1.4, 1.0, 0.8))
    _stat(monkeypatch, [(1000, 2000), (1190, 2200)])  # 190 of 200 ticks free: both cores idle
    assert cli.free_cores(2) == 2
    _stat(monkeypatch, [(1000, 2000), (1100, 2200)])  # half the ticks busy: one core busy
    assert cli.free_cores(2) == 1
    _stat(monkeypatch, [(1000, 2000), (1000, 2200)])  # all busy: still one worker
    assert cli.free_cores(2) == 1
