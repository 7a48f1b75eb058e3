"""The `<paper>/scaling` compute ladders (issue 29): rung plans, the artifact machinery on a fake
paper (no training), the gap to the paper, and their registration. The real smoke ladders run in
the notebooks (nbval: notebooks/<paper>/ladder.ipynb)."""
import copy
import importlib
import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from fedpaper.outputs import registry as papers
from fedpaper.claims import catalog
from fedpaper.outputs import ladder as LD
from fedpaper.claims import scaling as S
from fedpaper.outputs.pipeline import run_job
from fedpaper.runs.versions import PACKAGE_DIR, read_only_modules

PAPERS = ("fedpals", "privlabels", "fedmt", "fednca")


def _ladder(paper):
    return importlib.import_module(f"fedpaper.papers.{paper}.ladder").LADDER


@pytest.mark.parametrize("paper", PAPERS)
@pytest.mark.parametrize("profile", ["smoke", "quick", "long"])
def test_rungs_span_ten_times_the_compute_with_valid_overrides(paper, profile):
    lad = _ladder(paper)
    base, rungs = lad.rungs[profile]
    assert base == profile and len(rungs) >= S.MIN_RUNGS
    comp = [lad.compute(profile, r) for r in rungs]  # applies each rung's overrides (a bad key raises)
    assert max(comp) / min(comp) >= 10 and len(set(comp)) == len(comp)
    assert any(not r.overrides and r.committed is None for r in rungs)  # the profile itself is a rung
    for r in rungs:  # seeds are never a rung's business: the same seeds at every rung
        assert "seeds" not in r.overrides
    if profile != "smoke":  # only a committed rung (read, not rerun) may reach the paper's compute
        assert lad.paper_compute() > max(c for c, r in zip(comp, rungs) if r.committed is None)
        assert all(c == pytest.approx(lad.paper_compute()) for c, r in zip(comp, rungs) if r.committed == "paper")


def test_fednca_ladder_climbs_rounds_and_width():
    lad = _ladder("fednca")
    keys = {k for r in lad.rungs["long"][1] for k in r.overrides}
    assert {"rounds", "model.width"} <= keys


def test_privlabels_long_ladder_widens_the_cnn_above_the_profile():
    """Below the long profile every compared model was at chance (2 rounds x 100 images): the long
    ladder keeps the profile's rounds and data and climbs the CNN's width, one rung above it."""
    lad = _ladder("privlabels")
    rungs = lad.rungs["long"][1]
    prof = lad.settings("long")
    sets = [lad.rung_settings("long", r) for r in rungs]
    assert all((s["rounds"], s["samples_per_client"], s["hidden"]) == (prof["rounds"], prof["samples_per_client"],
                                                                       prof["hidden"]) for s in sets)
    comp = [lad.compute("long", r) for r in rungs]
    itself = comp[[not r.overrides for r in rungs].index(True)]
    assert min(comp) < itself < max(comp)
    assert [s["widths"][-1] for s in sets] == sorted(s["widths"][-1] for s in sets)


def test_paper_compute_is_computed_from_the_profiles():
    assert _ladder("fedpals").paper_compute() == pytest.approx(75.0)  # 150 rounds x 1 / (20 x 0.1)


def _fake_artifact(calls):
    """An artifact function of a pretend paper: FedPALS - FedAvg grows with log10(rounds)."""
    def fn(*, profile, data_root=None, out_dir=None, seeds=None, overrides=None):
        rounds = (overrides or {}).get("rounds", 4)
        calls.append({"seeds": list(seeds), "overrides": copy.deepcopy(overrides), "profile": profile})
        rows = []
        for m, gain in (("FedPALS", 6.0), ("FedAvg", 1.0)):
            per = [20 + gain * math.log10(rounds) + 0.4 * s * (-1) ** (s + rounds) for s in seeds]
            rows.append({"dataset": "CIFAR-10", "label_split": "C=2", "method": m, "metric": "accuracy_pct",
                         "mean": sum(per) / len(per), "std": 1.0, "n_seeds": len(per),
                         "per_seed": ";".join(f"{v:.4f}" for v in per)})
        return SimpleNamespace(artifact_id="fedpals/table1", table=pd.DataFrame(rows))
    return fn


