"""The registry of what the paper packages implement: filled from their tables, over the catalog
(fedpaper.claims.catalog, re-exported here).

A paper package (`fedpaper/papers/<paper>/`) declares what it implements in explicit tables of its
`__init__.py`, read by `load_papers()` (importing a paper registers nothing by itself)::

    NOTEBOOKS = {"fedpals/table1": "notebooks/fedpals/table1.ipynb", ...}   # artifact -> its notebook
    NOT_IMPLEMENTED = {"fedmt/table3": "Fitzpatrick 17k is not available here ..."}   # artifact -> why
    LAYOUTS = {"fedpals-label-shift": runs.federation}                       # partition layouts
    POOLS_BUILDERS = {"fedpals-iwildcam": PoolsBuilder(real._iwild_run_pools, reads="iwildcam")}
    CLAIMS = ClaimSet("fedpals")     # fedpaper.claims; its claims:

    @CLAIMS.claim(1, ["table1"], "FedPALS best non-oracle in every row")
    def c1(t): ...                   # -> a Verdict (fedpaper/claims docstring)

The per-paper modules are imported lazily (`load_papers()`), so importing this module is
cheap and a paper module that does not exist yet is simply absent.
"""
from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Optional

from fedpaper.ground.errors import UnknownNameError
from fedpaper.ground.paths import REPO_ROOT

from fedpaper.claims.catalog import (  # noqa: F401  (re-exported)
    ARTIFACTS,
    LADDERS,
    DATASETS,
    PAPER_TITLES,
    PAPERS,
    Artifact,
    Claim,
    artifact_ids,
    dataset_available,
    dataset_info,
    get_artifact,
    how_to_get,
    load_reported,
    missing_message,
    reported_path,
)
from fedpaper.blocks.data.registry import unknown_message


@dataclass
class Implementation:
    """How an artifact is regenerated: its notebook (relative to the repo root)."""

    artifact_id: str
    notebook: str


_IMPLEMENTATIONS: dict[str, Implementation] = {}
_NOT_IMPLEMENTED: dict[str, str] = {}
_CLAIMS: dict[str, Claim] = {}
_LOADED = False

NOT_IMPLEMENTED_REASON = "not implemented yet (open issue)"


def implement(artifact_id: str, *, notebook: str) -> Implementation:
    """Register the notebook that regenerates `artifact_id` (idempotent)."""
    get_artifact(artifact_id)  # validates the id
    impl = Implementation(artifact_id, str(notebook))
    _IMPLEMENTATIONS[artifact_id] = impl
    _NOT_IMPLEMENTED.pop(artifact_id, None)
    return impl


def not_implemented(artifact_ids_: Iterable[str], reason: str = NOT_IMPLEMENTED_REASON) -> None:
    """Declare artifacts as not implemented yet (the report lists them with `reason`)."""
    for a in artifact_ids_:
        get_artifact(a)
        if a not in _IMPLEMENTATIONS:
            _NOT_IMPLEMENTED[a] = reason


def add_claims(claims: Iterable[Claim]) -> None:
    """Register paper claims (idempotent, keyed by claim id)."""
    for c in claims:
        for a in c.artifacts:
            get_artifact(a)
        c.artifacts = tuple(c.artifacts)
        _CLAIMS[c.id] = c


def load_papers() -> None:
    """Import every paper module that exists and register its tables (NOTEBOOKS, NOT_IMPLEMENTED,
    CLAIMS here; LAYOUTS, POOLS_BUILDERS in fedpaper.runs.experiment: see the module docstring)."""
    from fedpaper.runs.experiment import register_tables  # start-up time: torch (the CLI imports this package)

    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for paper in PAPERS:
        modname = f"fedpaper.papers.{paper}"
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as e:  # the module is not written yet; any other error shows
            if e.name != modname:
                raise
            continue
        register_tables(getattr(mod, "LAYOUTS", {}), getattr(mod, "POOLS_BUILDERS", {}))
        for artifact_id, notebook in getattr(mod, "NOTEBOOKS", {}).items():
            implement(artifact_id, notebook=notebook)
        for artifact_id, reason in getattr(mod, "NOT_IMPLEMENTED", {}).items():
            not_implemented([artifact_id], reason)
        add_claims(getattr(mod, "CLAIMS", ()))


def _notebook_metadata_index() -> dict[str, str]:
    """Artifacts named in the `fedpaper.outputs.artifacts` metadata of notebooks/<paper>/*.ipynb."""
    index: dict[str, str] = {}
    root = REPO_ROOT / "notebooks"
    for paper in PAPERS:
        for nb in sorted((root / paper).glob("*.ipynb")):
            try:
                meta = json.loads(nb.read_text(encoding="utf-8")).get("metadata", {})
            except (OSError, ValueError):
                continue
            ids = meta.get("fedpaper", {}).get("artifacts") or []
            if not ids and f"{paper}/{nb.stem}" in ARTIFACTS:
                ids = [f"{paper}/{nb.stem}"]
            for a in ids:
                index.setdefault(a, str(nb.relative_to(REPO_ROOT)))
    return index


def implementation(artifact_id: str) -> Optional[Implementation]:
    """The registered implementation, else one found from the notebooks folder, else None."""
    load_papers()
    get_artifact(artifact_id)
    if artifact_id in _IMPLEMENTATIONS:
        return _IMPLEMENTATIONS[artifact_id]
    nb = _notebook_metadata_index().get(artifact_id)
    return Implementation(artifact_id, nb) if nb else None


def artifact(artifact_id: str) -> Artifact:
    """The catalog entry with `notebook` filled in when implemented."""
    impl = implementation(artifact_id)
    art = get_artifact(artifact_id)
    return replace(art, notebook=impl.notebook) if impl else art


def all_artifacts(paper: str | None = None, ladders: bool = False) -> list[Artifact]:
    """The catalog entries with their notebooks; ladders=True adds the compute ladders."""
    load_papers()
    index = _notebook_metadata_index()
    out = []
    for a in artifact_ids(paper, ladders=ladders):
        impl = _IMPLEMENTATIONS.get(a)
        nb = impl.notebook if impl else index.get(a)
        art = get_artifact(a)
        out.append(replace(art, notebook=nb) if nb else art)
    return out


def not_implemented_reason(artifact_id: str) -> str:
    load_papers()
    return _NOT_IMPLEMENTED.get(artifact_id, NOT_IMPLEMENTED_REASON)


def claims(paper: str | None = None) -> list[Claim]:
    """Registered claims, in registration order."""
    load_papers()
    return [c for c in _CLAIMS.values() if paper is None or c.paper == paper]


def get_claim(claim_id: str) -> Claim:
    load_papers()
    try:
        return _CLAIMS[claim_id]
    except KeyError:

        raise UnknownNameError(unknown_message("claim", claim_id, _CLAIMS)) from None
