"""The output contract of the pipeline (fedpaper.outputs.pipeline): four files, atomic writes, smoke stamp, missing data."""
import json

import matplotlib
import pandas as pd
import pytest

from fedpaper.outputs import artifacts as A
from pipeline_harness import run_artifact
from fedpaper.ground.errors import BadParameterError, DataMissingError, UnknownNameError
from fedpaper.claims import catalog

ART = "fedpals/table2"  # needs pacs, which no test data root holds


def _table():
    return pd.DataFrame({"dataset": ["PACS"] * 2, "clients": [3, 3], "delta": [0.001, 0.01],
                         "method": ["FedPALS"] * 2, "metric": ["accuracy_pct"] * 2,
                         "mean": [88.0, 85.0], "std": [1.0, 2.0], "n_seeds": [3, 3]})


def compute(params):
    return _table(), {"datasets": [{"name": "pacs", "source": "generated stand-in", "synthetic": True}],
                      "seeds": params.get("seeds"), "device": "cpu", "notes": ["2 rounds instead of 100"]}


def draw(table, params):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot(range(len(table)), table["mean"], "o-")
    return fig


@pytest.fixture
def fake_root(tmp_path):
    root = tmp_path / "data"
    (root / "fashion-mnist/FashionMNIST/raw").mkdir(parents=True)
    for f in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
              "t10k-labels-idx1-ubyte"):
        (root / "fashion-mnist/FashionMNIST/raw" / (f + ".gz")).write_bytes(b"x")
    return root


def _real_compute(params):
    t = pd.DataFrame({"dataset": ["Fashion-MNIST"], "label_split": ["C=3"], "clients": [10],
                      "method": ["FedPALS"], "metric": ["accuracy_pct"], "mean": [90.0], "std": [1.0],
                      "n_seeds": [2]})
    return t, {"datasets": [{"name": "fashion-mnist", "source": "offline copy", "synthetic": False,
                             "lossy": False}], "device": "cpu"}


def test_smoke_writes_four_files_stamped_in_cache(figures_tmp, cache_tmp, empty_data_root):
    r = run_artifact(ART, profile="smoke", params={"rounds": 2}, compute=compute, draw=draw,
                       datasets=["pacs"], seeds=2)
    assert set(r.paths) == {"png", "pdf", "csv", "json"}
    for p in r.paths.values():
        assert p.is_file() and p.stat().st_size > 0
        assert str(p).startswith(str(cache_tmp))  # never the committed figures/
    assert not figures_tmp.exists()
    rec = json.loads(r.paths["json"].read_text())
    assert rec["profile"] == "smoke" and rec["synthetic"] and rec["stamped"]
    assert rec["seeds"] == [0, 1] and rec["params"]["rounds"] == 2
    assert {"python", "torch", "numpy", "pandas", "cvxpy", "torchvision"} <= set(rec["libraries"])
    assert "commit" in rec["git"] and "dirty" in rec["git"]
    assert rec["wall_time_s"] >= 0 and rec["timestamp"] and rec["command"]
    assert "2 rounds instead of 100" in rec["notes"]
    texts = [t.get_text() for t in r.figure.texts]
    assert A.SYNTHETIC_STAMP in texts
    assert pd.read_csv(r.paths["csv"]).shape == (2, 8)


def test_provenance_counts_the_runs_computed_and_read_from_the_cache(figures_tmp, cache_tmp, empty_data_root):
    """A figure made from cached runs (earlier pieces, an imported archive) says so: its wall time is
    only this invocation's. Two sweeps sharing a run count it once."""
    from fedpaper.runs.sweep import run_sweep

    def compute_runs(params):
        run_sweep([{"i": i} for i in range(3)], lambda s: {"x": s["i"]}, progress=False)
        run_sweep([{"i": 2}, {"i": 3}], lambda s: {"x": s["i"]}, progress=False)
        return compute(params)

    kw = dict(profile="smoke", params={"rounds": 2}, compute=compute_runs, draw=draw, datasets=["pacs"], seeds=2)
    first = run_artifact(ART, **kw).provenance["runs"]
    assert first == {"runs": 4, "from_cache": 0, "computed": 4}
    again = run_artifact(ART, **kw)
    assert again.provenance["runs"] == {"runs": 4, "from_cache": 4, "computed": 0}
    from fedpaper.runs.provenance import summary
    assert "4 of 4 runs from the cache" in summary(again.provenance)

    def outer(params):  # an artifact made inside another (a compute ladder's rung) counts into it too
        run_artifact("fedpals/table1", **dict(kw, compute=compute_runs))
        run_sweep([{"i": 9}], lambda s: {"x": 9}, progress=False)
        return compute(params)
    assert run_artifact(ART, **dict(kw, compute=outer)).provenance["runs"] == {"runs": 5, "from_cache": 4,
                                                                               "computed": 1}


