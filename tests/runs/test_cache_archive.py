"""Sweeps in pieces: --max-hours stops between runs and resumes; finished runs travel in a
checksummed archive (fedpaper cache export / import); bad archives are one line, exit 2."""
import gzip
import io
import json
import os
import tarfile

import pytest

from fedpaper.runs import archive as A
from fedpaper import cli
from fedpaper.runs import versions as V
from fedpaper.runs import sweep as W
from fedpaper.ground.errors import BadParameterError
from fedpaper.runs.store import ResultStore
from fedpaper.runs.sweep import SweepStopped, run_sweep


def specs(n, paper="fedpals"):
    return [{"paper": paper, "method": "fedavg", "seed": i} for i in range(n)]


def run(spec):
    return {"acc": spec["seed"] / 10, "history": [{"round": r, "acc": r * spec["seed"]} for r in range(5)]}


@pytest.fixture
def owner():
    with W.in_scope(W.SweepScope(owner=("fedpals/table1", "paper"))):
        yield


@pytest.fixture
def clock(monkeypatch):
    """A fake clock (seconds) that each run advances by 10 s."""
    now = [1000.0]
    monkeypatch.setattr(W, "_clock", lambda: now[0])
    monkeypatch.setattr(W, "_last_pace", None)
    return now


def filled(root, n=4, code="v1") -> ResultStore:
    st = ResultStore(root, code=code)
    run_sweep(specs(n), run, store=st, progress=False, scope=W.SweepScope(owner=("fedpals/table1", "paper")))
    return st


# ----------------------------------------------------------------------------- deadline
def test_deadline_stops_between_runs_and_the_same_sweep_resumes(tmp_path, monkeypatch, clock, owner):
    st = ResultStore(tmp_path, code="v")
    monkeypatch.setenv(W.DEADLINE_ENV, str(clock[0] + 25))
    calls = []

    def timed(spec):
        calls.append(spec["seed"])
        clock[0] += 10
        return run(spec)

    with pytest.raises(SweepStopped) as e:
        run_sweep(specs(5), timed, store=st, progress=False, desc="demo")
    # runs 1 and 2 end at t+20; a third would end at t+30, after the deadline: not started
    assert calls == [0, 1] and len(st) == 2
    assert (e.value.done, e.value.total) == (2, 5) and "2 of 5 runs done, 3 left" in str(e.value)
    assert st.progress("fedpals/table1", "paper") == (2, 5)  # every spec was recorded before the first run
    monkeypatch.delenv(W.DEADLINE_ENV)
    res = run_sweep(specs(5), timed, store=st, progress=False)
    assert calls == [0, 1, 2, 3, 4] and [r["acc"] for r in res] == [i / 10 for i in range(5)]
    assert st.progress("fedpals/table1", "paper") == (5, 5)


def test_deadline_checks_each_batch_and_a_passed_deadline_starts_nothing(tmp_path, monkeypatch, clock):
    st = ResultStore(tmp_path, code="v")
    monkeypatch.setenv(W.DEADLINE_ENV, str(clock[0] + 35))
    batches = []

    def many(chunk):
        batches.append([s["seed"] for s in chunk])
        clock[0] += 10 * len(chunk)
        return [run(s) for s in chunk]

    with pytest.raises(SweepStopped):
        run_sweep(specs(7), run_fn_many=many, batch_size=2, store=st, progress=False)
    assert batches == [[0, 1]] and len(st) == 2  # a second batch would end at t+40 > t+35
    monkeypatch.setenv(W.DEADLINE_ENV, str(clock[0] - 1))
    with pytest.raises(SweepStopped):
        run_sweep(specs(7), run_fn_many=many, batch_size=2, store=st, progress=False)
    assert batches == [[0, 1]]
    monkeypatch.setenv(W.DEADLINE_ENV, "soon")
    with pytest.raises(BadParameterError, match="FEDPAPER_DEADLINE"):
        run_sweep(specs(7), run_fn_many=many, batch_size=2, store=st, progress=False)


