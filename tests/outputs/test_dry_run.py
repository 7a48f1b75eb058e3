"""The paper profile's dry run: `fedpaper reproduce --profile paper --dry-run`.

One artifact function per paper runs at the paper profile with the dry run's parameters (the ones
the CLI hands each notebook: fedpaper.outputs.dryrun.parameters), each paper's heaviest model at its
paper size included (FedNCA-ML's ResNet-18 at 224 px, FedMT's ResNet-18, privlabels' 32-32-64-64
CNN, FedPALS' LeNet); the tests shrink the grid, the images, epochs or (FedMT, FedNCA-ML: memory)
the number of clients further through the same overrides, never the model or the input size. Bad input (a dry run of another profile, an unknown artifact,
a scratch folder without space) is one line, exit 2, before anything runs or is written.
"""
import json

import pytest

from fedpaper import cli
from fedpaper.outputs import dryrun
from fedpaper.runs import executors
from fedpaper.ground.errors import BadParameterError
from fedpaper.outputs.parameters import validate
from fedpaper.ground.paths import data_root

needs_data = pytest.mark.skipif(not (data_root() / "cifar10").is_dir(),
                                reason="needs the offline data sets (FEDPAPER_DATA)")


def _one_line_exit_2(argv, capsys) -> str:
    assert cli.main(argv) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


# ------------------------------------------------------------------------------ bad input
def test_dry_run_of_another_profile_is_one_line(capsys, figures_tmp, tmp_path):
    line = _one_line_exit_2(["reproduce", "--profile", "smoke", "--dry-run", "--out-dir", str(tmp_path / "s")], capsys)
    assert "--profile paper --dry-run" in line
    with pytest.raises(BadParameterError, match="use profile 'paper'"):  # a notebook's overrides alike
        validate(profile="quick", overrides={"dry_run": True})
    assert not figures_tmp.exists() and not (tmp_path / "s").exists()


def test_dry_run_unknown_artifact_is_one_line(capsys, figures_tmp, tmp_path):
    line = _one_line_exit_2(["reproduce", "--profile", "paper", "--dry-run", "--only", "fednca/tabel1",
                             "--out-dir", str(tmp_path / "s")], capsys)
    assert "unknown artifact id 'fednca/tabel1'" in line and "fednca/table1" in line
    assert not figures_tmp.exists() and not (tmp_path / "s").exists()


def test_dry_run_without_space_in_scratch_is_one_line(capsys, figures_tmp, tmp_path, monkeypatch):
    monkeypatch.setattr(dryrun, "MIN_FREE_BYTES", 2**62)  # more than any disk has
    line = _one_line_exit_2(["reproduce", "--profile", "paper", "--dry-run", "--only", "fedpals/fig1",
                             "--out-dir", str(tmp_path / "s")], capsys)
    assert "MiB free (needs at least" in line and "--out-dir" in line
    assert not figures_tmp.exists() and not (tmp_path / "s").exists()


def test_dry_run_into_committed_figures_is_one_line(capsys, figures_tmp):
    line = _one_line_exit_2(["reproduce", "--profile", "paper", "--dry-run", "--out-dir",
                             str(figures_tmp / "paper")], capsys)
    assert "committed figures folder" in line
    assert not figures_tmp.exists()


# ------------------------------------------------------------------------------ mechanics
def test_every_cut_is_a_setting_of_its_paper_profile():
    """Each paper's cut names settings of its paper profile (checked as an override would be)."""
    from fedpaper.outputs.parameters import apply_overrides
    from fedpaper.papers.fedmt import profiles as fedmt
    from fedpaper.papers.fednca import profiles as fednca
    from fedpaper.papers.fedpals import profiles as fedpals
    from fedpaper.papers.privlabels import profiles as privlabels

    profile = {"fedmt": fedmt.settings("paper"), "fednca": fednca.settings("paper"),
               "fedpals": fedpals.settings("paper"),
               "privlabels": privlabels.settings("paper")}
    assert set(dryrun.CUTS) == set(profile)
    for paper, p in profile.items():
        cut = dryrun.cut(paper)
        assert cut.pop("dry_run") is True
        before = json.dumps(p, sort_keys=True, default=str)
        q = apply_overrides(json.loads(before), cut, where=paper)
        changed = {k for k in p if json.dumps(p[k], sort_keys=True, default=str) != json.dumps(q[k], sort_keys=True, default=str)}
        assert changed == {k.split(".")[0] for k in cut}, paper  # the cut, nothing else