def test_a_nested_explorations_runs_are_recorded_under_the_outer_artifact(figures_tmp, cache_tmp, empty_data_root):
    """A compute ladder's rungs are explorations (overrides, explicit seeds) run inside the ladder's
    artifact: their runs go into the ladder's index as their sweeps start, so that a stopped ladder
    (--max-hours) counts its runs done and left; a top-level exploration's runs stay unrecorded."""
    from fedpaper.runs.store import ResultStore
    from fedpaper.runs.sweep import run_sweep

    def sweep(params):
        run_sweep([{"i": i} for i in range(3)], lambda s: {"x": s["i"]}, progress=False)
        return compute(params)

    def ladder(params):
        run_artifact("fedpals/table1", compute=sweep, draw=draw, datasets=["pacs"], profile="smoke", seeds=[0, 1])
        return compute(params)

    run_artifact("fedpals/table1", compute=sweep, draw=draw, datasets=["pacs"], profile="smoke", seeds=[0, 1])
    assert ResultStore().progress("fedpals/table1", "smoke") is None  # an exploration alone: nobody's runs
    run_artifact(ART, compute=ladder, draw=draw, datasets=["pacs"], profile="smoke")
    assert ResultStore().progress(ART, "smoke") == (3, 3)
    assert ResultStore().progress("fedpals/table1", "smoke") is None


def test_quick_real_data_not_stamped(figures_tmp, fake_root):
    r = run_artifact("fedpals/table1", profile="quick", params={}, compute=_real_compute, draw=draw,
                       datasets=["fashion-mnist", "cifar10", "pacs"], optional_datasets=["cifar10", "pacs"],
                       data_root=fake_root)
    assert r.paths["csv"].parent == figures_tmp / "fedpals"
    assert A.SYNTHETIC_STAMP not in [t.get_text() for t in r.figure.texts]
    assert "without cifar10, pacs" in r.status
    assert r.provenance["missing_datasets"] == ["cifar10", "pacs"]


def test_synthetic_info_stamps_even_at_quick(figures_tmp, fake_root, tmp_path):
    def comp(p):
        t, info = _real_compute(p)
        info["datasets"][0]["synthetic"] = True
        return t, info

    r = run_artifact("fedpals/fig6a", profile="quick", params={}, compute=comp, draw=draw,
                       datasets=["fashion-mnist"], data_root=fake_root, out_dir=tmp_path / "o")
    assert r.provenance["synthetic"] and "SYNTHETIC" in r.status
    assert A.SYNTHETIC_STAMP in [t.get_text() for t in r.figure.texts]


def test_missing_data_without_committed_results_is_one_clear_error(figures_tmp, empty_data_root):
    with pytest.raises(DataMissingError) as e:
        run_artifact(ART, profile="quick", params={}, compute=compute, draw=draw, datasets=["pacs"])
    msg = str(e.value)
    assert "\n" not in msg and "pacs" in msg and str(empty_data_root) in msg and "download" in msg


def test_missing_data_rerenders_from_committed(figures_tmp, empty_data_root, tmp_path):
    committed = figures_tmp / "fedpals"
    committed.mkdir(parents=True)
    _table().to_csv(committed / "table2.csv", index=False)
    (committed / "table2.json").write_text(json.dumps({"profile": "paper", "git": {"commit": "abc"}}))
    before = (committed / "table2.json").read_bytes()
    calls = []

    def comp(p):
        calls.append(p)
        return compute(p)

    r = run_artifact(ART, profile="quick", params={}, compute=comp, draw=draw, datasets=["pacs"])
    assert calls == []  # nothing retrained
    assert r.status == "re-rendered from committed results; pacs missing"
    assert r.provenance["profile"] == "paper" and r.provenance["rerendered"]["missing_datasets"] == ["pacs"]
    assert (committed / "table2.png").is_file() and (committed / "table2.pdf").is_file()
    assert (committed / "table2.json").read_bytes() == before  # committed provenance kept as is
    # elsewhere: all four files, provenance annotated
    r2 = run_artifact(ART, profile="paper", params={}, compute=comp, draw=draw, datasets=["pacs"],
                        out_dir=tmp_path / "elsewhere")
    rec = json.loads(r2.paths["json"].read_text())
    assert rec["git"]["commit"] == "abc" and "rerendered" in rec
    assert len(pd.read_csv(r2.paths["csv"])) == 2