def _margin(tabs):
    m = LD.method_cells(tabs["table1"], label_split="C=2")
    return LD.as_cell(LD.seeds_of(m["FedPALS"]) - LD.seeds_of(m["FedAvg"]))


def test_ladder_job_writes_rows_fit_figure_and_provenance(tmp_path):
    calls = []
    rungs = (LD.Rung("a", {"rounds": 1}), LD.Rung("b"), LD.Rung("c", {"rounds": 40}))
    lad = LD.Ladder(
        paper="fedpals", functions=(_fake_artifact(calls),), rungs={"smoke": ("smoke", rungs)},
        quantities=(LD.Quantity("claim 4: FedPALS - FedAvg", (4,), 1, _margin),),
        settings=lambda profile: {"rounds": {"quick": 20, "paper": 150}.get(profile, 4), "seeds": 3},
        work=lambda p: p["rounds"], work_unit="rounds", datasets=("cifar10",))
    res = run_job(LD.ladder_job(lad, profile="smoke"), profile="smoke", out_dir=tmp_path)
    t = pd.read_csv(res.paths["csv"])
    assert list(t.columns) == S.COLUMNS
    seeds = t[t["row"] == "seed"]
    assert len(seeds) == 3 * 3 and sorted(seeds.groupby("rung")["seed"].apply(tuple).unique()) == [(0, 1, 2)]
    assert [c["seeds"] for c in calls] == [[0, 1, 2]] * 3 and [c["overrides"] for c in calls] == [
        {"rounds": 1}, None, {"rounds": 40}]
    assert seeds.groupby("rung")["compute"].first().to_dict() == pytest.approx({"a": 1 / 20, "b": 4 / 20, "c": 2.0})
    (fit,) = t[t["row"] == "fit"].to_dict("records")
    assert fit["trend"] == S.NARROWING and fit["claim"] == "fedpals/claim-4"
    assert fit["slope"] == pytest.approx(5.0, abs=0.5) and fit["paper_compute"] == pytest.approx(7.5)
    x = np.log10(seeds.groupby("rung")["compute"].first())
    y = seeds.groupby("rung")["value"].mean()
    assert fit["projection"] == pytest.approx(y.mean() + fit["slope"] * (math.log10(7.5) - x.mean()))
    assert res.paths["png"].is_file() and res.paths["pdf"].is_file()
    rec = json.loads(res.paths["json"].read_text())
    assert any("rungs on the smoke profile" in n for n in rec["notes"])
    # the causes read this csv back
    from fedpaper.claims.causes import ladder_trends
    (tr,) = ladder_trends([t])["fedpals/claim-4"]
    assert tr.trend == S.NARROWING and tr.rungs == 3


