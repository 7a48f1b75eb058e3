"""Claim registration shared by the paper packages."""
from __future__ import annotations

from fedpaper.papers import Claim, add_claims, artifact_ids, not_implemented


def register_unchecked(paper: str, rows) -> None:
    """A paper not implemented yet: every artifact is declared not implemented and every claim
    (claim id, artifacts, statement) is registered without a check, so the report lists them."""
    not_implemented(artifact_ids(paper))
    add_claims(Claim(cid, text, artifacts=tuple(arts), check=None) for cid, arts, text in rows)