def test_rerender_draws_with_the_committed_runs_params_not_this_machines(figures_tmp, empty_data_root):
    """Issue 32, item 4: a figure re-rendered where data is missing is drawn with the committed
    run's missing_datasets (here none), so it is the figure that was committed."""
    committed = figures_tmp / "fedpals"
    committed.mkdir(parents=True)
    _table().to_csv(committed / "table2.csv", index=False)
    (committed / "table2.json").write_text(json.dumps({"profile": "quick", "missing_datasets": []}))
    seen = []

    def drawing(table, params):
        seen.append(params["missing_datasets"])
        return draw(table, params)

    run_artifact(ART, profile="quick", params={}, compute=compute, draw=drawing, datasets=["pacs"])
    assert seen == [[]]


def test_rerender_flag_redraws_committed_results_with_the_data_present(figures_tmp, fake_root, tmp_path,
                                                                      monkeypatch):
    """`fedpaper reproduce --rerender` (FEDPAPER_RERENDER=1): nothing trained although the data is
    here; an artifact without committed results is one clear error naming the fix."""
    committed = figures_tmp / "fedpals"
    committed.mkdir(parents=True)
    t, _ = _real_compute({})
    t.to_csv(committed / "table1.csv", index=False)
    (committed / "table1.json").write_text(json.dumps({"profile": "quick", "missing_datasets": ["pacs"]}))
    before = {s: (committed / f"table1.{s}").read_bytes() for s in ("csv", "json")}
    monkeypatch.setenv(A.RERENDER_ENV, "1")
    calls = []

    def comp(p):
        calls.append(p)
        return _real_compute(p)

    r = run_artifact("fedpals/table1", profile="quick", params={}, compute=comp, draw=draw,
                       datasets=["fashion-mnist"], data_root=fake_root)
    assert calls == [] and r.status == "re-rendered from committed results (--rerender)"
    assert (committed / "table1.png").is_file()
    assert {s: (committed / f"table1.{s}").read_bytes() for s in ("csv", "json")} == before
    with pytest.raises(DataMissingError, match="without --rerender"):
        run_artifact("fedpals/fig6a", profile="quick", params={}, compute=comp, draw=draw,
                       datasets=["fashion-mnist"], data_root=fake_root)
    monkeypatch.setenv(A.RERENDER_ENV, "0")
    run_artifact("fedpals/table1", profile="quick", params={}, compute=comp, draw=draw,
                   datasets=["fashion-mnist"], data_root=fake_root, out_dir=tmp_path / "o")
    assert len(calls) == 1  # without the flag it computes


def test_smoke_ignores_missing_data(figures_tmp, empty_data_root):
    r = run_artifact(ART, profile="smoke", params={}, compute=compute, draw=draw, datasets=["pacs"])
    assert "smoke" in r.status


def test_failed_draw_or_compute_leaves_no_files(figures_tmp, tmp_path, empty_data_root):
    out = tmp_path / "out"

    def bad_draw(table, params):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        run_artifact(ART, profile="smoke", params={}, compute=compute, draw=bad_draw,
                       datasets=["pacs"], out_dir=out)
    assert not out.exists() or not any(p.is_file() for p in out.rglob("*"))


