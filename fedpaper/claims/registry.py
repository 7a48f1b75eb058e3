"""One registration style for every paper's claims, and the framework that runs a check.

    CLAIMS = ClaimSet("fedpals")

    @CLAIMS.claim(9, ["table4"], "PACS: FedPALS accuracy decreases as lambda grows.")
    def c9(t):                       # t: Tables; t["table4"] is our committed csv as a DataFrame
        ...
        return Verdict(...)          # Verdict.of(ok, detail) for exact properties

    # the paper's __init__.py exposes CLAIMS, a table fedpaper.outputs.registry.load_papers registers

Missing artifacts and rows are handled here, once: `t[name]` raises Missing when the artifact is
absent (or has no rows), rows.one/cells raise Missing when a key matches nothing, and the
framework returns NOT_CHECKABLE with the cause "data or weights absent". `t.each(names, fn)` runs
fn per artifact for claims whose parts are separate artifacts, a missing one becoming a
NOT_CHECKABLE part (see verdicts.all_of)."""
from __future__ import annotations

from typing import Callable, Iterable

import pandas as pd

from fedpaper.claims.catalog import Claim

from fedpaper.claims.rows import Missing
from fedpaper.claims.verdicts import ABSENT, NOT_CHECKABLE, Cause, Verdict, all_of


class Tables:
    """{artifact id: DataFrame} as handed to a check; names may omit the "<paper>/" prefix."""

    def __init__(self, tables: dict, paper: str):
        self._t = {k: v for k, v in tables.items() if v is not None and len(v)}
        self.paper = paper

    def _id(self, name: str) -> str:
        return name if "/" in name else f"{self.paper}/{name}"

    def __getitem__(self, name: str) -> pd.DataFrame:
        aid = self._id(name)
        if aid not in self._t:
            raise Missing(f"{aid} has no committed results")
        return self._t[aid]

    def __contains__(self, name: str) -> bool:
        return self._id(name) in self._t

    def each(self, names: Iterable[str], fn: Callable, what: str = "") -> Verdict:
        """all_of over the artifacts `names`: fn(DataFrame, name) -> Verdict per artifact; a missing
        artifact (or row) is a NOT_CHECKABLE part."""
        parts = []
        for n in names:
            parts.append((n, guarded(lambda: fn(self[n], n))))
        return all_of(parts, what)


def absent(what: str) -> Verdict:
    """NOT_CHECKABLE with the cause "data or weights absent"."""
    return Verdict(NOT_CHECKABLE, f"not checkable: {what}", (Cause(ABSENT, what),))


def as_verdict(out) -> Verdict:
    """A check's return value, which must be a Verdict (Verdict.of(ok, detail) for an exact
    property)."""
    if not isinstance(out, Verdict):
        raise TypeError(f"a claim check returned {type(out).__name__}; return a Verdict "
                        "(Verdict.of(ok, detail) for an exact property)")
    return out


def guarded(fn: Callable[[], object]) -> Verdict:
    """Run fn(); Missing becomes absent(...)."""
    try:
        return as_verdict(fn())
    except Missing as e:
        return absent(e.what)


class ClaimSet:
    """The claims of one paper, registered with :meth:`claim` and handed to fedpaper.papers by
    :meth:`register`. Claim ids are "<paper>/claim-<n>"."""

    def __init__(self, paper: str):
        self.paper = paper
        self.rows: list = []

    def claim(self, n: int, artifacts: Iterable[str], text: str, on_code: bool = False):
        """Decorator: fn(t: Tables) -> Verdict is the check of claim n; `artifacts` are names
        (with or without "<paper>/"), `on_code` marks a check of a formula or a data split."""
        def deco(fn):
            self.rows.append((n, tuple(artifacts), text, fn, on_code))
            return fn
        return deco

    def check_of(self, fn: Callable, on_code: bool) -> Callable:
        paper = self.paper

        def check(tables: dict) -> Verdict:
            return guarded(lambda: fn(Tables(tables, paper)))
        check.__name__ = getattr(fn, "__name__", "check")
        check.on_code = on_code
        return check

    def claims(self) -> list:
        out = []
        for n, arts, text, fn, on_code in sorted(self.rows, key=lambda r: r[0]):
            ids = tuple(a if "/" in a else f"{self.paper}/{a}" for a in arts)
            out.append(Claim(f"{self.paper}/claim-{n}", text, artifacts=ids, check=self.check_of(fn, on_code)))
        return out

    def __iter__(self):
        """The Claims (fedpaper.outputs.registry.load_papers registers a paper's CLAIMS through add_claims)."""
        return iter(self.claims())


def check_claims(claims, tables: dict) -> list[dict]:
    """Run every claim's check on our tables: [{id, text, artifacts, verdict, detail, causes,
    decides, on_code}], verdict in VERDICTS; decides: the number that decides it (Verdict.decides); causes: those the check found (see diagnose_claims for the
    report-time ones); on_code: the check tests a formula or a data split, no trained model."""
    out = []
    for c in claims:
        avail = {a: tables[a] for a in c.artifacts if a in tables and tables[a] is not None}
        if c.check is None:
            v = Verdict("not checkable", "check not implemented yet")
        elif c.artifacts and not avail:
            v = Verdict("not checkable", "no committed results for " + ", ".join(c.artifacts))
        else:
            try:
                v = as_verdict(c.check(avail))
            except Exception as e:  # a broken check must not break the report
                v = Verdict("not checkable", f"check raised {type(e).__name__}: {e}")
        out.append({"id": c.id, "text": c.text, "artifacts": list(c.artifacts), "verdict": v.verdict,
                    "detail": str(v.detail).replace("\n", " "), "causes": list(v.causes), "decides": v.decides,
                    "on_code": bool(getattr(c.check, "on_code", False)), "claim": c})
    return out
