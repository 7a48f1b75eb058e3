"""The results cache: atomic entries, resumable sweeps (Ctrl-C and SIGKILL), batched runs."""
import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest

from fedpaper.runs import store as S
from fedpaper.ground import files as GF
from fedpaper.runs import versions as V
from fedpaper.ground.errors import UnknownNameError
from fedpaper.runs.store import ResultStore
from fedpaper.runs.sweep import run_sweep


def specs(n):
    return [{"method": "fedavg", "seed": i, "lr": 0.1} for i in range(n)]


def test_put_get_roundtrip_and_code_version(tmp_path):
    st = ResultStore(tmp_path, code="v1")
    df = pd.DataFrame({"round": [1, 2], "acc": [0.5, 0.6]})
    st.put({"a": 1, "b": [1, 2]}, {"history": df})
    got = st.get({"b": [1, 2], "a": 1})  # key order does not matter
    pd.testing.assert_frame_equal(got["history"], df)
    assert st.get({"a": 2}) is None and {"a": 2} not in st
    assert ResultStore(tmp_path, code="v2").get({"a": 1, "b": [1, 2]}) is None  # code changed


def test_code_version_tracks_sources(tmp_path):
    (tmp_path / "algorithms").mkdir()
    (tmp_path / "algorithms" / "x.py").write_text("a = 1\n")
    (tmp_path / "engine_batched.py").write_text("b = 1\n")
    (tmp_path / "report.py").write_text("c = 1\n")
    v1 = V._code_version(("algorithms", "engine*"), str(tmp_path))
    (tmp_path / "report.py").write_text("c = 2\n")  # not a result module
    V._code_version.cache_clear()
    assert V._code_version(("algorithms", "engine*"), str(tmp_path)) == v1
    (tmp_path / "engine_batched.py").write_text("b = 2\n")
    V._code_version.cache_clear()
    assert V._code_version(("algorithms", "engine*"), str(tmp_path)) != v1
    assert len(V.code_version()) == 16


