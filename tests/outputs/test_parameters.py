"""Parameters of artifact functions (one place, one line), overrides and exploration runs."""
import json
import subprocess
from pathlib import Path

import pytest

from fedpaper.outputs import parameters as P
from fedpaper.ground.errors import BadParameterError, FedpaperError
from fedpaper.ground.paths import REPO_ROOT


def _one_line_error(fn, **kw) -> str:
    with pytest.raises(FedpaperError) as e:
        fn(**kw)
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


@pytest.mark.parametrize("kw, words", [
    ({"profile": "fast"}, ["'fast'", "smoke, quick, long, paper"]),
    ({"profile": 3}, ["profile=3", "smoke, quick, long, paper"]),
    ({"seeds": "abc"}, ["seeds='abc'", "string", "seeds=3"]),
    ({"seeds": 2.5}, ["seeds=2.5", "float"]),
    ({"seeds": "12"}, ["seeds='12'", "string"]),
    ({"seeds": 0}, ["seeds=0", ">= 1"]),
    ({"seeds": [1, 1]}, ["distinct"]),
    ({"data_root": 5}, ["data_root=5", "path"]),
    ({"out_dir": ["x"]}, ["out_dir=['x']"]),
    ({"overrides": "[1, 2]"}, ["not a dict"]),
    ({"overrides": 7}, ["overrides=7", "dict"]),
    ({"overrides": {"roundz": 3}}, ["unknown override 'roundz'", "rounds", "hyper.mu"]),
    ({"overrides": {"rounds": 0}}, ["rounds", "integer >= 1"]),
    ({"overrides": {"rounds": 2.5}}, ["rounds", "integer"]),
    ({"overrides": {"mu": "big"}}, ["hyper.mu='big'", "number >= 0"]),
    ({"overrides": {"lr": -0.1}}, ["lr=-0.1", "number >= 0"]),
    ({"overrides": {"shift_methods": "FedAvg"}}, ["shift_methods", "list"]),
    ({"overrides": {"seeds": "x"}}, ["overrides['seeds']='x'"]),
    ({"seeds": 2, "overrides": {"seeds": 3}}, ["given twice"]),
    ({"overrides": {"table1_rows": [["fashion-mnist", "C=4"]]}},
     ["table1_rows", "[fashion-mnist, C=4]", "[fashion-mnist, C=3]", "[cifar10, beta=0.1]"]),
    ({"profile": "quick", "overrides": {"table1_rows": [["cifar10", "C=9"]]}}, ["[cifar10, C=9]", "[cifar10, C=2]"]),
    ({"overrides": {"table1_rows": []}}, ["table1_rows=[]", "non-empty", "[cifar10, C=3]"]),
    ({"overrides": {"table1_rows": ["cifar10", "C=3"]}}, ["not a list of entries", "[cifar10, C=3]"]),
    ({"overrides": {"shift_methods": ["FedAvg", "FedAVG"]}}, ["FedAVG", "FedPALS, FedAvg, FedProx"]),
    ({"overrides": {"fig7_methods": ["Oracle", "Oracle"]}}, ["Oracle is given twice"]),
])
def test_bad_parameters_fail_with_one_line_before_any_work(kw, words, cache_tmp):
    from fedpaper.papers.fedpals import table1

    msg = _one_line_error(table1, **kw)
    for w in words:
        assert w in msg, msg
    assert not (cache_tmp / "results").exists() or not any((cache_tmp / "results").rglob("*.pkl"))


def test_unknown_override_of_an_artifact_without_settings():
    from fedpaper.papers.fedpals import fig1

    msg = _one_line_error(fig1, overrides={"rounds": 3})
    assert "unknown override 'rounds'" in msg and "fedpals/fig1" in msg and "no settings" in msg


