"""Leases on result-store keys (no Ray needed): exclusive, expiring, taken over from dead owners,
renewed by a heartbeat; and a task (`run_group`) that skips stored keys and waits for claimed ones."""
import json
import subprocess
import sys
import threading
import time

import pytest

from fedpaper.runs import leases
from fedpaper.runs.executors import run_group
from fedpaper.runs.store import ResultStore


def _lease(tmp_path, key="ab" + "0" * 62):
    return leases.lease_path(tmp_path, key)


def test_a_live_lease_is_exclusive_and_released_only_by_its_owner(tmp_path):
    p = _lease(tmp_path)
    a, b = leases.new_owner(), leases.new_owner()
    assert leases.try_acquire(p, a, ttl=30)
    held = json.loads(p.read_text())
    assert held["owner"] == a["owner"] and held["expires"] > time.time() + 25
    assert not leases.try_acquire(p, b, ttl=30)
    leases.release(p, b)  # not b's: stays
    assert p.exists() and not leases.renew(p, b, ttl=30)
    leases.release(p, a)
    assert not p.exists() and leases.try_acquire(p, b, ttl=30)


def test_an_expired_lease_is_taken_over(tmp_path):
    p = _lease(tmp_path)
    a, b = leases.new_owner(), leases.new_owner()
    assert leases.try_acquire(p, a, ttl=0.2)
    assert not leases.try_acquire(p, b, ttl=30)
    time.sleep(0.3)
    assert leases.try_acquire(p, b, ttl=30)
    assert json.loads(p.read_text())["token"] == b["token"]
    assert not leases.renew(p, a, ttl=30)  # a learns it lost the lease
    assert [q.name for q in p.parent.iterdir()] == [p.name]  # no tombstones or temporary files left


def test_a_dead_owner_on_this_host_is_taken_over_before_expiry(tmp_path):
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = dict(leases.new_owner(), pid=int(proc.stdout))
    p = _lease(tmp_path)
    assert leases.try_acquire(p, dead, ttl=3600)
    assert leases.try_acquire(p, leases.new_owner(), ttl=30)


def test_one_of_many_contenders_takes_over_an_expired_lease(tmp_path):
    p = _lease(tmp_path)
    assert leases.try_acquire(p, leases.new_owner(), ttl=0.05)
    time.sleep(0.1)
    owners = [leases.new_owner() for _ in range(12)]
    won = []
    start = threading.Barrier(len(owners))

    def contend(o):
        start.wait()
        if leases.try_acquire(p, o, ttl=30):
            won.append(o["token"])

    threads = [threading.Thread(target=contend, args=(o,)) for o in owners]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(won) == 1 and json.loads(p.read_text())["token"] == won[0]


def test_heartbeat_keeps_a_long_claim_alive_and_release_frees_it(tmp_path):
    keys = ["cd" + "1" * 62, "ef" + "2" * 62]
    with leases.claim_keys(tmp_path, keys, ttl=0.3) as claim:
        time.sleep(1.0)  # three times the ttl: only renewals keep it
        assert not any(leases.try_acquire(leases.lease_path(tmp_path, k), leases.new_owner(), ttl=1) for k in keys)
        assert not claim.lost
    assert not any(leases.lease_path(tmp_path, k).exists() for k in keys)


def test_waiting_for_a_live_claim_times_out_with_a_clear_error(tmp_path):
    k = "aa" + "3" * 62
    with leases.claim_keys(tmp_path, [k], ttl=30):
        with pytest.raises(leases.LeaseTimeout, match="still claimed by another worker"):
            with leases.claim_keys(tmp_path, [k, "bb" + "4" * 62], ttl=30, wait=0.3, poll=0.05):
                pass
    assert not leases.lease_path(tmp_path, "bb" + "4" * 62).exists()  # the partial claim was given back


def _no_build(spec):
    raise AssertionError("a stored group must not be built or trained")


def test_a_task_whose_keys_are_stored_is_not_run(tmp_path):
    store = ResultStore(tmp_path, code="test")
    specs = [{"run": 1}, {"run": 2}]
    for s in specs:
        store.put(s, {"value": s["run"]})
    out = run_group(specs, _no_build, str(tmp_path), "test")
    assert out["computed"] == 0


def test_a_task_waits_for_a_claimed_group_and_then_finds_it_stored(tmp_path):
    store = ResultStore(tmp_path, code="test")
    specs = [{"run": 1}, {"run": 2}]
    holder = leases.claim_keys(tmp_path, [store.key(s) for s in specs], ttl=30)
    holder.__enter__()

    def finish_later():
        time.sleep(0.5)
        for s in specs:
            store.put(s, {"value": s["run"]})
        holder.__exit__(None, None, None)

    t = threading.Thread(target=finish_later)
    t.start()
    out = run_group(specs, _no_build, str(tmp_path), "test")
    t.join()
    assert out["computed"] == 0 and store.get(specs[1]) == {"value": 2}