def test_the_next_sweep_starts_no_run_that_the_last_sweeps_pace_says_would_not_fit(tmp_path, monkeypatch, clock):
    st = ResultStore(tmp_path, code="v")

    def timed(spec):
        clock[0] += 10
        return run(spec)

    run_sweep(specs(2), timed, store=st, progress=False)  # 10 s per run
    monkeypatch.setenv(W.DEADLINE_ENV, str(clock[0] + 5))
    with pytest.raises(SweepStopped, match="0 of 2 runs done"):
        run_sweep(specs(2, paper="fedpals-other"), timed, store=st, progress=False)


def test_reproduce_max_hours_reports_done_and_left_and_exits_75(tmp_path, monkeypatch, capsys, cache_tmp,
                                                                figures_tmp, readme_tmp):
    """The CLI at the deadline: a notebook whose sweep stopped, one never started; exit 75."""
    executed = []

    class Stopped(Exception):
        ename, evalue = "SweepStopped", "fedpals table1: stopped at the deadline"

    def fake_execute(nb, out_nb, parameters, timeout):
        executed.append(nb)
        st = ResultStore()
        st.record("fedpals/table1", "smoke", specs(3))
        st.put(specs(3)[0], run(specs(3)[0]))
        raise Stopped()

    monkeypatch.setattr(cli, "_execute", fake_execute)
    rc = cli.main(["reproduce", "--profile", "smoke", "--only", "fedpals/table1", "fedpals/fig7", "--no-report",
                   "--max-hours", "0.5"])
    out = capsys.readouterr().out
    assert rc == cli.EXIT_STOPPED == 75, out
    assert executed == ["notebooks/fedpals/table1.ipynb"]  # fig7's notebook was not started
    assert "stopped         fedpals/table1: 1 of 3 runs done, 2 left" in out
    assert "not started     fedpals/fig7" in out
    assert "run the same command again to resume" in out and "FAILED" not in out
    assert W.DEADLINE_ENV not in os.environ  # set for the kernels only while they run


def test_reproduce_max_hours_must_be_positive(capsys):
    assert cli.main(["reproduce", "--profile", "smoke", "--max-hours", "0"]) == 2
    assert "--max-hours 0 must be a positive" in capsys.readouterr().err


# ----------------------------------------------------------------------------- archive
def test_round_trip_restores_every_run_and_the_index(tmp_path):
    src = filled(tmp_path / "a", n=4)
    out = A.export_archive(tmp_path / "runs.tar.gz", src, only=["fedpals/table1"], profile="paper")
    assert out["entries"] == 4 and out["papers"] == {"fedpals": ["v1"]}
    dst = ResultStore(tmp_path / "b", code="v1")
    got = A.import_archive(tmp_path / "runs.tar.gz", dst)
    assert (got["entries"], got["added"], got["notes"]) == (4, 4, [])
    for s in specs(4):
        assert dst.get(s) == run(s)
    assert dst.progress("fedpals/table1", "paper") == (4, 4)
    assert A.import_archive(tmp_path / "runs.tar.gz", dst)["added"] == 0  # again: nothing new
    # a sweep over the imported store runs nothing
    assert run_sweep(specs(4), lambda s: pytest.fail("ran again"), store=dst, progress=False) == [run(s) for s in specs(4)]
    # the export of the re-imported runs holds the same entries
    again = A.export_archive(tmp_path / "again.tar.gz", dst, only=["fedpals"])
    assert again["entries"] == 4


def test_export_selects_by_artifact_and_profile_and_skips_other_code(tmp_path):
    st = filled(tmp_path / "a", n=3)
    run_sweep(specs(6)[3:], run, store=st, progress=False, scope=W.SweepScope(owner=("fedpals/fig7", "quick")))
    assert A.export_archive(tmp_path / "t.tar.gz", st, only=["fedpals/table1"])["entries"] == 3
    assert A.export_archive(tmp_path / "q.tar.gz", st, profile="quick")["entries"] == 3
    assert A.export_archive(tmp_path / "all.tar.gz", st)["entries"] == 6
    with pytest.raises(A.ArchiveError, match="no runs of fedpals/fig2c"):
        A.export_archive(tmp_path / "x.tar.gz", st, only=["fedpals/fig2c"])
    newer = ResultStore(tmp_path / "a", code="v2")  # the code changed since: the old runs cannot be reused
    with pytest.raises(A.ArchiveError, match="3 made by other code versions"):
        A.export_archive(tmp_path / "y.tar.gz", newer, only=["fedpals/table1"])