def test_choices_check_names_and_allow_a_setting_the_profile_leaves_unset():
    params = {"rounds": 3, "methods": ["A"], "mode": "x", "cfg": {"data": "d1"}}
    choices = {"methods": ["A", "B"], "mode": ["x", "y"], "cfg.data": ["d1", "d2"], "rows": [["d1", "r1"], ["d2", "r2"]]}
    got = P.apply_overrides(dict(params), {"methods": ("B", "A"), "mode": "y", "data": "d2", "rows": [("d2", "r2")]},
                            choices=choices)
    assert got["methods"] == ["B", "A"] and got["mode"] == "y" and got["cfg"]["data"] == "d2"
    assert got["rows"] == [["d2", "r2"]]
    for bad, words in [({"methods": ["C"]}, ["methods: C", "A, B"]), ({"mode": "z"}, ["mode='z'", "x, y"]),
                       ({"mode": ["x"]}, ["mode=['x']", "x, y"]), ({"data": "d3"}, ["cfg.data='d3'", "d1, d2"]),
                       ({"rows": [["d1", "r2"]]}, ["[d1, r2]", "[d1, r1], [d2, r2]"]),
                       ({"rowz": 1}, ["unknown override 'rowz'", "rows"])]:
        with pytest.raises(FedpaperError) as e:
            P.apply_overrides(dict(params), bad, choices=choices)
        assert "\n" not in str(e.value) and all(w in str(e.value) for w in words), (bad, str(e.value))


@pytest.mark.parametrize("override, words", [
    ({"optimizer": "sgdd"}, ["optimizer='sgdd'", "sgd, adam, adamw"]),
    ({"epochs.tuning_optimizer": "lbfgs"}, ["epochs.tuning_optimizer='lbfgs'", "sgd, adam"]),
    ({"precision": "fp8"}, ["precision='fp8'", "fp32, bf16"]),
    ({"backend": "gpu"}, ["backend='gpu'", "auto, vmap, loop, grouped"]),
])
def test_engine_setting_names_are_checked_before_any_run(override, words, cache_tmp):
    from fedpaper.papers.privlabels import rounds

    msg = _one_line_error(rounds, overrides=override)
    assert all(w in msg for w in words), msg
    assert not (cache_tmp / "results").exists() or not any((cache_tmp / "results").rglob("*.pkl"))


def test_a_bad_row_override_in_a_notebook_call_is_one_line_before_any_run(cache_tmp):
    from fedpaper.ground.errors import FedpaperError as E
    from fedpaper.notebook import run
    from fedpaper.papers.fedpals import table1

    with pytest.raises(E) as e:
        run(table1, profile="smoke", overrides={"table1_rows": [["fashion-mnist", "C=4"]]})
    assert "\n" not in str(e.value) and "[fashion-mnist, C=4]" in str(e.value)
    assert not (cache_tmp / "results").exists() or not any((cache_tmp / "results").rglob("*.pkl"))


def test_overrides_apply_to_nested_and_broadcast_and_papermill_strings():
    from fedpaper.outputs.pipeline import declared_jobs
    from fedpaper.papers import fedpals, privlabels

    def settled(fn, **parameters):
        return declared_jobs(fn, profile="smoke", **parameters)[0].params

    p = settled(fedpals.label_marginals, overrides="{rounds: 7, mu: 0.1, 'data_fraction.cifar10': 0.5}")
    assert p["rounds"] == {"fashion-mnist": 7, "cifar10": 7}
    assert p["hyper"]["mu"] == 0.1 and p["data_fraction"]["cifar10"] == 0.5
    assert p["data_fraction"]["fashion-mnist"] == settled(fedpals.label_marginals)["data_fraction"]["fashion-mnist"]
    assert p["overrides"] == {"rounds": 7, "mu": 0.1, "data_fraction.cifar10": 0.5}
    q = settled(privlabels.tables, overrides={"mu": 0.5, "widths": [4, 4, 8, 8]}, seeds=3)
    assert q["mu"] == 0.5 and q["widths"] == [4, 4, 8, 8] and q["seeds"] == [0, 1, 2]
    assert "overrides" not in settled(fedpals.label_marginals)  # outside an exploration: the profile as is