def test_failed_write_keeps_old_files_and_no_temp(figures_tmp, tmp_path, monkeypatch, empty_data_root):
    out = tmp_path / "out"
    r = run_artifact(ART, profile="smoke", params={}, compute=compute, draw=draw, datasets=["pacs"],
                       out_dir=out)
    old = {k: p.read_bytes() for k, p in r.paths.items()}

    def exploding_to_csv(self, *a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", exploding_to_csv)
    with pytest.raises(OSError):
        run_artifact(ART, profile="smoke", params={"x": 1}, compute=compute, draw=draw,
                       datasets=["pacs"], out_dir=out)
    assert {k: p.read_bytes() for k, p in r.paths.items()} == old
    assert sorted(p.name for p in (out / "fedpals").iterdir()) == sorted(p.name for p in r.paths.values())


def test_bad_inputs(figures_tmp):
    with pytest.raises(UnknownNameError) as e:
        run_artifact(ART, profile="fast", params={}, compute=compute, draw=draw, datasets=["pacs"])
    assert "smoke, quick, long, paper" in str(e.value)
    with pytest.raises(UnknownNameError) as e:
        run_artifact("fedpals/tabel1", profile="smoke", params={}, compute=compute, draw=draw, datasets=[])
    assert "fedpals/table1" in str(e.value)
    with pytest.raises(UnknownNameError):
        run_artifact(ART, profile="smoke", params={}, compute=compute, draw=draw, datasets=["cifar11"])
    with pytest.raises(BadParameterError):
        run_artifact(ART, profile="smoke", params={}, compute=compute, draw=draw, datasets=["pacs"],
                       out_dir=figures_tmp)


def test_catalog_complete():
    assert len(catalog.ARTIFACTS) == 78
    counts = {p: len(catalog.artifact_ids(p, ladders=False)) for p in catalog.PAPERS}
    assert counts == {"fedpals": 21, "privlabels": 16, "fedmt": 11, "fednca": 30}
    # each paper's compute ladder (issue 29) comes last, beside the TARGETS list
    assert {p: catalog.artifact_ids(p)[-1] for p in catalog.PAPERS} == {p: f"{p}/scaling" for p in catalog.PAPERS}
    assert sum(map(len, map(catalog.artifact_ids, catalog.PAPERS))) == 78 + len(catalog.LADDERS) == 82
    for a in catalog.ARTIFACTS.values():
        for d in a.datasets:
            assert d == "none" or catalog.dataset_info(d)
        if a.reported:
            assert (catalog.REPORTED_DIR / a.reported).is_file()
            assert catalog.load_reported(a.id) is not None


def test_dataset_available_layouts(tmp_path):
    assert not catalog.dataset_available("cifar10", tmp_path)
    (tmp_path / "cifar10").mkdir()
    (tmp_path / "cifar10/cifar10-jpeg.zip").write_bytes(b"z")
    assert catalog.dataset_available("cifar10", tmp_path)
    (tmp_path / "voc2007").mkdir()
    (tmp_path / "voc2007/voc2007-labels.csv.gz").write_bytes(b"z")
    assert catalog.dataset_available("voc2007:labels", tmp_path)
    assert not catalog.dataset_available("voc2007", tmp_path)
    assert catalog.dataset_available("none", tmp_path)


def test_long_results_kept_apart_from_quick_and_preferred(figures_tmp, fake_root):
    """A long run writes under figures/long/; a later quick run does not touch it; readers take
    the most faithful profile present (long over quick) unless asked for one."""
    def compute_with(mean):
        def compute_(params):
            t, info = _real_compute(params)
            return t.assign(mean=mean), info
        return compute_

    kw = dict(params={}, draw=draw, datasets=["fashion-mnist", "cifar10", "pacs"],
              optional_datasets=["cifar10", "pacs"], data_root=fake_root)
    long_r = run_artifact("fedpals/table1", profile="long", compute=compute_with(70.0), **kw)
    assert long_r.paths["csv"].parent == figures_tmp / "long" / "fedpals"
    quick_r = run_artifact("fedpals/table1", profile="quick", compute=compute_with(50.0), **kw)
    assert quick_r.paths["csv"].parent == figures_tmp / "fedpals"
    assert pd.read_csv(long_r.paths["csv"])["mean"].tolist() == [70.0]
    assert A.committed_profile("fedpals/table1") == "long"
    assert A.load_committed("fedpals/table1")[0]["mean"].tolist() == [70.0]
    assert A.load_committed("fedpals/table1", "quick")[0]["mean"].tolist() == [50.0]
    assert A.load_committed("fedpals/table1")[1]["profile"] == "long"
    with pytest.raises(BadParameterError, match="committed figures folder"):
        A.resolve_out_dir("smoke", figures_tmp / "long")


def test_reproduce_rerender_plans_only_committed_artifacts(figures_tmp, fake_root, monkeypatch):
    """`fedpaper reproduce --rerender` runs the notebooks of artifacts with committed results only;
    the others are listed as not re-rendered (no notebook fails for want of a csv)."""
    from fedpaper import cli

    (figures_tmp / "fedpals").mkdir(parents=True)
    _real_compute({})[0].to_csv(figures_tmp / "fedpals" / "table1.csv", index=False)
    monkeypatch.setenv(A.RERENDER_ENV, "1")
    plan = cli.plan_run(["fedpals/table1", "fedpals/fig9"], "quick", fake_root)
    assert list(plan.notebooks.values()) == [["fedpals/table1"]]
    assert plan.skipped == {"fedpals/fig9": "not re-rendered: no committed quick results"}
    monkeypatch.delenv(A.RERENDER_ENV)
    assert len(cli.plan_run(["fedpals/table1", "fedpals/fig9"], "quick", fake_root).notebooks) == 2
