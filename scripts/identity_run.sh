#!/usr/bin/env bash
# Byte-identity check of a refactor (issue 33): regenerate one artifact function per paper at the quick
# and long profiles from one results cache, with the code of TREE, into OUT/<profile>/<paper>/.
#
#   1. at the old commit (a worktree OLD):   scripts/identity_run.sh OLD /tmp/id/before
#   2. with the new code (NEW):              FEDPAPER_CACHE=<cache> fedpaper cache rekey --verify 1
#      (retrains the cheapest run per paper and old code version, compares bit for bit, rekeys the rest)
#   3. at the new commit:                    scripts/identity_run.sh NEW /tmp/id/after
#   4. compare: for f in $(cd /tmp/id/before && find . -name '*.csv' -o -name '*.png'); do cmp /tmp/id/before/$f /tmp/id/after/$f; done
#
# Step 3 trains nothing when step 2 rekeyed everything (count <cache>/results/*/*.pkl before and after);
# FedNCA-ML's figures 3-7 keep their trained model in a cache of their own (papers/fednca/features.py),
# keyed by code version, so they retrain (seconds). Environment: FEDPAPER_CACHE (default
# /tmp/identity-cache), FEDPAPER_DATA, PROFILES (default "quick long"), ARTS (default below).
set -u
tree=$(cd "$1" && pwd); out=$2
export FEDPAPER_CACHE=${FEDPAPER_CACHE:-/tmp/identity-cache} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} FEDPAPER_PROGRESS=0
export PYTHONPATH="$tree"
py=${PYTHON:-python3}
for prof in ${PROFILES:-quick long}; do
  for art in ${ARTS:-fedpals/fig7 fednca/fig5 fedmt/estimation privlabels/bars}; do
    mkdir -p "$out/$prof"
    (cd "$tree" && /usr/bin/time -f "$prof $art %e s wall %U s user" "$py" benchmarks/gpu_artifact.py "$art" --profile "$prof" \
        --out-dir "$out/$prof" 2>&1 | tail -2)
  done
done
