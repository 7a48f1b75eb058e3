"""Figures that show images of the data set (catalog.DRAWS_DATA: fednca fig5, fig8) are never
re-rendered from committed results, which hold no pixels: `--rerender` or missing data is one
line and leaves the committed files as they are; `fedpaper reproduce` plans them out.

The real artifact functions run on copies of the committed files (FEDPAPER_FIGURES in tmp)."""
import shutil

import pytest

from fedpaper.outputs import artifacts as A
from fedpaper import cli
from fedpaper.ground.errors import BadParameterError, DataMissingError
from fedpaper.claims.catalog import DRAWS_DATA
from fedpaper.ground.paths import REPO_ROOT

SUFFIXES = ("csv", "json", "png", "pdf")


@pytest.fixture
def committed(figures_tmp):
    """The committed quick fednca fig5 and fig8 files, copied into a scratch figures folder."""
    (figures_tmp / "fednca").mkdir(parents=True)
    for aid in sorted(DRAWS_DATA):
        for s in SUFFIXES:
            shutil.copy(REPO_ROOT / "figures" / f"{aid}.{s}", figures_tmp / f"{aid}.{s}")
    return {(aid, s): (figures_tmp / f"{aid}.{s}").read_bytes() for aid in DRAWS_DATA for s in SUFFIXES}


@pytest.fixture
def dermamnist_root(tmp_path):
    """A data root where DermaMNIST is available (the on-disk check; nothing here parses it)."""
    (tmp_path / "data" / "dermamnist").mkdir(parents=True)
    (tmp_path / "data" / "dermamnist" / "dermamnist.npz").write_bytes(b"x")
    return tmp_path / "data"


def _functions():
    from fedpaper.papers import fednca

    return {"fednca/fig5": fednca.fig5, "fednca/fig8": fednca.fig8}


@pytest.mark.parametrize("aid", sorted(DRAWS_DATA))
def test_rerender_flag_refuses_with_one_line_and_keeps_the_committed_files(aid, committed, dermamnist_root,
                                                                           figures_tmp, monkeypatch):
    monkeypatch.setenv(A.RERENDER_ENV, "1")
    with pytest.raises(BadParameterError) as e:
        _functions()[aid](profile="quick", data_root=str(dermamnist_root))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{aid}: its figure shows images of the data set")
    assert "committed png/pdf are kept" in msg and "without --rerender" in msg
    assert {k: (figures_tmp / f"{k[0]}.{k[1]}").read_bytes() for k in committed} == committed


@pytest.mark.parametrize("aid", sorted(DRAWS_DATA))
def test_missing_data_refuses_with_one_line_naming_the_data_set(aid, committed, empty_data_root, figures_tmp):
    with pytest.raises(DataMissingError) as e:
        _functions()[aid](profile="quick")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{aid}: its figure shows images") and "dermamnist" in msg.lower()
    assert {k: (figures_tmp / f"{k[0]}.{k[1]}").read_bytes() for k in committed} == committed


def test_reproduce_plans_them_out(committed, dermamnist_root, empty_data_root, monkeypatch):
    ids = sorted(DRAWS_DATA)
    plan = cli.plan_run(ids, "quick", dermamnist_root)  # data here, no --rerender: regenerated
    assert sorted(a for aids in plan.notebooks.values() for a in aids) == ids and not plan.skipped

    monkeypatch.setenv(A.RERENDER_ENV, "1")
    plan = cli.plan_run(ids, "quick", dermamnist_root)
    assert set(plan.skipped) == DRAWS_DATA
    assert all(r.startswith("not re-rendered: its figure shows images") for r in plan.skipped.values())
    with pytest.raises(cli.UsageError) as e:  # named one by one: one line, exit 2
        cli.plan_run(["fednca/fig5"], "quick", dermamnist_root, explicit={"fednca/fig5"})
    assert "\n" not in str(e.value) and "images of the data set" in str(e.value)

    monkeypatch.delenv(A.RERENDER_ENV)
    plan = cli.plan_run(ids, "quick", empty_data_root)  # data missing
    assert set(plan.skipped) == DRAWS_DATA
    assert all("dermamnist" in r.lower() for r in plan.skipped.values())
