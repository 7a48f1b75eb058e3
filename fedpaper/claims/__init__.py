"""What the paper packages share: the claims toolkit, and per-seed summaries of table cells.

Only reads results (not part of any paper's results-cache key: versions.CORE_MODULES does not name it).

The claims toolkit
==================
Every paper's claims module holds only its claims' logic; this package holds the rest, once.

Registration (``registry``)::

    from fedpaper.claims import ClaimSet, Verdict, cells, cell, beats, learning, chance_level

    CLAIMS = ClaimSet("fedpals")

    @CLAIMS.claim(9, ["table4"], "PACS: FedPALS accuracy falls as lambda grows.")
    def c9(t):                        # t: Tables; t["table4"] = our committed csv (DataFrame)
        lam = cells(t["table4"], "lambda", method="FedPALS", metric="accuracy_pct")
        return monotone(lam, -1, "FedPALS")

    # the paper's __init__.py exposes CLAIMS; fedpaper.outputs.registry.load_papers registers it (no import side effect)

  ``claim(n, artifacts, text, on_code=False)``: artifacts are names with or without "<paper>/";
  on_code marks a check of a formula or a data split (the report counts those apart).
  A check returns a ``Verdict`` (``Verdict.of(ok, detail)`` for exact properties).
  Missing data is handled by the framework: ``t[name]`` raises ``Missing`` for an absent
  artifact, ``one``/``cell``/``cells`` raise ``Missing`` when no row matches; the claim then
  answers NOT_CHECKABLE with the cause "data or weights absent". No ``_need``/``_get`` guards.
  ``t.each(names, fn, what)`` runs fn(DataFrame, name) -> Verdict per artifact, a missing one
  becoming a NOT_CHECKABLE part; ``name in t`` tests presence.

Verdicts (``verdicts``): PASS "pass", WITHIN_NOISE "within noise", FAIL "fail", PARTIAL
  "partial", NOT_TESTABLE "not testable", NOT_CHECKABLE "not checkable" (VERDICTS).
  ``Verdict(verdict, detail, causes)``; ``Verdict.of(ok, detail)`` for exact properties;
  ``v.note(text)`` appends to the detail. ``all_of([(label, Verdict), ...], what)`` combines the
  parts of an "in every row" claim: FAIL > WITHIN_NOISE > PASS if all pass > PARTIAL if some
  pass and the others are not testable/checkable > NOT_TESTABLE > NOT_CHECKABLE; it keeps the
  causes of the parts that decide the verdict. ``most(parts, what)`` is the verdict of a claim
  about "most" of the parts (a majority of the testable ones pass). ``negate(v)`` is the verdict of the opposite
  claim ("a does not beat b"): PASS and FAIL swap, within noise stays within noise.

Rows by key (``rows``), never by position: ``select(t, **key)`` (a key value may be a list of
  accepted values), ``one(t, **key)`` (exactly one row), ``cell(t, value="mean", **key)`` -> Cell,
  ``cells(t, by, value="mean", **key)`` -> {x: Cell} sorted by x (numerically), ``values(t, col,
  **key)`` sorted distinct values. Keys compare in normal form (``norm``: 10 == 10.0 == "10").
  ``Cell(mean, std, n, seeds)`` holds the per-seed values in seed order (the per_seed column);
  ``Cell.scaled(k)`` rescales (privlabels: fractions -> percent).

At chance (``chance``), one rule for all papers: CHANCE_RULE (printed once in REPORT.md),
  CHANCE_MARGIN points. Scores in percent. ``chance_level(label_split, num_classes)`` -> the
  one-class score or None; ``at_chance({name: Cell}, chance)`` -> names at chance;
  ``learning(cells, chance, subjects, others)`` -> (kept cells, NOT_TESTABLE Verdict or None,
  note on the others left out); ``contest(cells, chance, winners, losers)`` -> the same for a claim
  that names a winner (CONTEST_RULE: only the winners must learn; a loser at chance stays in the
  comparison, as evidence for the claim); ``chance_cause`` builds the "models at chance" cause.

Noise (``noise``), one rule for all papers: NOISE_RULE (printed once in REPORT.md).
  ``diff(a, b)`` -> Diff (paired per-seed differences, mean, SE); ``beats(a, b, names)``,
  ``exceeds(a, b, margin, what)``, ``near(a, b, tol, what)`` -> PASS / FAIL / WITHIN_NOISE (with
  the cause "within seed noise"); ``not_below(a, b, names)`` ("a is at least b": an exact tie
  without seed noise passes); ``stated(d, value, what)`` (a difference the paper states, within
  STATED_TOL or STATED_REL of it); ``best(cells, winner)``; ``monotone({x: Cell}, +1/-1, name)``;
  ``minus(a, b)`` -> the Cell of a - b (per seed when paired); ``const(x)`` turns a threshold or
  a paper's number into a noiseless Cell. A "within seed noise" cause holds ``seeds``, how many
  seeds would decide it (``seeds_to_decide``: the rule solved for n, if the mean difference and its
  seed spread held); every Verdict of a comparison holds ``decides``, its one deciding number
  ("a - b +d ± k SE vs bar"; all_of and most take the deciding part's).

Causes (``verdicts.CAUSES``, one fixed vocabulary): models at chance; within seed noise;
  compute-limited / not compute-limited (only once a compute ladder exists); untested at this
  scale; a setting differs from the paper's; the paper's own numbers contradict the claim; data
  or weights absent; ours disagree at the paper's setting. ``Cause(kind, evidence)``: the
  evidence is formatted from the data; a Cause(...) call's string literals may hold no digit
  (tests/papers/test_claims_toolkit.py scans them). Checks attach the causes they see (chance, noise,
  absent); ``causes.diagnose(claim, verdict, provenance, reported, missing_datasets)`` adds the
  report-time ones for a FAIL or within-noise verdict (see causes.py for the order).

The paper's own numbers (hook for "the paper's own numbers contradict the claim"):
  ``causes.reported_tables(artifact_ids)`` -> {artifact id: the paper's reported csv} (the
  packaged fedpaper/claims/reported/*.csv, same schema as ours: mean, std, n_seeds, no per_seed);
  ``causes.on_reported(claim, tables)`` runs the claim's own check on such tables and returns its
  Verdict (None when the paper has no numbers for it). Without per_seed the noise rule is the
  unpaired one (SE from std and n_seeds). A test converter may add a per_seed column synthesised
  from mean and std (then the paired rule applies); the report uses the packaged tables as they
  are (no converter in the package).

Compute-ladder trends (``scaling``): ``fit(compute, per_seed)`` -> Fit (slope per
  decade of compute and its SE, paired by seed or OLS on seed means), ``classify(fit, direction)``
  -> narrowing / flat / widening (one-sided 90% bound, ``noise.t_quantile``) or "too few rungs",
  ``projection`` (clear trends on >= 3 rungs only), ``ladder_rows`` / ``read_trends`` (the
  ``<paper>/scaling`` csv); ``causes.ladder_trends`` / ``ladder_cause`` turn them into the
  "compute-limited" / "not compute-limited" causes.
"""
from fedpaper.claims.chance import (  # noqa: F401
    CHANCE_MARGIN,
    CHANCE_RULE,
    CONTEST_RULE,
    at_chance,
    chance_cause,
    chance_level,
    contest,
    learning,
)
from fedpaper.claims.noise import (  # noqa: F401
    NOISE_RULE,
    STATED_REL,
    STATED_TOL,
    Diff,
    beats,
    best,
    const,
    diff,
    exceeds,
    minus,
    monotone,
    near,
    not_below,
    seeds_to_decide,
    stated,
)
from fedpaper.claims.registry import ClaimSet, Tables, absent, as_verdict, check_claims, guarded  # noqa: F401
from fedpaper.claims.rows import Cell, Missing, cell, cell_of, cells, norm, one, parse_per_seed, select, values  # noqa: F401
from fedpaper.claims.verdicts import (  # noqa: F401
    ABSENT,
    AT_CHANCE,
    AT_PAPER_SETTING,
    CAUSES,
    COMPUTE_LIMITED,
    FAIL,
    NOISE,
    NOT_CHECKABLE,
    NOT_COMPUTE_LIMITED,
    NOT_TESTABLE,
    PAPER_CONTRADICTS,
    PARTIAL,
    PASS,
    SETTING_DIFFERS,
    UNTESTED_AT_SCALE,
    VERDICTS,
    WITHIN_NOISE,
    Cause,
    Verdict,
    all_of,
    most,
    negate,
    seeds_text,
)