def test_resolve_seeds_makes_every_seed_setting_a_list():
    settings = {"seeds": 3, "marginal_seeds": 2, "epochs": {"seeds": 2, "rounds": 5}, "pacs": {"seeds": [4, 1]},
                "seed": 7, "notes": ["3 seeds"], "overrides": {"marginal_seeds": 2}}
    got = P.resolve_seeds(settings)
    assert got == {"seeds": [0, 1, 2], "marginal_seeds": [0, 1], "epochs": {"seeds": [0, 1], "rounds": 5},
                   "pacs": {"seeds": [4, 1]}, "seed": 7, "notes": ["3 seeds"], "overrides": {"marginal_seeds": 2}}
    assert settings["epochs"]["seeds"] == 2 and settings["seeds"] == 3  # a copy: the job's settings are kept
    # explicit seeds (a count or a list) replace every seed setting, nested ones included
    for explicit, ids in ((2, [0, 1]), ([5, 9], [5, 9])):
        got = P.resolve_seeds(settings, explicit)
        assert got["seeds"] == got["marginal_seeds"] == got["epochs"]["seeds"] == got["pacs"]["seeds"] == ids
    assert P.resolve_seeds({"rounds": 2}) == {"rounds": 2}  # no seeds: none added
    assert P.resolve_seeds({"rounds": 2}, [3]) == {"rounds": 2, "seeds": [3]}
    assert P.resolve_seeds(P.resolve_seeds(settings)) == P.resolve_seeds(settings)  # lists stay as they are
    with pytest.raises(BadParameterError, match="seeds=0 is out of range"):
        P.resolve_seeds(settings, 0)


def _fedavg_run(rounds):
    """One tiny FedAvg run of the fedpals smoke profile with `rounds` overridden, trained as a FedPALS
    artifact's declared runs are (its settings' specs through run_specs, at the sweeps' execution)."""
    from fedpaper.outputs.pipeline import declared_jobs
    from fedpaper.papers import fedpals
    from fedpaper.papers.fedpals import runs as R
    from fedpaper.papers.fedpals import train as TR
    from fedpaper.runs.executors import run_specs
    from fedpaper.runs.store import ResultStore

    p = declared_jobs(fedpals.label_marginals, profile="smoke", seeds=[0], overrides={"rounds": rounds})[0].params
    setting = {"dataset": "fashion-mnist", "split": {"scheme": "sparsity", "C": 3}, "methods": ["FedAvg"]}
    specs = TR.settings_specs(p, [setting])
    results = run_specs(specs, execution=R.execution(), max_batch=TR.runs_per_engine_call())
    return specs, results, {ResultStore().key(s) for s in specs}


def test_an_override_changes_the_cache_key_and_the_result(cache_tmp):
    from fedpaper.runs.store import ResultStore

    specs1, res1, keys1 = _fedavg_run(1)
    specs2, res2, keys2 = _fedavg_run(2)
    assert keys1.isdisjoint(keys2)
    assert len(ResultStore()) == len(keys1) + len(keys2)
    assert [len(r["history"]) for r in res1] == [1] * len(res1)
    assert [len(r["history"]) for r in res2] == [2] * len(res2)
    _, again, keys1b = _fedavg_run(1)  # going back to the first setting reads the cache
    assert keys1b == keys1 and again == res1 and len(ResultStore()) == len(keys1) + len(keys2)


def _git_status() -> str:
    out = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain"], capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else "no git"


