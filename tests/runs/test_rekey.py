"""fedpaper cache rekey: runs of an old code version are stored again under the current one only
when retraining the cheapest of them gives the same results (within the stated tolerance)."""
import json
import pickle

import numpy as np
import pytest

from fedpaper import cli
from fedpaper.runs import executors as X, experiment as E
from fedpaper.runs import rekey as R
from fedpaper.ground import files as GF
from fedpaper.runs import sweep as W
from fedpaper.papers.fedpals import profiles as FP
from fedpaper.papers.fedpals import runs as FR
from fedpaper.runs.store import ResultStore


def _specs():
    p = FP.runs("smoke")
    p.update(FP.grid("smoke"))
    return [FR.base_spec(p, "cifar10", {"scheme": "sparsity", "C": 3}, method=m, seed=0)
            for m in ("FedAvg", "FedProx")]


def _old_store(root, specs):
    """The specs' runs stored as if made by an older code version "old0000000000000+old"."""
    old = ResultStore(root, code="old0000000000000+old")
    results = X.run_specs(specs, execution=FR.execution(), store=old, progress=False,
                          scope=W.SweepScope(owner=("fedpals/table1", "smoke")))
    return old, results


def _entry(path):
    data = path.read_bytes()
    payload = GF.verified_payload(data)
    return pickle.loads(payload if payload is not None else data)


def test_first_difference_is_exact_and_names_the_place():
    a = {"history": [{"round": 1, "acc": 0.5}], "best": {"acc": float("nan")}}
    assert R.first_difference(a, json.loads(json.dumps(a).replace("NaN", "NaN"))) is None
    b = {"history": [{"round": 1, "acc": 0.5 + 1e-16 * 0 + 2 ** -40}], "best": {"acc": float("nan")}}
    assert R.first_difference(a, b) == f"result.history[0].acc: 0.5 != {0.5 + 2 ** -40!r}"
    assert "keys" in R.first_difference({"x": 1}, {"y": 1})
    assert R.first_difference([1, 2], [1]) == "result: 2 items != 1"


def test_rekey_retrains_the_cheapest_and_moves_every_run_only_when_equal(tmp_path):
    specs = _specs()
    old, results = _old_store(tmp_path, specs)
    cur = ResultStore(tmp_path)  # the current code version
    keys = [E.store_key(s) for s in specs]
    assert not any(k in cur for k in keys)
    said = []
    out = R.rekey(cur, only=["fedpals/table1"], profile="smoke", verify=1, say=said.append)
    ((paper, was), c), = out.items()
    assert (paper, was, c["runs"], len(c["verified"])) == ("fedpals", "old0000000000000+old", 2, 1)
    assert "bit for bit" in said[-1]
    for k, r in zip(keys, results):
        assert R.first_difference(R._compared(cur.get(k)), R._compared(r)) is None
        e = _entry(cur.path(k))
        assert e["rekeyed"]["from"] == "old0000000000000+old" and e["rekeyed"]["to"] == cur.code_of(k)
    assert old.get(keys[0]) is not None  # the old entries are kept
    assert cur.progress("fedpals/table1", "smoke") == (2, 2)  # the index knows the rekeyed runs
    assert len(list((tmp_path / R.REKEYS_DIR).glob("*.json"))) == 1
    with pytest.raises(R.RekeyError, match="nothing to rekey"):
        R.rekey(cur, only=["fedpals"], verify=1, say=said.append)


