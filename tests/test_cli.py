"""The `fedpaper` command: one-line errors with exit code 2, list/report, reproduce via papermill."""
import os
import subprocess
import sys
import textwrap

import pytest

from fedpaper import cli
from fedpaper.outputs import registry as papers
from fedpaper.ground.paths import REPO_ROOT
from repo_scripts import load_script


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "fedpaper.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT, env=env)


def one_error_line(proc):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_unknown_artifact_suggests_close_match():
    line = one_error_line(run_cli("reproduce", "--profile", "smoke", "--only", "fedpals/tabel1"))
    assert "unknown artifact id 'fedpals/tabel1'" in line and "fedpals/table1" in line


def test_unknown_profile():
    line = one_error_line(run_cli("reproduce", "--profile", "fast"))
    assert "unknown profile 'fast'" in line and "smoke, quick, long, paper" in line


def test_missing_data_root(tmp_path):
    line = one_error_line(run_cli("reproduce", "--profile", "quick", "--data-root", str(tmp_path / "nope")))
    assert "does not exist" in line and "--data-root" in line


def test_missing_env_data_root(tmp_path):
    import os

    env = dict(os.environ, FEDPAPER_DATA=str(tmp_path / "nope"))
    line = one_error_line(run_cli("list", env=env))
    assert "FEDPAPER_DATA" in line


def test_no_command_and_bad_option():
    assert "no command" in one_error_line(run_cli())
    assert "--frobnicate" in one_error_line(run_cli("reproduce", "--frobnicate"))


