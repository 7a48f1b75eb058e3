#!/usr/bin/env bash
# One GPU window's work as ONE prepared command on the device machine (python3 with torch preinstalled,
# no registry; the project runs from this source tree), at most BUDGET seconds (default 300):
#   1. benchmarks/gpu_ceiling.py, first, while nothing else uses the GPU: per paper-profile model the
#      engine at the paper profile's runs per engine call, a plain per-client loop, the large-batch
#      ceiling and vmap+CUDA graph; its engine rates written into a copy of benchmarks/results/gpu.json
#      ($OUT/gpu.json, what `fedpaper plan` reads: commit it over the old one with the table);
#   2. the `gpu` tests (tests/test_gpu.py), against a CIFAR-10 subset made there from the full copy;
#   3. for the rest of the window, one artifact at the paper profile (ARTIFACT, OVERRIDES; default
#      FedNCA-ML Table 1, the cheapest that `fedpaper plan --profile paper` orders next), resumed from
#      its archive if the repository has one (IMPORT), stopped cleanly before a run that would not end
#      in time (FEDPAPER_DEADLINE: the sweep stops between engine calls), then every finished run of it
#      exported to $OUT (`fedpaper cache export`) to commit under archives/ (IMPORT's path) and resume
#      from in the next window.
# Everything it writes is under $OUT (at most 8 files come back): session.log, gpu_ceiling.md,
# gpu_ceiling.json, gpu.json, gpu_tests.log, the artifact's archive and its rendered outputs.
#
# The CIFAR-10 copy (62 MB) does not travel in one call with the repository (64 MiB in all), so it goes
# in parts to the same warm machine first. Here, once (splits the zip by the room the working tree
# leaves, and says the calls):
#     bash benchmarks/gpu_session.sh prepare
# Then, through the device tool, each call within the 30 s the machine stays warm after the one before
# (three parts while the working tree is about 34 MB; `prepare` prints the list for the tree at hand):
#     run(command="mkdir -p /root/stage && cp .gpudata/c10-1/part.* /root/stage/", carry=[".gpudata/c10-1"], timeout_s=60)
#     run(command="mkdir -p /root/stage && cp .gpudata/c10-2/part.* /root/stage/", carry=[".gpudata/c10-2"], timeout_s=60)
#     run(command="BUDGET=300 bash benchmarks/gpu_session.sh", carry=[".gpudata/c10-3"], timeout_s=360)
# Without the data (a fresh machine, parts missing or not matching CIFAR10_SHA256) steps 1 and 2 still
# run: the CIFAR-10 test skips and step 3 is skipped. The files come back under the call's files_at.
#
# A dry path on the CPU (plumbing only, no result): DEVICE=cpu TINY=1 BUDGET=120 PY=.venv/bin/python \
#     OUT=/tmp/gpu-out bash benchmarks/gpu_session.sh
# (gpu_ceiling.py --tiny, the gpu tests skip, the artifact at the smoke profile on synthetic stand-ins).
set -u
CIFAR10_SHA256=ce962c3636592f547756899545a76d9da96b647fe7452affc10474e033f56311  # the offline copy's zip
ZIP_NAME=cifar10/cifar10-jpeg.zip

if [ "${1:-}" = "prepare" ]; then
  # here: the zip in parts that each travel beside the working tree, under .gpudata/ (ignored locally)
  SRC=${SRC:-../shared/data/$ZIP_NAME}
  grep -qx "/.gpudata/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo "/.gpudata/" >> .git/info/exclude; }
  tree=$( { git ls-files -z; git ls-files -z -o --exclude-standard; } | xargs -0 du -cb 2>/dev/null | awk '/total$/ {s += $1} END {print s + 0}')
  room=$(( 64 * 1024 * 1024 - tree - 3 * 1024 * 1024 ))  # 3 MiB of slack for files added before the call
  size=$(stat -c %s "$SRC")
  [ "$room" -gt 1000000 ] || { echo "the working tree ($tree bytes) leaves no room for a part"; exit 2; }
  n=$(( (size + room - 1) / room )); part=$(( (size + n - 1) / n ))
  rm -rf .gpudata/c10-*; i=1
  while [ $(( (i - 1) * part )) -lt "$size" ]; do
    mkdir -p .gpudata/c10-$i
    tail -c +$(( (i - 1) * part + 1 )) "$SRC" | head -c "$part" > .gpudata/c10-$i/part.$i
    i=$((i + 1))
  done
  n=$((i - 1))
  [ "$(cat .gpudata/c10-*/part.* | sha256sum | cut -d' ' -f1)" = "$CIFAR10_SHA256" ] || { echo "parts do not add up to $SRC"; exit 1; }
  echo "working tree $tree bytes; $SRC in $n part(s) of <= $part bytes under .gpudata/; the calls:"
  for j in $(seq 1 $((n - 1))); do
    echo "  run(command=\"mkdir -p /root/stage && cp .gpudata/c10-$j/part.* /root/stage/\", carry=[\".gpudata/c10-$j\"], timeout_s=60)"
  done
  echo "  run(command=\"BUDGET=300 bash benchmarks/gpu_session.sh\", carry=[\".gpudata/c10-$n\"], timeout_s=360)"
  exit 0
fi

OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/session.log") 2>&1
T0=$(date +%s)
BUDGET=${BUDGET:-300}
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
PY=${PY:-python3}
TINY=${TINY:-0}
DEVICE=${DEVICE:-cuda}
export PYTHONUNBUFFERED=1 FEDPAPER_CACHE=${FEDPAPER_CACHE:-/tmp/fpcache} FEDPAPER_PROGRESS=0 MPLBACKEND=Agg
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
if [ "$DEVICE" = cpu ]; then export CUDA_VISIBLE_DEVICES="" FEDPAPER_DEVICE=cpu; fi
if compgen -G ".whl/*.whl" > /dev/null; then  # wheels of what the image lacks, if any were carried
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site || echo "wheel install failed"
fi
command -v nvidia-smi > /dev/null && nvidia-smi -L
$PY -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA device')"

# The data: the CIFAR-10 zip from its staged parts (/root/stage or carried .gpudata/c10-*), checked
DATA=${DATA:-/tmp/data}
if [ ! -f "$DATA/$ZIP_NAME" ]; then
  parts=$(ls /root/stage/part.* .gpudata/c10-*/part.* 2>/dev/null | awk -F'part.' '!seen[$NF]++ {print $NF" "$0}' | sort -n | cut -d' ' -f2)
  if [ -n "$parts" ]; then
    mkdir -p "$DATA/cifar10"; cat $parts > "$DATA/$ZIP_NAME"
    if [ "$(sha256sum "$DATA/$ZIP_NAME" | cut -d' ' -f1)" != "$CIFAR10_SHA256" ]; then
      echo "data: the staged parts ($(echo $parts)) do not make the CIFAR-10 copy (sha256 differs): no CIFAR-10 here"
      rm -f "$DATA/$ZIP_NAME"
    fi
  fi
fi
SUB=/tmp/data-sub
if [ -f "$DATA/$ZIP_NAME" ]; then
  echo "data: CIFAR-10 copy at $DATA (sha256 checked)"
  # the gpu tests' subset: the first 100 train and 20 test images of each class of the same zip
  $PY - "$DATA/$ZIP_NAME" "$SUB/$ZIP_NAME" <<'EOF'
import collections, os, sys, zipfile
src, dst = sys.argv[1:]
os.makedirs(os.path.dirname(dst), exist_ok=True)
keep, n = {"train": 100, "test": 20}, collections.Counter()
with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w") as zo:
    for info in zi.infolist():
        parts = info.filename.strip("/").split("/")
        split = next((p for p in parts if p in keep), None)
        if info.is_dir() or split is None or len(parts) < 3:
            continue
        k = (split, parts[-2])
        if n[k] < keep[split]:
            n[k] += 1
            zo.writestr(info, zi.read(info))
print(f"data: subset of {sum(n.values())} images for the gpu tests")
EOF
else
  echo "data: no CIFAR-10 copy (stage its parts first: bash benchmarks/gpu_session.sh prepare, here)"
fi

echo "== 1. gpu_ceiling.py, on a quiet GPU ($(left) s left)"
CEIL_S=${CEIL_S:-170}
if [ "$TINY" = 1 ]; then CEIL_ARGS="--tiny"; else
  cp benchmarks/results/gpu.json "$OUT/gpu.json"; CEIL_ARGS="--update-gpu-json $OUT/gpu.json"; fi
timeout "$CEIL_S" $PY benchmarks/gpu_ceiling.py --max-seconds $((CEIL_S - 30)) $CEIL_ARGS \
  --out-md "$OUT/gpu_ceiling.md" --out-json "$OUT/gpu_ceiling.json"
echo "gpu_ceiling rc=$?"

echo "== 2. gpu tests ($(left) s left)"
TESTS_S=${TESTS_S:-80}
FEDPAPER_DATA=$SUB timeout "$TESTS_S" $PY -m pytest -m gpu tests/test_gpu.py -o addopts="" -p no:randomly -p no:cacheprovider -rA -q \
  > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$?"; tail -15 "$OUT/gpu_tests.log"

ARTIFACT=${ARTIFACT:-fednca/table1}
OVERRIDES=${OVERRIDES:-'{}'}
PROFILE=${PROFILE:-$([ "$TINY" = 1 ] && echo smoke || echo paper)}
NAME=$(echo "$ARTIFACT" | tr / -)-$PROFILE-gpu
IMPORT=${IMPORT:-archives/$NAME.tar.gz}
EXPORT_S=25
T=$(( $(left) - EXPORT_S ))
echo "== 3. $ARTIFACT at the $PROFILE profile ($OVERRIDES) for ${T} s"
if [ "$PROFILE" = paper ] && [ ! -f "$DATA/$ZIP_NAME" ]; then
  echo "skipped: no CIFAR-10 copy here"
elif [ "$T" -lt 30 ]; then
  echo "skipped: ${T} s left"
else
  if [ -f "$IMPORT" ]; then FEDPAPER_DATA=$DATA $PY -m fedpaper.cli cache import "$IMPORT" 2>&1 | tail -2; fi
  FEDPAPER_DEADLINE=$($PY -c "import time; print(time.time() + $T - 10)") FEDPAPER_DATA=$DATA timeout "$T" \
    $PY benchmarks/gpu_artifact.py "$ARTIFACT" --profile "$PROFILE" --overrides "$OVERRIDES" --out-dir /tmp/art \
    2>&1 | grep -v "runs \[" | tail -30
  echo "artifact rc=${PIPESTATUS[0]}"
  FEDPAPER_DATA=$DATA timeout $((EXPORT_S - 5)) $PY -m fedpaper.cli cache export "$OUT/$NAME.tar.gz" \
    --only "$ARTIFACT" --profile "$PROFILE" 2>&1 | tail -2
  [ -d /tmp/art ] && tar -czf "$OUT/$NAME-outputs.tar.gz" -C /tmp art
fi
echo "done in $(( $(date +%s) - T0 )) s; in $OUT: $(ls "$OUT" | tr '\n' ' ')"