@pytest.mark.parametrize("case", ["committed", "other seeds", "absent"])
def test_a_committed_rung_is_read_from_its_profiles_committed_table_never_trained(tmp_path, figures_tmp, case):
    """A top rung too costly to rerun (Rung.committed): its values come from the committed csv of
    that profile, made with the ladder's seeds (its provenance json says so), at the compute of that
    profile; nothing is trained for it. Made with other seeds, or not committed: no value there, and
    a note says why."""
    calls = []
    fn = _fake_artifact(calls)
    rungs = (LD.Rung("a", {"rounds": 1}), LD.Rung("b"), LD.Rung("c", {"rounds": 40}),
             LD.Rung("d", committed="paper", reads=("table1",)))
    lad = LD.Ladder(
        paper="fedpals", functions=(fn,), rungs={"smoke": ("smoke", rungs)},
        quantities=(LD.Quantity("claim 4: FedPALS - FedAvg", (4,), 1, _margin),),
        settings=lambda profile: {"rounds": {"quick": 20, "paper": 150}.get(profile, 4), "seeds": 3},
        work=lambda p: p["rounds"], work_unit="rounds", datasets=("cifar10",))
    folder = figures_tmp / "paper" / "fedpals"
    if case != "absent":
        folder.mkdir(parents=True)
        fn(profile="paper", seeds=[0, 1, 2], overrides={"rounds": 150}).table.to_csv(folder / "table1.csv", index=False)
        (folder / "table1.json").write_text(json.dumps({"seeds": [0, 1, 2] if case == "committed" else [3, 4, 5],
                                                        "git": {"commit": "abc"}, "timestamp": "t", "wall_time_s": 9}))
    calls.clear()
    res = run_job(LD.ladder_job(lad, profile="smoke"), profile="smoke", out_dir=tmp_path)
    assert [c["overrides"] for c in calls] == [{"rounds": 1}, None, {"rounds": 40}]  # d trains nothing
    t = pd.read_csv(res.paths["csv"])
    seeds = t[t["row"] == "seed"]
    notes = json.loads(res.paths["json"].read_text())["notes"]
    if case == "committed":
        assert seeds.groupby("rung")["compute"].first()["d"] == pytest.approx(150 / 20)
        got = seeds[seeds["rung"] == "d"]["value"].tolist()
        assert got == pytest.approx([5.0 * math.log10(150) + 0.4 * s * ((-1) ** (s + 150) - (-1) ** (s + 150))
                                     for s in (0, 1, 2)], abs=1e-3)
        assert any("rung d: fedpals/table1 at the paper profile: the committed table1.csv" in n and "abc" in n
                   for n in notes)
    else:
        assert "d" not in set(seeds["rung"])
        why = "made with seeds [3, 4, 5]" if case == "other seeds" else "is not committed"
        assert any(f"rung d: fedpals/table1 at the paper profile {why}" in n or why in n for n in notes), notes


def test_gap_to_paper_joins_by_key_per_seed():
    ours = pd.DataFrame([{"dataset": "A", "method": "m", "metric": "acc", "mean": 11.0, "per_seed": "10;12",
                          "n_seeds": 2, "backbone": "lenet"},
                         {"dataset": "B", "method": "m", "metric": "acc", "mean": 5.0, "per_seed": "4;6", "n_seeds": 2,
                          "backbone": "lenet"}])
    paper = pd.DataFrame([{"dataset": "A", "method": "m", "metric": "acc", "mean": 20.0, "backbone": "resnet"},
                          {"dataset": "B", "method": "m", "metric": "acc", "mean": 5.0, "backbone": "resnet"}])
    c = LD.gap_to_paper(ours, paper)
    assert c.seeds == pytest.approx(((10 + 1) / 2, (8 + 1) / 2))


def test_ladders_are_registered_and_read_only():
    papers.load_papers()
    for p in PAPERS:
        impl = papers.implementation(f"{p}/scaling")
        assert impl.notebook == f"notebooks/{p}/ladder.ipynb"
        assert catalog.get_artifact(f"{p}/scaling").kind == "ladder"
        assert "ladder" in read_only_modules(PACKAGE_DIR / "papers" / p)
    assert len(catalog.ARTIFACTS) == 78 and set(catalog.LADDERS) == {f"{p}/scaling" for p in PAPERS}


def test_a_ladder_at_the_paper_profile_is_one_line_and_skipped_by_reproduce(capsys):
    """A ladder has no paper rungs: calling it says so in one line, and `reproduce --profile paper`
    (or its dry run) skips it instead of failing."""
    from fedpaper import cli
    from fedpaper.ground.errors import BadParameterError
    from fedpaper.papers.fedpals import ladder as L
    from fedpaper.outputs.ladder import ladder_job

    with pytest.raises(BadParameterError, match="no rungs at the paper profile") as e:
        ladder_job(L.LADDER, profile="paper")
    assert "\n" not in str(e.value)
    plan = cli.plan_run(["fedpals/scaling"], "paper", cli._resolve_data_root(None))
    assert "fedpals/scaling" in plan.skipped and not plan.notebooks
