"""Papers declare what they provide in explicit tables (issue 33, item 4): NOTEBOOKS, NOT_IMPLEMENTED,
CLAIMS, LAYOUTS and POOLS_BUILDERS in fedpaper/papers/<paper>/__init__.py, read by papers.load_papers
and by the runs layer when a run of the paper is built; importing a paper registers nothing."""
import importlib

import pytest

from fedpaper.outputs import registry as papers
from fedpaper.runs import experiment as E


@pytest.mark.parametrize("paper", papers.PAPERS)
def test_a_paper_names_its_layouts_and_data_after_itself(paper):
    mod = importlib.import_module(f"fedpaper.papers.{paper}")
    for name in list(mod.LAYOUTS) + list(getattr(mod, "POOLS_BUILDERS", {})):
        assert name == paper or name.startswith(paper + "-"), name  # how get_pools finds the paper of a data name
    assert all(isinstance(b, E.PoolsBuilder) for b in getattr(mod, "POOLS_BUILDERS", {}).values())
    assert set(mod.NOTEBOOKS) | set(getattr(mod, "NOT_IMPLEMENTED", {})) <= set(papers.artifact_ids(paper, ladders=True))


def test_a_run_finds_its_papers_tables_from_an_empty_registry(monkeypatch):
    from fedpaper.papers.fedmt import profiles as P, runs as R

    monkeypatch.setattr(E, "LAYOUTS", {})
    monkeypatch.setattr(E, "POOLS_BUILDERS", {})
    E.get_pools.cache_clear()
    try:
        setup = R.spec(P.settings("smoke"), "FedMT (E)", 0).build()
        assert "fedmt" in E.LAYOUTS and E.POOLS_BUILDERS["fedmt-cifar100"].reads == "cifar100"
        assert len(setup.federation.client_indices) > 0
    finally:
        E.get_pools.cache_clear()


def test_a_pools_builder_must_be_declared_as_one():
    with pytest.raises(TypeError, match="PoolsBuilder"):
        E.register_tables({}, {"x-data": lambda options, root, device: None})