def test_leftover_temp_and_corrupt_entries_count_as_missing(tmp_path):
    st = ResultStore(tmp_path, code="v")
    spec = {"seed": 0}
    final = st.path(spec)
    final.parent.mkdir(parents=True, exist_ok=True)
    # a crash mid-write leaves only a temp file next to the entry: ignored
    (final.parent / (GF.TMP_PREFIX + final.name + ".abc.pkl")).write_bytes(b"\x80\x05partial")
    assert st.get(spec) is None and len(st) == 0
    # a truncated final file (e.g. copied by hand) is treated as missing, and overwritten
    st.put(spec, {"x": list(range(1000))})
    data = final.read_bytes()
    final.write_bytes(data[: len(data) // 2])
    with pytest.warns(UserWarning, match="checksum"):
        assert st.get(spec) is None
    with pytest.warns(UserWarning, match="checksum"):
        assert run_sweep([spec], lambda s: {"x": 1}, store=st, progress=False) == [{"x": 1}]
    assert st.get(spec) == {"x": 1}


def test_crash_during_put_leaves_no_entry(tmp_path, monkeypatch):
    st = ResultStore(tmp_path, code="v")

    def crash(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(GF.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        st.put({"seed": 1}, {"x": 1})
    monkeypatch.undo()
    assert st.get({"seed": 1}) is None
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # temp file cleaned up


def test_interrupted_sweep_resumes(tmp_path):
    st = ResultStore(tmp_path, code="v")
    calls = []
    k = 3

    def run(spec):
        if len(calls) == k:
            raise KeyboardInterrupt  # Ctrl-C during run k+1
        calls.append(spec["seed"])
        return {"acc": spec["seed"] / 10}

    with pytest.raises(KeyboardInterrupt):
        run_sweep(specs(7), run, store=st, progress=False)
    assert calls == [0, 1, 2] and len(st) == 3
    calls2 = []

    def run2(spec):
        calls2.append(spec["seed"])
        return {"acc": spec["seed"] / 10}

    res = run_sweep(specs(7), run2, store=st, progress=False)
    assert calls2 == [3, 4, 5, 6]  # exactly the unfinished runs
    assert [r["acc"] for r in res] == [i / 10 for i in range(7)]
    assert run_sweep(specs(7), run2, store=st, progress=False) == res and calls2 == [3, 4, 5, 6]
    run_sweep(specs(2), run2, store=st, progress=False, force=True)
    assert calls2 == [3, 4, 5, 6, 0, 1]


def test_batched_sweep_stores_each(tmp_path):
    st = ResultStore(tmp_path, code="v")
    batches = []

    def many(chunk):
        batches.append([s["seed"] for s in chunk])
        for s in chunk:  # an iterator: each result is stored as it comes
            if s["seed"] == 4 and len(batches) == 2:
                raise KeyboardInterrupt
            yield {"acc": s["seed"]}

    with pytest.raises(KeyboardInterrupt):
        run_sweep(specs(6), run_fn_many=many, batch_size=3, store=st, progress=False)
    assert batches == [[0, 1, 2], [3, 4, 5]] and len(st) == 4
    res = run_sweep(specs(6) + specs(2), run_fn_many=lambda c: [{"acc": s["seed"]} for s in c],
                    store=st, progress=False)
    assert [r["acc"] for r in res] == [0, 1, 2, 3, 4, 5, 0, 1]
    with pytest.raises(RuntimeError):
        run_sweep([{"new": 1}, {"new": 2}], run_fn_many=lambda c: [1], store=st, progress=False)
    with pytest.raises(TypeError):
        run_sweep([], store=st)


CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    from fedpaper.runs import store as S
    from fedpaper.ground import files as GF
    from fedpaper.runs import versions as V
    from fedpaper.runs.store import ResultStore
    from fedpaper.runs.sweep import run_sweep

    k = int(sys.argv[2])
    fsync = GF._fsync_file
    writes = []

    def fsync_or_die(p):  # the (k+1)-th entry is killed after its temp file was written
        writes.append(p)
        if len(writes) == k + 1:
            os.kill(os.getpid(), signal.SIGKILL)
        fsync(p)

    GF._fsync_file = fsync_or_die
    st = ResultStore(sys.argv[1], code="v")
    run_sweep([{"method": "fedavg", "seed": i, "lr": 0.1} for i in range(8)], lambda s: {"acc": s["seed"]},
              store=st, progress=False)
    """
)


def test_sigkilled_sweep_restarts(tmp_path):
    k = 5
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), str(k)], capture_output=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    leftovers = [p for p in tmp_path.rglob(GF.TMP_PREFIX + "*")]
    assert leftovers  # the kill happened mid-write
    st = ResultStore(tmp_path, code="v")
    assert len(st) == k
    assert not [p for p in tmp_path.rglob(GF.TMP_PREFIX + "*")]  # removed on the next start
    calls = []

    def run(spec):
        calls.append(spec["seed"])
        return {"acc": spec["seed"]}

    res = run_sweep(specs(8), run, store=st, progress=False)
    assert calls == [5, 6, 7]
    assert [r["acc"] for r in res] == list(range(8))


def test_code_version_can_be_pinned_for_a_run(monkeypatch, tmp_path):
    from fedpaper.runs import versions as V

    real, real_fedpals = V.code_version(), V.code_version("fedpals")
    monkeypatch.setenv(V.CODE_VERSION_ENV, "pinned0123456789")  # a plain string pins every part
    assert V.code_version() == "pinned0123456789"
    assert S.ResultStore(tmp_path).code_of({"paper": "fedpals"}) == "pinned0123456789+pinned0123456789"
    monkeypatch.setenv(V.CODE_VERSION_ENV, V.pin_code_versions())  # what `fedpaper reproduce` sets
    assert V.code_version("fedpals") == real_fedpals
    pins = json.loads(os.environ[V.CODE_VERSION_ENV])
    assert {"core", "fedpals", "privlabels", "fedmt", "fednca"} <= set(pins)
    monkeypatch.setenv(V.CODE_VERSION_ENV, json.dumps(dict(pins, fedpals="edited")))
    assert V.code_version("fedpals") == real + "+edited" and V.code_version("privlabels") != real + "+edited"
    monkeypatch.delenv(V.CODE_VERSION_ENV)
    assert V.code_version() == real


def _fake_package(root):
    for rel, text in {"engine.py": "e = 1\n", "report.py": "r = 1\n",
                      "papers/a/__init__.py": 'RESULTS_READ_ONLY = ("claims",)\n',
                      "papers/a/runs.py": "x = 1\n", "papers/a/claims.py": "c = 1\n",
                      "papers/b/__init__.py": "", "papers/b/runs.py": "y = 1\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _versions(root):
    V._code_version.cache_clear()
    V._paper_version.cache_clear()
    return V.code_version("a", root), V.code_version("b", root)


def test_an_edit_to_one_papers_code_keeps_the_other_papers_key(tmp_path):
    _fake_package(tmp_path)
    a0, b0 = _versions(tmp_path)
    (tmp_path / "papers/a/runs.py").write_text("x = 2\n")  # paper A's run code
    a1, b1 = _versions(tmp_path)
    assert a1 != a0 and b1 == b0
    (tmp_path / "papers/a/new_module.py").write_text("z = 1\n")  # a new module counts, undeclared
    a2, b2 = _versions(tmp_path)
    assert a2 != a1 and b2 == b0
    (tmp_path / "papers/a/claims.py").write_text("c = 2\n")  # declared as only reading results
    (tmp_path / "report.py").write_text("r = 2\n")  # not a core module
    assert _versions(tmp_path) == (a2, b0)
    (tmp_path / "engine.py").write_text("e = 2\n")  # core: every paper's key moves
    a3, b3 = _versions(tmp_path)
    assert a3 != a2 and b3 != b0
    assert V.known_papers(tmp_path) == ["a", "b"]


def test_store_keys_each_spec_by_its_papers_code(tmp_path):
    st = ResultStore(tmp_path)
    fed, priv = {"paper": "fedpals", "seed": 0}, {"paper": "privlabels", "seed": 0}
    assert st.code_of(fed) == V.code_version("fedpals") != st.code_of(priv)
    assert st.code_of(fed).startswith(V.code_version() + "+")
    with pytest.raises(UnknownNameError, match="no paper package"):
        st.key({"paper": "nosuchpaper"})


def test_paper_files_cover_the_run_builders_and_skip_declared_readers():
    files = {p.relative_to(V.PACKAGE_DIR).as_posix() for p in V.paper_files("privlabels")}
    assert {"papers/privlabels/runs.py", "papers/privlabels/profiles.py", "papers/privlabels/__init__.py"} <= files
    assert not files & {"papers/privlabels/claims.py", "papers/privlabels/draw.py", "papers/privlabels/config_tables.py"}
    fed = {p.relative_to(V.PACKAGE_DIR).as_posix() for p in V.paper_files("fedpals")}
    assert {"papers/fedpals/runs.py", "papers/fedpals/train.py", "papers/fedpals/real.py"} <= fed


def test_atomic_files_are_world_readable(tmp_path):
    from fedpaper.ground import files as GF

    p = GF.atomic_write_text(tmp_path / "a.csv", "x\n")
    assert p.stat().st_mode & 0o777 == 0o644


def test_flipped_bit_is_warned_and_recomputed(tmp_path):
    st = ResultStore(tmp_path, code="v")
    spec = {"method": "fedavg", "seed": 3}
    original = {"acc": [0.1667, 0.2291], "table": pd.DataFrame({"x": [1.5, 2.5]})}
    st.put(spec, original)
    path = st.path(spec)
    data = bytearray(path.read_bytes())
    header = data.index(b"\n") + 1
    for pos in (header + (len(data) - header) // 2, len(data) - 2, 20):  # payload middle, end, the digest
        flipped = bytearray(data)
        flipped[pos] ^= 0x04
        path.write_bytes(bytes(flipped))
        with pytest.warns(UserWarning, match="does not match its checksum"):
            assert st.get(spec) is None
        calls = []

        def run(s):
            calls.append(s)
            return original

        with pytest.warns(UserWarning, match="checksum"):
            got = run_sweep([spec], run, store=st, progress=False)[0]
        assert calls == [spec]  # recomputed
        assert got["acc"] == original["acc"]
        pd.testing.assert_frame_equal(st.get(spec)["table"], original["table"])  # rewritten, readable
        assert path.read_bytes() != bytes(flipped)


def test_entry_without_checksum_is_read_and_upgraded(tmp_path):
    import warnings

    st = ResultStore(tmp_path, code="v")
    spec = {"seed": 1}
    entry = {"spec": S.spec_json(spec), "code": "v", "created": "then", "result": {"acc": 0.5}}
    st.path(spec).parent.mkdir(parents=True)
    st.path(spec).write_bytes(pickle.dumps(entry))  # the format before checksums
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert st.get(spec) == {"acc": 0.5}
    assert st.path(spec).read_bytes().startswith(GF.CHECKSUM_MAGIC)
    assert st.get(spec) == {"acc": 0.5}


def test_stale_temp_files_are_removed_on_open(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    d = tmp_path / "ab"
    d.mkdir()
    stale = d / f"{GF.TMP_PREFIX}entry.pkl.{dead}.abcd1234.pkl"
    live = d / f"{GF.TMP_PREFIX}entry.pkl.{os.getpid()}.abcd1234.pkl"
    old = d / f"{GF.TMP_PREFIX}entry.pkl.zz_old12.pkl"  # no pid (older format), an hour old
    young = d / f"{GF.TMP_PREFIX}entry.pkl.zz_new12.pkl"
    for p in (stale, live, old, young):
        p.write_bytes(b"")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    ResultStore(tmp_path, code="v")
    assert sorted(p.name for p in d.iterdir()) == sorted([live.name, young.name])
    with GF.atomic_path(tmp_path / "x.csv") as tmp:  # the writer's pid is in the temp name
        assert f".{os.getpid()}." in tmp.name and GF._TMP_PID.search(tmp.name)
        tmp.write_text("x\n")