def test_a_run_stored_under_several_older_versions_is_checked_once_from_its_newest_entry(tmp_path):
    """Each rekey leaves the entries it read: a run is then stored under several older versions.
    It is checked and stored again once, from its newest entry; the older entries give way (one
    line says so) and the index that records them learns the current keys too."""
    from fedpaper.runs.store import spec_json

    specs = _specs()
    old, results = _old_store(tmp_path, specs)  # recorded under fedpals/table1 (smoke)
    newer = ResultStore(tmp_path, code="new0000000000000+old")
    for s, r in zip(specs, results):
        key = E.store_key(s)
        newer._write(newer.path(key), {"spec": spec_json(key), "code": newer.code_of(key),
                                       "created": "2999-01-01T00:00:00+00:00", "result": r})
    newer.record("fedpals/fig9", "smoke", [E.store_key(s) for s in specs])
    cur = ResultStore(tmp_path)
    said = []
    out = R.rekey(cur, only=["fedpals"], verify=1, say=said.append)
    assert list(out) == [("fedpals", "new0000000000000+old")] and out[("fedpals", "new0000000000000+old")]["runs"] == 2
    assert "2 older entries of the same runs left as they are" in said[0]
    assert sum("bit for bit" in line for line in said) == 1
    for s in specs:
        assert _entry(cur.path(E.store_key(s)))["rekeyed"]["from"] == "new0000000000000+old"
    assert cur.progress("fedpals/table1", "smoke") == (2, 2)  # the older entries' index too
    assert cur.progress("fedpals/fig9", "smoke") == (2, 2)


def test_runs_no_index_records_are_found_by_their_paper_or_by_what_they_are(tmp_path):
    """An archive made before runs were recorded (FedPALS fig8a's, from a GPU) records no run under
    any artifact: `--only ARTIFACT --profile P` finds its stale runs by their specs (the CLI collects
    what the artifact needs, `needed`), `--only PAPER` by their paper (the import note's command)."""
    specs = _specs()
    old = ResultStore(tmp_path, code="old0000000000000+old")
    X.run_specs(specs, execution=FR.execution(), store=old, progress=False)  # no sweep owner: no record
    cur = ResultStore(tmp_path)
    assert cur.recorded("fedpals/table1", "smoke") == {}
    with pytest.raises(R.RekeyError, match=r"no runs of fedpals/table1 \(profile smoke\).*--profile P"):
        R.rekey(cur, only=["fedpals/table1"], profile="smoke", verify=1, say=lambda *_: None)
    first = E.store_key(specs[0])
    out = R.rekey(cur, only=["fedpals/table1"], profile="smoke", verify=1, needed=[first],
                  say=lambda *_: None)
    assert [c["runs"] for c in out.values()] == [1]
    assert E.store_key(specs[0]) in cur and E.store_key(specs[1]) not in cur
    out = R.rekey(cur, only=["fedpals"], verify=1, say=lambda *_: None)  # the rest of the paper's runs
    assert [c["runs"] for c in out.values()] == [1]
    assert E.store_key(specs[1]) in cur
    with pytest.raises(R.RekeyError, match="nothing to rekey"):
        R.rekey(cur, only=["privlabels"], verify=1, say=lambda *_: None)


def test_cli_rekey_of_an_artifact_finds_runs_its_exploration_left_unrecorded(tmp_path, monkeypatch, capsys):
    """End to end: fedpals fig9's smoke runs made by an "older code" (a pinned version) in an
    exploration (explicit seeds, the profile's own, so the same runs: nothing recorded), then `fedpaper cache rekey --only fedpals/fig9
    --profile smoke` finds them by what the artifact needs, retrains the cheapest, stores them all."""
    from fedpaper.papers import fedpals
    from fedpaper.runs.versions import CODE_VERSION_ENV

    monkeypatch.setenv("FEDPAPER_CACHE", str(tmp_path))
    monkeypatch.setenv(CODE_VERSION_ENV, "old0000000000000")
    fedpals.fig9(profile="smoke", seeds=[0, 1], out_dir=tmp_path / "out")
    made = sorted(p.name for p in (tmp_path / "results").rglob("*.pkl"))
    assert made and ResultStore(tmp_path / "results").indexes() == []
    monkeypatch.delenv(CODE_VERSION_ENV)
    assert cli.main(["cache", "rekey", "--only", "fedpals/fig9", "--profile", "smoke"]) == 0
    out = capsys.readouterr().out
    assert f"rekeyed {len(made)} fedpals runs from code old0000000000000+old0000000000000" in out, out


