#!/usr/bin/env bash
# One GPU session's checks for issue #30 item 5, as ONE short prepared command on the device machine
# (python3 with torch preinstalled, no registry; the project runs from this source tree):
#   1. the `gpu` tests (tests/test_gpu.py), against a CIFAR-10 subset for the paper cut (.gpudata/sub);
#   2. each paper-profile model's training and evaluation throughput (benchmarks/gpu_throughput.py);
#   3. FedPALS Table 1's Fashion-MNIST rows at the paper profile until the time left runs out
#      (FEDPAPER_DEADLINE: the sweep stops cleanly between runs), then every finished run exported to
#      $OUT/fedpals-table1-gpu.tar.gz (`fedpaper cache export`) to import and resume elsewhere.
# Usage there: BUDGET=540 bash benchmarks/gpu_session.sh   (seconds for the whole script)
# Needs, carried: .gpudata/fm/fashion-mnist (the offline copy), .gpudata/sub/cifar10 (subset zip),
# .whl (wheels of what the image lacks, if any).
set -u
OUT=${OUT:-/tmp/gpu-out}; mkdir -p "$OUT"
exec > >(tee -a "${OUT:-/tmp/gpu-out}/session.log") 2>&1
T0=$(date +%s)
BUDGET=${BUDGET:-540}
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
export PYTHONUNBUFFERED=1 FEDPAPER_CACHE=/tmp/fpcache FEDPAPER_PROGRESS=0 MPLBACKEND=Agg
export PYTHONPATH=$PWD
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PWD:/tmp/site || echo "wheel install failed"
fi
{ nvidia-smi -L; python3 -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"; } 2>&1 

echo "== 1. gpu tests ($(left) s left)"
FEDPAPER_DATA=$PWD/.gpudata/sub timeout 170 python3 -m pytest -m gpu tests/test_gpu.py -p no:cacheprovider -p no:randomly -rs -q 2>&1 | tail -25; echo "gpu tests rc=${PIPESTATUS[0]}"

echo "== 2. throughput ($(left) s left)"
timeout 200 python3 benchmarks/gpu_throughput.py --measure benchmarks/results/paper_models.json --max-seconds 150 \
  --out-json "$OUT/gpu.json" --out-md "$OUT/gpu.md" 2>&1 | tail -40; echo "throughput rc=${PIPESTATUS[0]}"

T=$(( $(left) - 35 ))
echo "== 3. FedPALS Table 1, Fashion-MNIST rows, paper profile, ${T} s"
if [ "$T" -gt 30 ]; then
  export FEDPAPER_DEADLINE=$(python3 -c "import time; print(time.time() + $T - 10)")
  FEDPAPER_DATA=$PWD/.gpudata/fm timeout "$T" python3 benchmarks/gpu_artifact.py fedpals/table1 --profile paper \
    --overrides '{"table1_rows": [["fashion-mnist", "C=3"], ["fashion-mnist", "C=2"]]}' --out-dir /tmp/t1 \
    2>&1 | grep -v "runs \[" | tail -30; echo "table1 rc=${PIPESTATUS[0]}"
  FEDPAPER_DATA=$PWD/.gpudata/fm python3 -m fedpaper.cli cache export "$OUT/fedpals-table1-gpu.tar.gz" 2>&1 | tail -2
fi
tar -czf "$OUT/t1.tar.gz" -C /tmp t1 2>/dev/null
echo "done in $(( $(date +%s) - T0 )) s"
