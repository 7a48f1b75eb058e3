"""The one at-chance rule of every paper's checks (CHANCE_RULE, printed once in REPORT.md).

Scores are in percent (privlabels' fractions are scaled by 100 first; an AUC's chance is 50).
A comparison whose models sit at chance says nothing about a claim: `learning` turns it into
NOT_TESTABLE with the cause "models at chance" and the scores behind it. A claim that names a
winner ("a beats b", "b is well below a") needs only its winner to learn: `contest` keeps a loser
at chance in the comparison, since a loser that learns nothing while the winner learns is what the
claim says (CONTEST_RULE)."""
from __future__ import annotations

import math
from typing import Optional

from fedpaper.claims.rows import Cell
from fedpaper.claims.verdicts import AT_CHANCE, NOT_TESTABLE, Cause, Verdict

CHANCE_MARGIN = 2.0  # points (percent) above the one-class score still counted as chance

CHANCE_RULE = (
    f"a model is at chance when a majority of its seeds are; a seed is at chance when its score is at "
    f"most {CHANCE_MARGIN:g} points above the one-class score (100/C % on a target uniform over its C "
    f"labels, 100/K % on a balanced K-class test set, 50 for an AUC; unknown on Dirichlet targets), or "
    f"at most {CHANCE_MARGIN:g} points above zero (it predicts classes the target lacks), or when it "
    "equals, to two decimals, the score of two or more other methods on the same seed and lies below "
    "the best score of that seed (degenerate models that predict the same few classes score the same "
    "share; models that agree on the best score, a 100% score included, are never at chance); "
    "without per-seed values the mean is tested the same way (no shared-score test)")


CONTEST_RULE = (
    "in a claim that names a winner (\"a beats b\", \"b is well below a\", \"a is the best\") the claimed "
    "winner must be above chance, else the claim is not testable; a loser at chance stays in the comparison "
    "as evidence for the claim (a model that learns nothing while the winner learns is what the claim says), "
    "so whether a loser counts as at chance never changes the verdict")


def chance_level(label_split: Optional[str] = None, num_classes: Optional[int] = None) -> Optional[float]:
    """The one-class score (%): 100/C for a sparsity target "C=k", 100/K for a balanced K-class
    test set, None when unknown (Dirichlet targets "beta=...")."""
    if label_split is not None and str(label_split).startswith("C="):
        return 100.0 / float(str(label_split)[2:])
    if num_classes:
        return 100.0 / num_classes
    return None


def _low(v: float, chance: Optional[float]) -> bool:
    return v <= CHANCE_MARGIN or (chance is not None and v <= chance + CHANCE_MARGIN)


def at_chance(cells: dict, chance: Optional[float]) -> list:
    """Names (in the order given) of the models at chance among `cells` {name: Cell}, all scored on
    the same test set (the shared-score test compares them seed by seed)."""
    n = max((len(c.seeds) for c in cells.values()), default=0)
    shared = []
    for s in range(n):
        vals = [round(c.seeds[s], 2) for c in cells.values() if len(c.seeds) > s and not math.isnan(c.seeds[s])]
        best = max(vals, default=math.inf)
        shared.append({x for x in vals if vals.count(x) >= 3 and x < best})
    out = []
    for name, c in cells.items():
        seeds = [v for v in c.seeds if not math.isnan(v)]
        if not seeds:
            if _low(c.mean, chance):
                out.append(name)
            continue
        hits = sum(_low(v, chance) or round(v, 2) in shared[i] for i, v in enumerate(c.seeds) if not math.isnan(v))
        if 2 * hits > len(seeds):
            out.append(name)
    return out


def chance_cause(names: list, cells: dict, chance: Optional[float], where: str = "") -> Cause:
    """The cause "models at chance" with each model's seeds (or mean) and the chance level."""
    def show(c: Cell) -> str:
        return "/".join(f"{v:.1f}" for v in c.seeds) if c.seeds else f"mean {c.mean:.1f}"
    lvl = (f"one-class score {chance:.1f}, margin {CHANCE_MARGIN:g}" if chance is not None
           else "one-class score unknown: scores shared on a seed")
    at = f" {where}" if where else ""
    return Cause(AT_CHANCE, ", ".join(f"{m} {show(cells[m])}" for m in names) + f"{at} ({lvl})")


def learning(cells: dict, chance: Optional[float], subjects, others=(), where: str = ""):
    """(kept, verdict, note) for a comparison of `subjects` with `others` on one test set: `verdict`
    is NOT_TESTABLE (cause "models at chance") when a subject is at chance or every other model is,
    else None; `kept` maps the subjects and the learning others to their Cells; `note` names the
    others left out at chance ('' if none)."""
    low = at_chance(cells, chance)
    subj = [m for m in subjects if m in cells]
    others = [m for m in others if m in cells]
    bad = [m for m in subj if m in low]
    if not bad and others and all(m in low for m in others):
        bad = others
    if bad:
        cause = chance_cause(bad, cells, chance, where)
        return None, Verdict(NOT_TESTABLE, cause.evidence, (cause,)), ""
    dropped = [m for m in others if m in low]
    kept = {m: cells[m] for m in subj + [m for m in others if m not in low]}
    note = f" [left out at chance: {chance_cause(dropped, cells, chance).evidence}]" if dropped else ""
    return kept, None, note


def contest(cells: dict, chance: Optional[float], winners, losers, where: str = ""):
    """(kept, verdict, note) for a claim that `winners` beat (or lie above) `losers` on one test set
    (CONTEST_RULE): `verdict` is NOT_TESTABLE (cause "models at chance") when a claimed winner is at
    chance, else None; `kept` maps the winners and every loser to their Cells, the losers at chance
    included (evidence for the claim, named in `note`; '' if none)."""
    low = at_chance(cells, chance)
    win = [m for m in winners if m in cells]
    lose = [m for m in losers if m in cells and m not in win]
    bad = [m for m in win if m in low]
    if bad:
        cause = chance_cause(bad, cells, chance, where)
        return None, Verdict(NOT_TESTABLE, "claimed winner at chance: " + cause.evidence, (cause,)), ""
    at = [m for m in lose if m in low]
    kept = {m: cells[m] for m in win + lose}
    note = (f" [losers at chance, kept as evidence for the claim: {chance_cause(at, cells, chance).evidence}]"
            if at else "")
    return kept, None, note