def test_dry_run_trains_in_small_groups_in_its_own_store(monkeypatch, cache_tmp):
    monkeypatch.delenv(executors.EXECUTOR_ENV, raising=False)
    assert executors.get_executor().is_local  # outside a dry run: the local executor, the results cache
    dry = dryrun.DryRunExecutor()
    assert isinstance(dry.inner, executors.SmallGroupExecutor) and dry.inner.max_runs == dryrun.GROUP_RUNS
    assert dry.store.root == cache_tmp / "dry-run" / "results"
    monkeypatch.setenv(executors.EXECUTOR_ENV, "local:2")  # an executor named for the dry run is used
    assert dryrun.DryRunExecutor().inner.max_runs == 2
    assert executors.get_executor("local:2").max_runs == 2
    with pytest.raises(BadParameterError, match="local:N"):
        executors.get_executor("local:0")


def _spec(**change):
    from fedpaper.runs.experiment import RunSpec

    base = dict(paper="privlabels", data={"name": "cifar10", "options": {}},
                partition={"layout": "privlabels", "L": 2, "num_clients": 10, "samples_per_client": 128, "seed": 0},
                method={"name": "FedProx", "optimizer": None, "parts": [["Penalty", {"coef": 0.01, "name": "prox"}]]},
                training={"model": "privlabels_cnn", "model_kwargs": {"widths": [32, 32, 64, 64]}, "batch_size": 64,
                          "lr": 0.001, "momentum": 0.9, "rounds": 1},
                tags={"display": "FedProx"})
    return RunSpec(**base).with_(**change)


def test_a_configuration_leaves_out_seeds_rounds_and_per_run_numbers():
    one = dryrun.configuration(_spec())
    for same in (dict(partition={"seed": 3, "L": 7}), dict(training={"rounds": 100}),
                 dict(method={"parts": [["Penalty", {"coef": 0.1, "name": "prox"}]]}),
                 dict(method={"name": "FedProx (mu 0.1)"}), dict(tags={"display": "other"})):
        assert dryrun.configuration(_spec(**same)) == one, same
    for other in (dict(partition={"num_clients": 20}), dict(partition={"samples_per_client": 64}),
                  dict(partition={"layout": "privlabels-central"}), dict(training={"batch_size": 32}),
                  dict(training={"model_kwargs": {"widths": [8, 8, 16, 16]}}), dict(training={"momentum": 0.0}),
                  dict(method={"parts": [["Penalty", {"coef": 0.0, "name": "prox"}]]}),  # a zero turns a term off
                  dict(method={"parts": [["FedAvgWeights", {}]]}), dict(data={"name": "fashion-mnist"})):
        assert dryrun.configuration(_spec(**other)) != one, other
    # a store key (what an executor sees) has the configuration of its spec
    assert dryrun.configuration({"paper": "privlabels", "run": json.loads(_spec().to_json()), "data_copy": "x"}) == one


def test_the_dry_run_executor_trains_each_configuration_once_across_sweeps():
    """An artifact's sweeps (FedPALS: one per setting) share one executor: a configuration trained in
    an earlier sweep is not trained again; every run gets its configuration's result."""
    calls = []

    class Inner:
        def run_specs(self, keys, build, *, desc="runs", store=None, **kw):
            calls.append((list(keys), store))
            return [{"trained": json.dumps(k, sort_keys=True)} for k in keys]

    def key(spec):
        return {"paper": spec.paper, "run": json.loads(spec.to_json()), "data_copy": None}

    a, b, c = _spec(), _spec(partition={"seed": 1, "L": 3}), _spec(training={"batch_size": 32})
    dry = dryrun.DryRunExecutor(inner=Inner(), store="the dry run's store")
    first = dry.run_specs([key(a), key(b)], None, desc="one")
    second = dry.run_specs([key(b), key(c)], None, desc="two")
    assert calls == [([key(a)], "the dry run's store"), ([key(c)], "the dry run's store")]
    assert first[0] is first[1] is second[0] and second[1] is not first[0]
    assert {k: v for k, v in dry.record().items() if k != "note"} == {"runs": 3, "configurations": 2}


