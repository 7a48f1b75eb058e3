"""Verdicts, causes, and how row verdicts combine (see the package docstring for the API).

A check returns a :class:`Verdict`: one of VERDICTS, a one-line detail with the numbers behind it,
and, for any verdict other than pass, the causes found by code (:class:`Cause`, a kind from the
fixed vocabulary CAUSES and its evidence, formatted from the data at report time)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Optional

PASS = "pass"
WITHIN_NOISE = "within noise"
FAIL = "fail"
PARTIAL = "partial"
NOT_TESTABLE = "not testable"
NOT_CHECKABLE = "not checkable"
VERDICTS = (PASS, WITHIN_NOISE, FAIL, PARTIAL, NOT_TESTABLE, NOT_CHECKABLE)

# The one vocabulary of causes. A cause's evidence is built from the data; its source text may hold
# no digit (tests/papers/test_claims_toolkit.py scans every Cause(...) call and the diagnoses modules).
AT_CHANCE = "models at chance"
NOISE = "within seed noise"
COMPUTE_LIMITED = "compute-limited"
NOT_COMPUTE_LIMITED = "not compute-limited"
UNTESTED_AT_SCALE = "untested at this scale"
SETTING_DIFFERS = "a setting differs from the paper's"
PAPER_CONTRADICTS = "the paper's own numbers contradict the claim"
ABSENT = "data or weights absent"
AT_PAPER_SETTING = "ours disagree at the paper's setting"
CAUSES = (AT_CHANCE, NOISE, COMPUTE_LIMITED, NOT_COMPUTE_LIMITED, UNTESTED_AT_SCALE, SETTING_DIFFERS,
          PAPER_CONTRADICTS, ABSENT, AT_PAPER_SETTING)


def seeds_text(n, n_now: int = 0) -> str:
    """What the seed count `n` that would decide a comparison within noise (noise.seeds_to_decide)
    tells a reader: 'n seeds would decide it', or why more seeds would not."""
    if n is None:
        return "no number of seeds would decide it: the mean difference sits on the bar"
    if n_now and n <= n_now:
        return f"the bound is met at {n_now} seeds; the seeds split on the side of the bar"
    return f"{n} seeds would decide it"


@dataclass(frozen=True)
class Cause:
    """Why a verdict is not a pass: `kind` from CAUSES, `evidence` the numbers read from the data.
    A "within seed noise" cause of a comparison also holds `seeds`, how many seeds would decide it
    if its mean difference and seed spread held (noise.seeds_to_decide; -1: none would), and
    `n_now`, the seeds it had; `brief`: the deciding numbers in a few words."""

    kind: str
    evidence: str = ""
    seeds: Optional[int] = field(default=None, compare=False)
    n_now: int = field(default=0, compare=False)
    brief: str = field(default="", compare=False)

    def __post_init__(self):
        if self.kind not in CAUSES:
            raise ValueError(f"unknown cause {self.kind!r}; use one of {', '.join(CAUSES)}")

    @property
    def seeds_note(self) -> str:
        """seeds_text of this cause ('' when it holds no seed count)."""
        if self.seeds is None:
            return ""
        return seeds_text(None if self.seeds < 0 else self.seeds, self.n_now)

    def __str__(self) -> str:
        note = f" ({self.seeds_note})" if self.seeds_note else ""
        return (f"{self.kind}: {self.evidence}" if self.evidence else self.kind) + note


@dataclass
class Verdict:
    """A check's answer. `verdict` in VERDICTS; `causes` explain a non-pass (found by code);
    `decides`: the one number that decides it, in a few words (a comparison's difference, its bound
    and its bar; all_of and most take the deciding part's), '' where the check names none."""

    verdict: str
    detail: str = ""
    causes: tuple = field(default_factory=tuple)
    decides: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"unknown verdict {self.verdict!r}; use one of {', '.join(VERDICTS)}")
        self.causes = tuple(self.causes)

    @classmethod
    def of(cls, ok: bool, detail: str, causes: Iterable[Cause] = ()) -> "Verdict":
        """PASS if `ok` else FAIL (for exact properties: a formula, a count, an ordering of non-noisy
        values)."""
        return cls(PASS if ok else FAIL, detail, tuple(causes) if not ok else ())

    @property
    def passed(self) -> bool:
        return self.verdict == PASS

    def note(self, text: str) -> "Verdict":
        """The same verdict with `text` appended to the detail."""
        return Verdict(self.verdict, f"{self.detail}{text}", self.causes, self.decides)


def _unique(causes: Iterable[Cause]) -> tuple:
    return tuple(dict.fromkeys(causes))


