"""Two local processes on one results cache train each run once (issue 31 item 4): runs are claimed
with leases (fedpaper.runs.leases) by executors.run_specs; a process waiting on a run another holds
says so and reads the result from the store; a killed or expired holder's claims are taken over.

Trainings are counted by wrapping experiment.train_group (the engine call every executor makes through runs.oom) in each process (one line per run
trained, appended to a counter file)."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from fedpaper.runs.leases import lease_path, new_owner
from fedpaper.runs.store import ResultStore

N_SPECS = 4

# A driver: a tiny FedPALS smoke sweep (synthetic stand-in data, 1 round) through run_specs on the
# store at argv[1]; every run trained appends its seed to argv[2]; each training then sleeps argv[3]
# seconds, or until the file argv[3] names exists (so that a second process meets the first one's
# claims however slowly it starts on a loaded machine); prints the results as JSON.
DRIVER = textwrap.dedent("""
    import json, sys, time
    from fedpaper.runs import executors as E, experiment as X
    from fedpaper.papers.fedpals import profiles as P, runs as R
    from fedpaper.runs.store import ResultStore

    import os
    root, counter, pause = sys.argv[1], sys.argv[2], sys.argv[3]
    inner = X.train_group

    def counted(setups, progress):
        out = inner(setups, progress)
        with open(counter, "a") as f:
            f.write("".join(f"{s.federation.seed}\\n" for s in setups))
        if pause.replace(".", "", 1).isdigit():
            time.sleep(float(pause))
        else:
            t0 = time.monotonic()
            while not os.path.exists(pause) and time.monotonic() - t0 < 600:
                time.sleep(0.05)
        return out

    X.train_group = counted
    p = P.runs("smoke")
    p.update(P.grid("smoke"))
    specs = [R.base_spec(p, "cifar10", {"scheme": "sparsity", "C": 3}, seed=s, rounds=1) for s in range(%d)]
    res = E.run_specs(specs, store=ResultStore(root), max_batch=2, progress=False)
    print("RESULTS " + json.dumps([r["final"] for r in res], sort_keys=True, default=str), flush=True)
""" % N_SPECS)


def _start(root, counter, pause):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    return subprocess.Popen([sys.executable, "-c", DRIVER, str(root), str(counter), str(pause)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


class _Output:
    """A process's output read line by line as it comes (so a test can wait for a line, not a time)."""

    def __init__(self, proc):
        self.proc, self.lines = proc, []
        self._reader = threading.Thread(target=lambda: self.lines.extend(iter(proc.stdout.readline, "")), daemon=True)
        self._reader.start()

    def wait_for(self, text: str, timeout: float = 300) -> None:
        t0 = time.monotonic()
        while not any(text in ln for ln in self.lines):
            assert self.proc.poll() is None or self._reader.is_alive(), "".join(self.lines)
            assert time.monotonic() - t0 < timeout, f"no line with {text!r} in {timeout} s: {''.join(self.lines)}"
            time.sleep(0.05)

    def communicate(self, timeout: float = 600) -> str:
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=60)
        return "".join(self.lines)


def _wait_for_training(counter, proc, timeout=300):
    """Until proc has trained its first group (it then pauses, holding its claims)."""
    t0 = time.monotonic()
    while not _trained(counter):
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() - t0 < timeout, "the first process never trained a run"
        time.sleep(0.05)


def _trained(counter) -> list:
    return sorted(Path(counter).read_text().split()) if Path(counter).exists() else []


def _results(out: str) -> list:
    line = [x for x in out.splitlines() if x.startswith("RESULTS ")]
    assert line, out
    return json.loads(line[-1][len("RESULTS "):])


def test_two_processes_train_each_run_once(tmp_path):
    root, counter = tmp_path / "results", tmp_path / "trained.txt"
    gate = tmp_path / "go"
    a = _start(root, counter, gate)  # trains its first group, then holds its claims until the gate opens
    _wait_for_training(counter, a)
    b = _start(root, counter, 0.0)
    ob = _Output(b)
    ob.wait_for("waiting for")  # b met a's claims (however long it took to start)
    gate.touch()
    out_a, out_b = a.communicate(timeout=600)[0], ob.communicate()
    assert a.returncode == 0 and b.returncode == 0, out_a + out_b
    assert _trained(counter) == [str(s) for s in range(N_SPECS)], (out_a, out_b)  # each run once
    assert "waiting for" in out_b, out_b  # b met a's claims and said so
    assert _results(out_a) == _results(out_b)  # b read a's results (and a b's) from the store
    assert len(ResultStore(root)) == N_SPECS and not list(Path(root).glob("*/*.lease"))


