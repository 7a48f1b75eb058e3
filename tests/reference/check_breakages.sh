#!/usr/bin/env bash
# The four one-line breakages of issue 12, each applied to fedpaper/algorithms/server.py in turn and
# then restored with git checkout; prints the tests that fail for each (every one must list some).
# Usage, from a checkout without local changes to server.py:
#   PYTHON=.venv/bin/python bash tests/reference/check_breakages.sh
set -u
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python}
F=fedpaper/algorithms/server.py
run() {
  echo "=== $1"
  python3 - "$2" "$3" <<'PY'
import sys
old, new = sys.argv[1], sys.argv[2]
p = "fedpaper/algorithms/server.py"
s = open(p).read()
assert s.count(old) == 1, old
open(p, "w").write(s.replace(old, new))
PY
  PYTHONPATH=$PWD nice -n 5 "$PY" -m pytest tests/reference -q -p no:cacheprovider 2>&1 | grep -E "^FAILED|passed|failed" | sed 's/ - .*//'
  git checkout -q -- $F
}
run "private rows averaged over all clients" "    if tr.method.private:
        glob = _private_rows(tr, new, slots, glob)" "    if False:
        glob = _private_rows(tr, new, slots, glob)"
run "FedPALS finite lambda uses FedAvg weights" 'if m.server == "fedavg" or m.private:' 'if m.server in ("fedavg", "fedpals") or m.private:'
run "central tuning is a no-op" "    for _ in range(m.tuning_epochs):" "    for _ in range(0):"
run "BatchNorm statistics from the first client" "        if v.is_floating_point():" "        if False:"