def all_of(parts: list, what: str = "") -> Verdict:
    """Combine labelled parts [(label, Verdict)] of a claim that must hold in every part:
    FAIL if a part fails; else WITHIN_NOISE if a part is within noise; else PARTIAL if some parts
    pass and others are not testable or not checkable ("k of n parts hold"); PASS if all pass;
    NOT_TESTABLE / NOT_CHECKABLE if no part could be tested. The causes of the parts are kept."""
    vs = [v.verdict for _, v in parts]
    n = len(parts)
    held = vs.count(PASS)
    counts = f"{held} of {n} hold"
    for v, label in ((WITHIN_NOISE, "within noise"), (FAIL, "fail"), (PARTIAL, "partial"),
                     (NOT_TESTABLE, "not testable (models at chance)"), (NOT_CHECKABLE, "not checkable")):
        if v in vs:
            counts += f", {vs.count(v)} {label}"
    marks = {v: f" ({v.upper() if v == FAIL else v})" for v in VERDICTS if v != PASS}
    body = "; ".join(f"{lab}{marks.get(v.verdict, '')}: {v.detail}" for lab, v in parts)
    if FAIL in vs:
        verdict = FAIL
    elif WITHIN_NOISE in vs:
        verdict = WITHIN_NOISE
    elif held == n and n:
        verdict = PASS
    elif held or PARTIAL in vs:
        verdict = PARTIAL
    elif NOT_TESTABLE in vs:
        verdict = NOT_TESTABLE
    else:
        verdict = NOT_CHECKABLE
    # the causes of the parts that decide the verdict (a FAIL is explained by its failing parts)
    deciding = {FAIL: (FAIL,), WITHIN_NOISE: (WITHIN_NOISE,)}.get(verdict, tuple(x for x in VERDICTS if x != PASS))
    causes = _unique(c for _, v in parts if v.verdict in deciding for c in v.causes)
    head = f"{what}: {counts}." if what else f"{counts}."
    return Verdict(verdict, f"{head} {body}", () if verdict == PASS else causes, _deciding(parts, verdict))


def _seeds_needed(v: Verdict) -> float:
    """The most seeds a within-noise cause of `v` needs to be decided (inf: none would; 0: no count)."""
    counts = [c.seeds for c in v.causes if c.seeds is not None]
    return math.inf if any(n < 0 for n in counts) else max(counts, default=0)


def _deciding(parts: list, verdict: str) -> str:
    """'label: decides' of the first part whose verdict is `verdict` (within noise: the one that needs
    the most seeds to be decided; any part not passing for a partial, not testable or not checkable
    verdict; the first part for a pass), '' if none says."""
    want = (verdict,) if verdict in (PASS, FAIL, WITHIN_NOISE) else tuple(x for x in VERDICTS if x != PASS)
    if verdict == WITHIN_NOISE:  # the part that needs the most seeds to be decided (none would: first)
        parts = sorted(parts, key=lambda p: -_seeds_needed(p[1]))
    for lab, v in parts:
        if v.verdict in want:
            text = v.decides or (v.causes[0].brief or v.causes[0].evidence if v.causes else "")
            return f"{lab}: {text}" if text and lab else text
    return ""


def most(parts: list, what: str = "") -> Verdict:
    """A claim about "most" of the labelled parts [(label, Verdict)]: PASS when the parts that pass
    are a majority of the testable ones (pass, fail or within noise), FAIL when they cannot be even
    if every part within noise passed, within noise otherwise; parts not testable or not checkable
    are left out (PARTIAL instead of PASS when there are such parts)."""
    testable = [(lab, v) for lab, v in parts if v.verdict in (PASS, FAIL, WITHIN_NOISE)]
    wins = sum(v.verdict == PASS for _, v in testable)
    maybe = sum(v.verdict == WITHIN_NOISE for _, v in testable)
    n = len(testable)
    every = all_of(parts, what)
    if not n:
        return every
    head = f"{wins} of {n} testable parts hold ({maybe} within noise)"
    if 2 * wins > n:
        return Verdict(PARTIAL if n < len(parts) else PASS, f"{head}; {every.detail}", (), head)
    if 2 * (wins + maybe) <= n:
        return Verdict(FAIL, f"{head}; {every.detail}", (), head)
    return Verdict(WITHIN_NOISE, f"{head}; {every.detail}", _unique(c for _, v in testable for c in v.causes), head)


def negate(v: Verdict, detail: str = "") -> Verdict:
    """The verdict of the opposite claim ("a does not beat b" from "a beats b"): PASS and FAIL swap,
    every other verdict (within noise, not testable, ...) stays with its causes."""
    flipped = {PASS: FAIL, FAIL: PASS}.get(v.verdict, v.verdict)
    causes = v.causes if flipped != PASS else ()
    return Verdict(flipped, detail or v.detail, causes, v.decides)