def test_dry_run_trains_one_run_per_configuration_into_the_scratch_folder(tmp_path, figures_tmp, cache_tmp,
                                                                         monkeypatch):
    """privlabels Fig. 2's grid (smoke stand-ins: no data needed) as a dry run: one engine-trained run
    per distinct method of the grid (its only configurations: L and seed are per-run values), all
    four files in the scratch folder, nothing in the committed figures or the results cache."""
    from fedpaper.outputs import pipeline
    from fedpaper.papers import privlabels as PL

    monkeypatch.delenv(executors.EXECUTOR_ENV, raising=False)
    got = []
    token = pipeline.COMPUTE_HOOK.set(lambda aid, compute, params, missing: got.append((compute.job, params)))
    try:
        PL.accuracy_vs_labels(profile="smoke", overrides={"labels": [2, 5]})
    finally:
        pipeline.COMPUTE_HOOK.reset(token)
    [(job, params)] = [(j, p) for j, p in got if j.artifact_id == "privlabels/fig2"]
    specs = job.specs(params)
    methods = {json.dumps(s.method, sort_keys=True) for s in specs}
    assert 1 < len(methods) < len(set(specs))
    trained = []
    real = executors.train_in_parts

    def counting(setups, *a, **k):
        trained.extend(setups)
        return real(setups, *a, **k)

    monkeypatch.setattr(executors, "train_in_parts", counting)
    job = pipeline.ArtifactJob(job.artifact_id, params, None, job.draw, ("none",), specs=job.specs,
                               summarise=job.summarise, execution=job.execution, desc=job.desc)
    r = pipeline.run_job(job, profile="paper", out_dir=str(tmp_path / "scratch"), overrides={"dry_run": True})
    assert len(trained) == len(methods)  # one run per configuration, each through the engine
    assert r.status.startswith("dry run of the paper profile"), r.status
    for path in r.paths.values():
        assert path.is_file() and str(path).startswith(str(tmp_path / "scratch"))
    assert set(r.table["method"]) >= {s.tags["display"] for s in specs}  # summarise saw every run
    rec = json.loads(r.paths["json"].read_text())
    assert rec["dry_run"]["runs"]["runs"] == len(set(specs))
    assert rec["dry_run"]["runs"]["configurations"] == len(methods)
    assert not figures_tmp.exists()
    assert len(list((cache_tmp / "dry-run" / "results").glob("*/*.pkl"))) == len(methods)
    assert not any((cache_tmp / "results").glob("*/*.pkl"))


def test_plan_skips_missing_data_and_weights(empty_data_root, monkeypatch, tmp_path):
    """A dry run skips (one reason each) what needs absent data or ImageNet weights, even where
    committed results exist; the rest is planned."""
    monkeypatch.setattr("torch.hub.get_dir", lambda: str(tmp_path / "hub"))  # no weights there
    plan = cli.plan_run(["fedpals/fig1", "fedpals/table1", "fednca/table2"], "paper", empty_data_root, dry_run=True)
    assert list(plan.notebooks.values()) == [["fedpals/fig1"]]
    assert "fashion-mnist" in plan.skipped["fedpals/table1"].lower()
    assert "dermamnist" in plan.skipped["fednca/table2"].lower() or "weights" in plan.skipped["fednca/table2"]


def test_missing_weights_line(monkeypatch, tmp_path):
    monkeypatch.setattr("torch.hub.get_dir", lambda: str(tmp_path / "hub"))
    line = dryrun.missing_weights("fednca/table2", ["dermamnist"])
    assert "ImageNet resnet18 weights absent" in line and "IMAGENET1K_V1" in line
    assert dryrun.missing_weights("fednca/table1", ["cifar10"]) is None
    assert dryrun.missing_weights("fednca/fig11a", ["voc2007:labels"]) is None
    (tmp_path / "hub/checkpoints").mkdir(parents=True)
    dryrun.weights_file("resnet18").write_bytes(b"x")
    assert dryrun.missing_weights("fednca/table2", ["dermamnist"]) is None


def test_summary_line():
    outcomes = {"a/x": ("regenerated", ""), "a/y": ("skipped", "no data"), "a/z": ("failed", "boom")}
    assert cli.dry_run_summary(outcomes, 61.4, 1.234) == (
        "dry run: 1 artifacts passed, 1 skipped, 1 failed; wall 61 s, peak RSS 1.23 GiB "
        "(this process or one notebook kernel)")