def test_a_killed_holders_claims_are_taken_over(tmp_path):
    root, counter = tmp_path / "results", tmp_path / "trained.txt"
    a = _start(root, counter, 600.0)  # trains its first group, then hangs holding the next claims
    _wait_for_training(counter, a)
    os.kill(a.pid, signal.SIGKILL)
    a.wait()
    assert list(Path(root).glob("*/*.lease"))  # a's leases are left behind, naming a dead pid
    b = _start(root, counter, 0.0)
    out_b = b.communicate(timeout=600)[0]
    assert b.returncode == 0, out_b
    # a stored nothing (it was killed before its results were written): b trains all, each once more
    trained = _trained(counter)
    assert sorted(set(trained)) == [str(s) for s in range(N_SPECS)], out_b
    assert len(trained) == N_SPECS + 2, (trained, out_b)  # a's first group (2 runs) + b's 4


def test_an_expired_lease_of_another_host_is_taken_over(tmp_path):
    """A lease written by a process on another host (its pid cannot be checked here) is respected
    until it expires, then claimed: here it expired a second ago, so the run trains at once."""
    root, counter = tmp_path / "results", tmp_path / "trained.txt"
    scratch = _scratch_results(tmp_path)  # its keys are the ones the driver claims
    for p in scratch.glob("*/*.pkl"):
        path = lease_path(root, p.stem)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dict(new_owner(), host="elsewhere", pid=1, owner="elsewhere:1:x",
                                        expires=time.time() - 1.0, ttl=120)))
    t0 = time.monotonic()
    b = _start(root, counter, 0.0)
    out_b = b.communicate(timeout=600)[0]
    assert b.returncode == 0, out_b
    assert _trained(counter) == [str(s) for s in range(N_SPECS)]
    assert "waiting for" not in out_b, out_b
    assert time.monotonic() - t0 < 300


def _scratch_results(tmp_path) -> Path:
    """A store holding the driver's results (its keys are the ones the driver claims)."""
    scratch = tmp_path / "scratch"
    first = _start(scratch, tmp_path / "scratch.txt", 0.0)
    assert first.wait(timeout=600) == 0, first.communicate()[0]
    assert len(list(scratch.glob("*/*.pkl"))) == N_SPECS
    return scratch


def test_a_live_claim_is_waited_for_and_its_result_read(tmp_path):
    """Runs claimed by a live holder on another host: the process waits (saying so), trains
    nothing, and returns the results the holder stores."""
    scratch = _scratch_results(tmp_path)
    root, counter = tmp_path / "results", tmp_path / "trained.txt"
    for p in scratch.glob("*/*.pkl"):
        path = lease_path(root, p.stem)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(dict(new_owner(), host="elsewhere", pid=1, owner="elsewhere:1:x",
                                        expires=time.time() + 600, ttl=600)))
    b = _start(root, counter, 0.0)
    ob = _Output(b)
    ob.wait_for("waiting for")  # b imports, builds its specs and meets the claims
    for p in scratch.glob("*/*.pkl"):  # the holder stores its results and releases its claims
        os.replace(p, root / p.parent.name / p.name)
        lease_path(root, p.stem).unlink()
    out_b = ob.communicate()
    assert b.returncode == 0, out_b
    assert "waiting for 2 run(s) being trained by another process (elsewhere:1)" in out_b, out_b
    assert _trained(counter) == []


def test_a_sweep_takes_free_runs_before_runs_another_process_holds(tmp_path):
    """Two workers on one store: a run held by another live process goes to the end of this
    sweep's queue, so this worker trains the free runs first instead of waiting (store.run_sweep,
    with a run_fn_many that claims and stores its runs itself, as sweep.leased does)."""
    from fedpaper.runs.sweep import run_sweep

    store = ResultStore(tmp_path / "results")
    specs = [{"i": i} for i in range(3)]
    path = lease_path(store.root, store.key(specs[0]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dict(new_owner(), host="elsewhere", pid=1, owner="elsewhere:1:x",
                                    expires=time.time() + 600, ttl=600)))
    calls = []

    def many(chunk):
        calls.append([s["i"] for s in chunk])
        for s in chunk:
            store.put(s, s["i"] * 10)
        return [s["i"] * 10 for s in chunk]

    many.stores_results = True
    assert run_sweep(specs, run_fn_many=many, batch_size=1, store=store, progress=False) == [0, 10, 20]
    assert calls == [[1], [2], [0]]
    # without a lease the order is the specs' own
    calls.clear()
    path.unlink()
    run_sweep([{"i": i} for i in range(3, 6)], run_fn_many=many, batch_size=1, store=store,
              progress=False)
    assert calls == [[3], [4], [5]]