def _rewrite(src, dst, change):
    """Copy an archive member by member, applying change(name, data) -> data."""
    with tarfile.open(src, "r:gz") as tin, tarfile.open(dst, "w:gz") as tout:
        for m in tin:
            data = change(m.name, tin.extractfile(m).read())
            info = tarfile.TarInfo(m.name)
            info.size = len(data)
            tout.addfile(info, io.BytesIO(data))


def test_corrupt_truncated_and_foreign_archives_are_refused_before_writing(tmp_path):
    src = filled(tmp_path / "a", n=3)
    good = tmp_path / "good.tar.gz"
    A.export_archive(good, src)
    dst = ResultStore(tmp_path / "b", code="v1")

    def flip_entry(name, data):
        if name.startswith("entries/"):
            data = data[:-3] + bytes([data[-3] ^ 1]) + data[-2:]
        return data

    bad = tmp_path / "flipped.tar.gz"
    _rewrite(good, bad, flip_entry)
    with pytest.raises(A.ArchiveError, match="does not match its SHA-256"):
        A.import_archive(bad, dst)
    assert len(dst) == 0  # nothing written

    def drop_manifest_entry(name, data):
        if name == A.MANIFEST:
            m = json.loads(data)
            m["entries"].pop(sorted(m["entries"])[0])
            data = json.dumps(m).encode()
        return data

    _rewrite(good, bad, drop_manifest_entry)
    with pytest.raises(A.ArchiveError, match="not in it"):
        A.import_archive(bad, dst)

    raw = good.read_bytes()
    for cut in (len(raw) // 2, len(raw) - 10):
        (tmp_path / "cut.tar.gz").write_bytes(raw[:cut])
        with pytest.raises(A.ArchiveError, match="truncated|damaged|corrupt"):
            A.import_archive(tmp_path / "cut.tar.gz", dst)
    (tmp_path / "foreign.tar.gz").write_bytes(gzip.compress(b"not a tar file at all" * 50))
    with pytest.raises(A.ArchiveError, match="not a fedpaper results archive|damaged"):
        A.import_archive(tmp_path / "foreign.tar.gz", dst)
    assert len(dst) == 0


def test_an_index_record_naming_a_path_is_ignored(tmp_path):
    src = filled(tmp_path / "a", n=2)
    good = tmp_path / "good.tar.gz"
    A.export_archive(good, src)

    def evil_index(name, data):
        if name == A.MANIFEST:
            m = json.loads(data)
            keys = sorted(m["entries"])
            m["indexes"] = [{"artifact": "fedpals/table1", "profile": "../../../escape", "runs": {keys[0]: {}}},
                            {"artifact": "fedpals/table1", "profile": "paper", "runs": {k: {} for k in keys + ["f" * 64]}}]
            data = json.dumps(m).encode()
        return data

    _rewrite(good, tmp_path / "evil.tar.gz", evil_index)
    dst = ResultStore(tmp_path / "b", code="v1")
    A.import_archive(tmp_path / "evil.tar.gz", dst)
    assert dst.indexes() == [("fedpals/table1", "paper")] and not list(tmp_path.rglob("escape*"))
    assert len(dst.recorded("fedpals/table1", "paper")) == 2  # only runs the archive holds


def test_cli_bad_archives_are_one_line_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FEDPAPER_CACHE", str(tmp_path / "cache"))
    (tmp_path / "junk.tar.gz").write_text("hello")
    for argv, words in [(["cache", "import", str(tmp_path / "missing.tar.gz")], "does not exist"),
                        (["cache", "import", str(tmp_path / "junk.tar.gz")], "not a fedpaper results archive"),
                        (["cache", "export", str(tmp_path / "o.tar.gz")], "nothing to export"),
                        (["cache", "export", str(tmp_path / "o.tar.gz"), "--only", "fedpals/nope"], "fedpals/nope"),
                        (["cache"], "needs a command")]:
        assert cli.main(argv) == 2, argv
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(err) == 1 and words in err[0], (argv, err)
    assert not (tmp_path / "o.tar.gz").exists()


def test_other_code_version_is_said_in_one_line_with_the_commit(tmp_path):
    src = filled(tmp_path / "a", n=2, code="aaaa+bbbb")
    A.export_archive(tmp_path / "r.tar.gz", src)
    commit = json.loads(tarfile.open(tmp_path / "r.tar.gz").extractfile(A.MANIFEST).read())["git"]["commit"]
    dst = ResultStore(tmp_path / "b", code="cccc+dddd")
    notes = A.import_archive(tmp_path / "r.tar.gz", dst)["notes"]
    assert len(notes) == 1 and "\n" not in notes[0]
    assert "aaaa+bbbb" in notes[0] and "cccc+dddd" in notes[0] and "will not reuse" in notes[0]
    assert V.CODE_VERSION_ENV in notes[0] and '"fedpals": "bbbb"' in notes[0]
    if commit:
        assert commit[:12] in notes[0]
    assert A.imported_notes(["fedpals"], dst) == notes  # what `fedpaper reproduce` prints at start
    assert A.imported_notes(["privlabels"], dst) == []
    assert A.import_archive(tmp_path / "r.tar.gz", ResultStore(tmp_path / "c", code="aaaa+bbbb"))["notes"] == []


def test_a_cost_weighs_the_pace_so_a_longer_run_is_not_started_before_the_deadline(tmp_path, monkeypatch, clock):
    """Pace per unit of cost: after two runs of cost 1 (10 s each), a run of cost 10 would take
    ~100 s and is not started 50 s before the deadline; per run (no cost) it would have been."""
    st = ResultStore(tmp_path, code="v")

    def timed(spec):
        clock[0] += 10 * spec.get("cost", 1)
        return run(spec)

    def cost(spec):
        return spec.get("cost", 1)

    cost.unit = "step"
    sp = specs(3)
    sp[2] = dict(sp[2], cost=10)
    monkeypatch.setenv(W.DEADLINE_ENV, str(clock[0] + 70))
    with pytest.raises(SweepStopped, match="2 of 3 runs done"):
        run_sweep(sp, timed, store=st, progress=False, cost=cost)
    st2 = ResultStore(tmp_path / "b", code="v")
    monkeypatch.setattr(W, "_last_pace", None)
    monkeypatch.setenv(W.DEADLINE_ENV, str(clock[0] + 70))
    run_sweep(sp, timed, store=st2, progress=False)  # per run: 10 s each, so the third looked like it fits
    assert len(st2) == 3


def test_a_pace_carries_over_to_the_next_sweep_only_in_the_same_unit(tmp_path, monkeypatch, clock):
    st = ResultStore(tmp_path, code="v")

    def timed(spec):
        clock[0] += 10
        return run(spec)

    def cost(spec):
        return 1000.0

    cost.unit = "sample"
    monkeypatch.setenv(W.DEADLINE_ENV, str(clock[0] + 1000))
    run_sweep(specs(3), timed, store=st, progress=False)  # 10 s per run
    assert W._last_pace == ("run", 10.0)
    monkeypatch.setenv(W.DEADLINE_ENV, str(clock[0] + 5))
    with pytest.raises(SweepStopped):  # per run, 10 s > 5 s left
        run_sweep(specs(1, paper="fedpals-b"), timed, store=st, progress=False)
    # a sweep in samples has no pace in its unit yet and does not read the per-run pace: it starts
    run_sweep(specs(1, paper="fedpals-c"), timed, store=st, progress=False, cost=cost)
    assert len(st) == 4


def test_run_specs_weighs_the_deadline_pace_by_each_runs_training_samples(monkeypatch, tmp_path):
    """executors.run_specs gives run_sweep a cost in training samples (experiment.run_cost): a run
    of 10 rounds costs 10x a run of 1 round of the same layout, whatever the pace per run says."""
    from fedpaper.runs import executors as E
    from fedpaper.papers.fedpals import profiles as P, runs as R

    p = P.runs("smoke")
    p.update(P.grid("smoke"))
    sp = [R.base_spec(p, "cifar10", {"scheme": "sparsity", "C": 3}, seed=0, rounds=r) for r in (1, 10)]
    got = {}

    def fake_sweep(keys, **kw):
        got.update(kw, keys=keys)
        return []

    monkeypatch.setattr(E, "run_sweep", fake_sweep)
    E.run_specs(sp, progress=False, store=ResultStore(tmp_path), executor="local")
    cost, keys = got["cost"], got["keys"]
    assert cost.unit == "training sample"
    one, ten = cost(keys[0]), cost(keys[1])
    st = sp[0].build(None, None)
    f = st.federation
    assert one == sum(len(c) for c in f.client_indices) * st.config.local_epochs + (
        len(f.test_indices) + (0 if f.val_indices is None else len(f.val_indices))) / 3
    assert ten == pytest.approx(10 * one)


def test_a_chunk_stopped_midway_keeps_the_runs_of_every_engine_call_that_finished(monkeypatch, tmp_path):
    """run_specs stores each engine call's runs as soon as the call ends: a chunk of two engine calls
    (1-round and 2-round runs: two configs) killed during the second keeps the first's runs, and
    the same sweep again trains only the rest."""
    from fedpaper.runs import executors as E, experiment as X
    from fedpaper.papers.fedpals import profiles as P, runs as R

    p = P.runs("smoke")
    p.update(P.grid("smoke"))
    sp = [R.base_spec(p, "cifar10", {"scheme": "sparsity", "C": 3}, seed=s, rounds=r) for r in (1, 2) for s in (0, 1)]
    inner, calls = X.train_group, []

    def killed_second(setups, progress):
        calls.append(len(setups))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return inner(setups, progress)

    monkeypatch.setattr(X, "train_group", killed_second)
    store = ResultStore(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        E.run_specs(sp, progress=False, store=store, executor="local", max_batch=4)
    assert calls == [2, 2] and len(store) == 2
    calls.clear()
    monkeypatch.setattr(X, "train_group", lambda setups, progress: calls.append(len(setups)) or inner(setups, progress))
    res = E.run_specs(sp, progress=False, store=store, executor="local", max_batch=4)
    assert calls == [2] and len(store) == 4 and len(res) == 4


def test_export_of_an_artifact_takes_the_runs_a_piece_of_it_trained(tmp_path, monkeypatch, capsys, cache_tmp):
    """A piece of an artifact run as an exploration (FedPALS Table 1, one row by `table1_rows`: how
    a sweep is split over machines) records nothing in the index itself; `cache export --only
    ARTIFACT --profile P` collects the runs the artifact needs at P (plan.record_runs, no
    training) and exports the piece's finished runs with them."""
    from fedpaper.notebook import run as run_notebook
    from fedpaper.papers import fedpals

    monkeypatch.setenv("FEDPAPER_PROGRESS", "0")
    run_notebook(fedpals.table1, profile="smoke", overrides={"table1_rows": [["fashion-mnist", "C=3"]]},
                 out_dir=str(tmp_path / "piece"))
    st = ResultStore()
    finished = len(st.keys())
    assert finished > 0 and st.recorded("fedpals/table1", "smoke") == {}  # an exploration records nothing
    out = tmp_path / "piece.tar.gz"
    assert cli.main(["cache", "export", str(out), "--only", "fedpals/table1", "--profile", "smoke"]) == 0
    assert f"exported {finished} runs" in capsys.readouterr().out
    recorded = st.recorded("fedpals/table1", "smoke")
    assert len(recorded) > finished  # the whole table's runs are recorded; the piece's are among them
    assert set(st.keys()) <= set(recorded)