# ------------------------------------------------------------------------------ one artifact per paper
# (artifact function, the test's further shrink of its grid or images: same overrides mechanism)
PER_PAPER = {
    "fedpals": ("fedpaper.papers.fedpals.table1", {"table1_rows": [["fashion-mnist", "C=3"]]}),
    "privlabels": ("fedpaper.papers.privlabels.rounds", {"labels": [5], "pairwise_all_labels": [5], "samples_per_client": 64,
                                                        "val_eval": 64, "test_eval": 64,
                                                        "server_size": {"cifar10": 64, "fashion-mnist": 64}}),
    "fedmt": ("fedpaper.papers.fedmt.estimation", {"fig3_sizes": [10], "local_epochs": 1, "server_epochs": 1,
                                                      "num_clients": 2}),
    "fednca": ("fedpaper.papers.fednca.table8",
               {"clients": 4, "data.cifar10": {"singles": {"train": 1, "val": 1, "test": 1},
                                "pairs": {"train": 1, "val": 1, "test": 1}}}),
}
#: What must stay the paper's in each dry run (model and input size): {paper: {setting: value}}.
PAPER_MODEL = {
    "fedpals": {"lenet_c2": {"fashion-mnist": 12, "cifar10": 16}, "batch_size": 32, "num_clients": 10},
    "privlabels": {"widths": [32, 32, 64, 64], "hidden": 512, "batch_size": 64, "num_clients": 10},
    "fedmt": {"backbone": "resnet18_fedmt", "batch_size": 10},
    "fednca": {"model.backbone": "resnet18", "data.cifar10.input_size": 224, "batch_size": 32},
}


def _get(params: dict, dotted: str):
    for part in dotted.split("."):
        params = params[part]
    return params


@needs_data
@pytest.mark.parametrize("paper", sorted(PER_PAPER))
def test_dry_run_one_artifact_per_paper(paper, tmp_path, figures_tmp, cache_tmp):
    import importlib

    module, name = PER_PAPER[paper][0].rsplit(".", 1)
    fn = getattr(importlib.import_module(module), name)
    params = dryrun.parameters(paper, tmp_path / "scratch")
    params["overrides"].update(PER_PAPER[paper][1])
    results = fn(profile="paper", data_root=None, **params)
    results = results if isinstance(results, list) else [results]
    assert results
    for r in results:
        assert r.status.startswith("dry run of the paper profile"), r.status
        for p in r.paths.values():
            assert p.is_file() and str(p).startswith(str(tmp_path / "scratch"))
        rec = json.loads(r.paths["json"].read_text())
        assert rec["profile"] == "paper" and rec["dry_run"]["cut"]["rounds"] == 1 and rec["dry_run"]["cut"]["seeds"] == 1
        assert len(rec["seeds"]) == 1 if isinstance(rec.get("seeds"), list) else True
        for setting, value in PAPER_MODEL[paper].items():
            assert _get(rec["params"], setting) == value, (setting, rec["params"])
        assert len(r.table) > 0
    assert not figures_tmp.exists()  # never the committed figures
    assert (cache_tmp / "dry-run" / "results").is_dir()  # a results cache of its own
    assert not (cache_tmp / "results").exists() or not any((cache_tmp / "results").glob("*/*.pkl"))


def test_cut_leaves_out_settings_an_artifact_does_not_have():
    """fedpals fig1 has no settings and fig9 its own: the paper's cut applies where it names one
    (a plain exploration with the same overrides is still one line of bad input)."""
    from fedpaper.outputs.parameters import apply_overrides, validate

    cut = validate(profile="paper", seeds=1, overrides=dryrun.cut("fedpals")).to_apply()
    assert cut.dry_run
    assert apply_overrides({"rounds": 150, "deltas": [0.1]}, cut)["rounds"] == 1
    assert apply_overrides({}, cut)["overrides"]["rounds"] == 1
    plain = validate(profile="paper", overrides=dryrun.CUTS["fedpals"]).to_apply()
    with pytest.raises(BadParameterError, match="unknown override 'data_fraction'"):
        apply_overrides({"rounds": 150}, plain)
