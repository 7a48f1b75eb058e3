"""Why a FedNCA-ML claim FAILs on our committed results: one line per claim, "<cause>: <evidence>"
with cause "scale", "data copy" or "real disagreement" (catalog.FAIL_CAUSES on main, issue 14),
printed by the report next to a FAIL verdict only. Written from the long profile's numbers; a
diagnosis is a reading of those numbers, not a result: rerun at the paper profile to settle it."""

FAIL_CAUSES = ("scale", "data copy", "real disagreement")

WHY_FAILS: dict[int, str] = {}