def test_a_run_the_current_code_does_not_reproduce_stops_everything(tmp_path, capsys):
    specs = _specs()
    old, _ = _old_store(tmp_path, specs)
    for s in specs:  # as if the old code had computed other numbers
        p = old.path(E.store_key(s))
        e = _entry(p)
        e["result"]["history"][0]["train_loss"] += 1.0
        ResultStore._write(p, e)
    cur = ResultStore(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    with pytest.raises(R.RekeyError, match=r"not reproduced by this code .*history\[0\]\.train_loss"):
        R.rekey(cur, verify=1, say=lambda *_: None)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == before  # nothing written
    assert not any(E.store_key(s) in cur for s in specs)


def test_cli_rekey_bad_input_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FEDPAPER_CACHE", str(tmp_path))
    assert cli.main(["cache", "rekey", "--verify", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--verify 0" in err[0]
    assert cli.main(["cache", "rekey", "--only", "fedpals/table1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no runs of fedpals/table1" in err[0]


def test_a_spec_that_is_not_a_run_spec_is_refused(tmp_path):
    old = ResultStore(tmp_path, code="old0000000000000+old")
    old.put({"paper": "fedpals", "method": "fedavg", "seed": 0}, {"acc": 0.5, "log": {}})
    with pytest.raises(R.RekeyError, match="not a fedpaper RunSpec run"):
        R.rekey(ResultStore(tmp_path), verify=1, say=lambda *_: None)


def test_runs_that_ran_every_round_are_checked_first():
    full = {"result": {"diverged_at": None, "log": {"samples": 900}}}
    early = {"result": {"diverged_at": 4, "log": {"samples": 20}}}
    small = {"result": {"diverged_at": None, "log": {"samples": 100}}}
    order = sorted([("a", early), ("b", full), ("c", small)], key=R._check_order)
    assert [k for k, _ in order] == ["c", "b", "a"]


def test_a_store_key_does_not_depend_on_what_was_imported_before(tmp_path):
    """FedMT's runs read CIFAR-100 through the paper's own pools builder, registered when the paper is
    imported; `fedpaper cache rekey` (which imports no paper) computed their key with no data copy
    and refused every run. store_key imports the run's paper itself."""
    import subprocess
    import sys

    from fedpaper.papers.fedmt import runs as MR
    from fedpaper.papers.fedmt.profiles import settings

    spec = MR.spec(settings("quick"), "FedMT (E)", 0)  # real CIFAR-100 (the smoke profile uses a stand-in)
    (tmp_path / "cifar100").mkdir()
    (tmp_path / "cifar100" / "cifar100-jpeg95.zip").write_bytes(b"0" * 10)  # a copy, as its name and size tell
    here = E.store_key(spec, str(tmp_path))
    assert here["data_copy"] is not None
    code = ("import json, sys; from fedpaper.runs.experiment import RunSpec, store_key; "
            "s = RunSpec(**json.loads(sys.argv[1])); print(json.dumps(store_key(s, sys.argv[2])['data_copy']))")
    out = subprocess.run([sys.executable, "-c", code, spec.to_json(), str(tmp_path)], capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out) == here["data_copy"]


LEGACY_FIELDS = ("name", "client", "server", "private", "tuning", "mu", "fedrs_alpha", "lam", "afl_step",
                 "tuning_epochs", "tuning_optimizer", "tuning_lr")  # Method.spec() before one form (issue 33)


def test_runs_cached_with_a_method_in_the_old_form_migrate_to_its_parts(tmp_path):
    """A store whose runs' methods are the fields of a flat Method (the cache keys before a method had
    one form) is rekeyed to the parts' spec: the cheapest run retrained bit for bit, every run then
    found under the key the current code computes, the old entries kept."""
    from dataclasses import asdict

    specs = _specs()
    old, results = _old_store(tmp_path, specs)
    legacy_keys = []
    for s in specs:
        key = E.store_key(s)
        e = _entry(old.path(key))
        m = asdict(FR.method_of(s.tags["method"], FP.runs("smoke")["hyper"]))
        lkey = {**key, "run": {**key["run"], "method": {k: m[k] for k in LEGACY_FIELDS}}}
        ResultStore._write(old.path(lkey), {**e, "spec": E.spec_json(lkey)})
        old.path(key).unlink()
        legacy_keys.append(lkey)
    old.record("fedpals/table1", "smoke", legacy_keys)
    cur = ResultStore(tmp_path)
    assert not any(E.store_key(s) in cur for s in specs)
    out = R.rekey(cur, only=["fedpals/table1"], profile="smoke", verify=1, say=lambda *_: None)
    assert [c["runs"] for c in out.values()] == [2]
    for s, r in zip(specs, results):
        assert R.first_difference(R._compared(cur.get(E.store_key(s))), R._compared(r)) is None
    assert all(old.path(k).is_file() for k in legacy_keys)


def test_first_difference_within_a_tolerance():
    a = {"history": [{"round": 1, "acc": 0.5, "n": 3}], "arr": np.array([1.0, float("nan")])}
    b = {"history": [{"round": 1, "acc": 0.5 * (1 + 1e-5), "n": 3}], "arr": np.array([1.0 + 1e-5, float("nan")])}
    assert R.first_difference(a, b) is not None  # bit for bit by default
    assert R.first_difference(a, b, rtol=R.RTOL, atol=R.ATOL) is None
    c = {"history": [{"round": 1, "acc": 0.5 * (1 + 1e-2), "n": 3}], "arr": a["arr"]}
    assert "history[0].acc" in R.first_difference(a, c, rtol=R.RTOL, atol=R.ATOL)
    d = {"history": [{"round": 1, "acc": 0.5, "n": 4}], "arr": a["arr"]}  # integers stay exact
    assert "history[0].n: 3 != 4" in R.first_difference(a, d, rtol=1.0, atol=1.0)
    e = {"history": a["history"], "arr": np.array([1.1, float("nan")])}
    assert "arrays differ" in R.first_difference(a, e, rtol=R.RTOL, atol=R.ATOL)
    assert R.largest_relative_difference(b, a) == pytest.approx(1e-5, rel=1e-3)


def test_rekey_accepts_a_rounding_sized_difference_within_the_tolerance_only(tmp_path):
    """A stored run whose losses differ from the current code's in the 6th digit (another CPU's
    rounding) is rekeyed under the default tolerance and refused bit for bit; a 1 % change is refused."""
    specs = _specs()
    old, _ = _old_store(tmp_path, specs)
    for s in specs:
        p = old.path(E.store_key(s))
        e = _entry(p)
        for h in e["result"]["history"]:
            h["train_loss"] *= 1 + 1e-6
        ResultStore._write(p, e)
    cur = ResultStore(tmp_path)
    with pytest.raises(R.RekeyError, match=r"within rtol 0, atol 0: .*train_loss"):
        R.rekey(cur, verify=1, rtol=0, atol=0, say=lambda *_: None)
    said = []
    out = R.rekey(cur, verify=1, say=said.append)
    (c,) = out.values()
    assert c["runs"] == 2 and 0 < c["verified"][0]["max_rel"] < R.RTOL
    assert "within rtol 0.001" in said[-1]
    assert _entry(cur.path(E.store_key(specs[0])))["rekeyed"]["rtol"] == R.RTOL
    with pytest.raises(R.RekeyError, match="cannot be negative"):
        R.rekey(cur, verify=1, rtol=-1, say=lambda *_: None)


def test_rekey_refuses_a_change_beyond_the_tolerance(tmp_path):
    specs = _specs()
    old, _ = _old_store(tmp_path, specs)
    for s in specs:
        p = old.path(E.store_key(s))
        e = _entry(p)
        e["result"]["history"][-1]["train_loss"] *= 1.01
        ResultStore._write(p, e)
    with pytest.raises(R.RekeyError, match=r"within rtol 0.001, atol 1e-06: .*train_loss"):
        R.rekey(ResultStore(tmp_path), verify=1, say=lambda *_: None)
