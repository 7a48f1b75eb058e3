#!/usr/bin/env bash
# Issue 12's four one-line breakages (and issue 31's two BatchNorm ones), each applied to the module
# that now holds the mechanism and then restored with git checkout; prints the tests that fail for
# each (every one must list some). Usage, from a checkout without local changes to those modules:
#   PYTHON=.venv/bin/python bash tests/reference/check_breakages.sh
set -u
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python}
run() {  # run TITLE FILE OLD NEW
  echo "=== $1 ($2)"
  python3 - "$2" "$3" "$4" <<'PY'
import sys
p, old, new = sys.argv[1:4]
s = open(p).read()
assert s.count(old) == 1, (p, old)
open(p, "w").write(s.replace(old, new))
PY
  PYTHONPATH=$PWD nice -n 5 "$PY" -m pytest tests/reference -q -p no:cacheprovider 2>&1 | grep -E "^FAILED|passed|failed" | sed 's/ - .*//'
  git checkout -q -- "$2"
}
run "private rows averaged over all clients" fedpaper/algorithms/privlabels.py \
  "wy = n[:, None] * present  # [G, K]" "wy = n[:, None] * torch.ones_like(present)"
run "FedPALS finite lambda uses FedAvg weights" fedpaper/algorithms/fedpals.py \
  "ctx.feds[r].target_marginal, self.lam)" "ctx.feds[r].target_marginal, float('inf'))"
run "central tuning is a no-op" fedpaper/algorithms/tuning.py \
  "    for _ in range(spec.epochs):" "    for _ in range(0):"
run "BatchNorm statistics from the first client" fedpaper/engine/trainer.py \
  "            if v.is_floating_point():" "            if False:"
run "BatchNorm statistics over padding rows" fedpaper/engine/backends.py \
  "real_rows(input_keep(batch, g) if self.batchnorm else None)" "real_rows(None)"
run "BatchNorm statistics of a finished client updated" fedpaper/engine/backends.py \
  "                and not bool(active[g]) else None" "                and False else None"