def test_only_not_implemented_is_one_line(capsys, empty_data_root):
    assert cli.main(["reproduce", "--profile", "smoke", "--only", "fedmt/fig2d"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fedmt/fig2d cannot be regenerated here" in err[0] and "ImageNet" in err[0]


def test_only_paper_lists_skipped_without_failing(capsys, figures_tmp, readme_tmp, empty_data_root):
    assert cli.main(["reproduce", "--profile", "quick", "--only", "fedmt"]) == 0
    out = capsys.readouterr().out
    assert ("artifacts: 0 regenerated, 0 re-rendered from committed results, 12 not regenerated, 0 failed; "
            "notebooks: 0 ok, 0 failed") in out
    assert "\nnot regenerated fedmt/table3: Fitzpatrick 17k is not available here" in out
    assert (figures_tmp / "REPORT.md").is_file()


def test_only_missing_data_without_committed_results(capsys, monkeypatch, empty_data_root, figures_tmp):
    papers.load_papers()  # first, so that importing the paper modules cannot undo the patch below
    monkeypatch.setitem(papers._IMPLEMENTATIONS, "fedpals/table2",
                        papers.Implementation("fedpals/table2", "notebooks/fedpals/table2.ipynb"))
    assert cli.main(["reproduce", "--profile", "quick", "--only", "fedpals/table2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "PACS" in err[0] and "download" in err[0]
    # with committed results it is re-rendered instead: the plan keeps the notebook
    (figures_tmp / "fedpals").mkdir(parents=True)
    (figures_tmp / "fedpals" / "table2.csv").write_text("method,mean\nFedPALS,1\n")
    plan = cli.plan_run(["fedpals/table2"], "quick", empty_data_root, explicit=True)
    assert plan.notebooks == {"notebooks/fedpals/table2.ipynb": ["fedpals/table2"]}


def test_list_and_report(capsys, figures_tmp, readme_tmp):
    readme_tmp.write_text("intro\n<!-- artifact-status:start -->\nold\n<!-- artifact-status:end -->\ntail\n")
    assert cli.main(["list", "--paper", "fedmt"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 12 and out[-1].startswith("fedmt/scaling  ladder")  # 11 artifacts and the compute ladder
    assert any(ln.startswith("fedmt/fig2d") and "ImageNet" in ln for ln in out)
    assert cli.main(["report"]) == 0
    assert (figures_tmp / "REPORT.md").is_file()
    text = readme_tmp.read_text()
    assert text.startswith("intro\n") and text.endswith("tail\n") and "old" not in text
    assert "`fedmt/table2`" in text and "`fedmt/scaling`" not in text  # the README table: the TARGETS artifacts


DEMO = textwrap.dedent(
    """
    import pandas as pd
    from fedpaper.outputs.pipeline import ArtifactJob

    def _draw(table, params):
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(3, 1))
        ax.axis("off")
        ax.table(cellText=table.values, colLabels=list(table.columns), loc="center")
        return fig

    def table1(profile="smoke", data_root=None, seeds=None, overrides=None):
        compute = lambda p: (pd.DataFrame({"layer": ["conv"], "filters": [3]}), {"device": "cpu"})
        return ArtifactJob("privlabels/table1", {"cnn": "demo"}, compute, _draw, ("none",))

    def fig2(profile="smoke", data_root=None, seeds=None, overrides=None):  # needs CIFAR-10
        compute = lambda p: (pd.DataFrame({"method": ["FedAvg"], "mean": [0.5]}), {})
        return ArtifactJob("privlabels/fig2", {}, compute, _draw, ("cifar10",))

    def table1_and_fig2(**kwargs):  # one notebook, two artifacts
        return [table1(**kwargs), fig2(**kwargs)]

    def broken(**kwargs):
        raise RuntimeError("deliberate failure")
    """
)


def _new_notebook_module():
    return load_script("scripts/new_notebook.py")


def test_reproduce_runs_notebooks_keeps_going_and_writes_report(tmp_path, monkeypatch, capsys, figures_tmp,
                                                                cache_tmp, readme_tmp, empty_data_root):
    import nbformat

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "fp_demo.py").write_text(DEMO)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(pkg), os.environ.get("PYTHONPATH")) if p))
    nn = _new_notebook_module()
    papers.load_papers()  # first, so that importing the paper modules cannot undo the patches below
    nbs = {}
    for aid, call in [("privlabels/table1", "fp_demo.table1_and_fig2"), ("privlabels/table2", "fp_demo.broken")]:
        nb = nn.make_notebook("privlabels", aid.split("/")[1], aid, call, section="App A")
        path = tmp_path / f"{aid.split('/')[1]}.ipynb"
        nbformat.write(nb, str(path))
        nbs[aid] = path
        monkeypatch.setitem(papers._IMPLEMENTATIONS, aid, papers.Implementation(aid, str(path)))
    monkeypatch.setitem(papers._IMPLEMENTATIONS, "privlabels/fig2",
                        papers.Implementation("privlabels/fig2", str(nbs["privlabels/table1"])))
    (figures_tmp / "privlabels").mkdir(parents=True)
    (figures_tmp / "privlabels" / "fig2.csv").write_text("method,mean\nFedAvg,0.25\n")  # committed results
    before = nbs["privlabels/table1"].read_bytes()
    readme_tmp.write_text("<!-- artifact-status:start -->\n<!-- artifact-status:end -->\n")

    rc = cli.main(["reproduce", "--profile", "quick", "--only", "privlabels/table1", "privlabels/table2",
                   "privlabels/fig2"])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "FAILED" in out and "deliberate failure" in out and "ok      " in out
    # per artifact: what became of it, and a summary line that counts each kind
    assert "\nregenerated     privlabels/table1: regenerated -> " in out
    assert "\nre-rendered     privlabels/fig2: re-rendered from committed results; cifar10 missing" in out
    assert "\nFAILED          privlabels/table2: " in out
    assert ("artifacts: 1 regenerated, 1 re-rendered from committed results, 0 not regenerated, 1 failed; "
            "notebooks: 1 ok, 1 failed") in out
    assert "FEDPAPER_STATUS_FILE" not in os.environ and not list((cache_tmp / "executed").rglob("status-*"))
    for suffix in ("png", "pdf", "csv", "json"):
        assert (figures_tmp / "privlabels" / f"table1.{suffix}").is_file()
    assert nbs["privlabels/table1"].read_bytes() == before  # the source notebook is untouched
    executed = list((cache_tmp / "executed" / "quick").rglob("table1.ipynb"))
    assert executed
    report = (figures_tmp / "REPORT.md").read_text()
    assert "`privlabels/table1`: profile quick" in report
    line = [ln for ln in readme_tmp.read_text().splitlines() if "`privlabels/table1`" in ln][0]
    assert line.endswith("| table | none | regenerated (quick) |")


def test_generated_notebook_shape():
    nn = _new_notebook_module()
    nb = nn.make_notebook("fedpals", "table1", "fedpals/table1", "fedpaper.papers.fedpals.table1",
                          section="Sec 5.1, Table 1")
    assert nb.metadata.kernelspec["name"] == "python3"
    assert nb.metadata.fedpaper["artifacts"] == ["fedpals/table1"]
    md, params, call, show, *explain = nb.cells
    assert [c.source.split("(")[0] for c in explain[1::2]] == ["show_specs", "show_seeds", "show_vs_paper", "show_claims"]
    assert all(c.metadata["editable"] is False and c.metadata["deletable"] is False for c in explain)
    assert all(c.cell_type == "markdown" and "\n" not in c.source for c in explain[::2])  # one-line headers
    assert "fedpals/table1" in md.source and "Sec 5.1, Table 1" in md.source
    assert params.metadata["tags"] == ["parameters"]
    for line in ('profile = "smoke"', "data_root = None", "out_dir = None", "seeds = None", "overrides = {}"):
        assert line in params.source
    assert ("result = run(table1, profile=profile, data_root=data_root, out_dir=out_dir, seeds=seeds,\n"
            "             overrides=overrides)") in call.source
    assert "from fedpaper.papers.fedpals import table1" in call.source
    assert "from fedpaper.notebook import run, show" in call.source
    assert show.source.startswith("show(result)")


def test_artifact_outcomes_each_kind():
    plan = cli.Plan(notebooks={"a.ipynb": ["p/x", "p/y"], "b.ipynb": ["p/z"]}, skipped={"p/w": "not regenerated: why"})
    statuses = {"p/x": {"artifact": "p/x", "kind": "rerendered", "status": "re-rendered ...", "csv": "x.csv"},
                "p/extra": {"artifact": "p/extra", "kind": "regenerated", "status": "regenerated", "csv": "e.csv"}}
    out = cli.artifact_outcomes(["p/w", "p/x", "p/y", "p/z"], plan, statuses, {"b.ipynb": "RuntimeError: boom"})
    assert {a: k for a, (k, _) in out.items()} == {"p/w": "skipped", "p/x": "rerendered", "p/y": "skipped",
                                                   "p/z": "failed", "p/extra": "regenerated"}
    assert out["p/w"][1] == "why" and "a.ipynb finished without writing it" in out["p/y"][1]
    assert cli.outcome_summary(out) == ("artifacts: 1 regenerated, 1 re-rendered from committed results, "
                                        "2 not regenerated, 1 failed")


def test_smoke_into_committed_figures_is_bad_input(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "FEDPAPER_FIGURES"}  # the real figures/ folder
    env["FEDPAPER_CACHE"] = str(tmp_path / "cache")
    line = one_error_line(run_cli("reproduce", "--profile", "smoke", "--only", "fedpals/table1", "--out-dir",
                                  "figures", env=env))
    assert "committed figures folder" in line and "out_dir" in line
    assert not (tmp_path / "cache" / "executed").exists()  # refused before any notebook ran


def test_reproduce_help_shows_debug():
    proc = run_cli("reproduce", "--help")
    assert proc.returncode == 0 and "--debug" in proc.stdout