def test_an_exploration_goes_to_scratch_is_marked_and_leaves_git_status_clean(cache_tmp, figures_tmp):
    from fedpaper.papers.fedpals import fig9

    before = _git_status()
    r = fig9(overrides={"rounds": 2, "deltas": [0.0, 1.0]}, seeds=3)
    assert _git_status() == before
    assert not figures_tmp.exists() or not any(figures_tmp.rglob("*"))
    png = Path(r.paths["png"])
    assert png.is_file() and (cache_tmp / "explore") in png.parents
    rec = json.loads(Path(r.paths["json"]).read_text())
    assert rec["exploration"]["changes"] == {"rounds": 2, "deltas": [0.0, 1.0], "seeds": 3}
    assert any("3 seeds" in n for n in rec["notes"]) and not any("2 seeds" in n for n in rec["notes"])
    assert rec["notes"][0].startswith("EXPLORATION: changed rounds=2, deltas=[0.0, 1.0], seeds=3")
    assert rec["params"]["rounds"] == 2 and rec["params"]["overrides"] == {"rounds": 2, "deltas": [0.0, 1.0]}
    assert sorted(r.table["delta"].unique()) == [0.0, 1.0] if "delta" in r.table else True
    assert r.exploration == rec["exploration"]


def test_report_never_scores_an_exploration(cache_tmp, figures_tmp, readme_tmp):
    from fedpaper.papers.fedpals import fig9
    from fedpaper.report import render_report, status_rows

    fig9(profile="quick", overrides={"rounds": 2, "deltas": [0.0], "n_test": 60, "n_val": 30}, seeds=1,
         out_dir=figures_tmp)  # an exploration written to figures/ on explicit request
    assert (figures_tmp / "fedpals" / "fig9.csv").is_file()
    row = next(r for r in status_rows(paper="fedpals") if r["id"] == "fedpals/fig9")
    assert row["committed"] is False and "exploration" in row["status"] and "rounds=2" in row["status"]
    text = render_report()
    assert "figures/ holds an exploration run (rounds=2" in text


def test_the_package_never_switches_the_matplotlib_backend():
    offenders = [str(p) for p in (REPO_ROOT / "fedpaper").rglob("*.py")
                 if "matplotlib.use(" in p.read_text(encoding="utf-8")
                 or "plt.switch_backend(" in p.read_text(encoding="utf-8")]
    assert offenders == []


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def test_dirty_flag_ignores_notebook_outputs(tmp_path, monkeypatch):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    from fedpaper.runs import provenance

    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    nb = new_notebook(cells=[new_code_cell("x = 1")])
    path = repo / "n.ipynb"
    nbformat.write(nb, str(path))
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "nb")
    monkeypatch.setattr(provenance, "REPO_ROOT", repo)
    assert provenance.git_info()["dirty"] is False
    nb.cells[0].outputs = [new_output("stream", name="stdout", text="1\n")]
    nb.cells[0].execution_count = 1
    nbformat.write(nb, str(path))
    assert _git(repo, "status", "--porcelain").strip()  # git sees a change (no filter here) ...
    assert provenance.git_info()["dirty"] is False  # ... but it is not code
    nb.cells[0].source = "x = 2"
    nbformat.write(nb, str(path))
    assert provenance.git_info()["dirty"] is True


def test_reproduce_exits_2_when_notebooks_stopped_on_bad_input(monkeypatch, capsys, figures_tmp, cache_tmp,
                                                               readme_tmp):
    from fedpaper import cli

    class NotebookError(Exception):  # what papermill raises: the kernel's exception name and value
        ename, evalue = "BadParameterError", "seeds='abc' is a string; give a number of seeds >= 1"

    def execute(nb, out_nb, parameters, timeout):
        raise NotebookError(NotebookError.evalue)

    monkeypatch.setattr(cli, "_execute", execute)
    rc = cli.main(["reproduce", "--profile", "smoke", "--only", "fedpals/fig9", "--no-report"])
    out = capsys.readouterr().out
    assert rc == 2, out
    assert "BadParameterError: seeds='abc'" in out
    NotebookError.ename = "RuntimeError"
    assert cli.main(["reproduce", "--profile", "smoke", "--only", "fedpals/fig9", "--no-report"]) == 1
