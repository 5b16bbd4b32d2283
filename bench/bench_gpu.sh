#!/bin/bash
# The GPU benchmark of issues 4 and 13 as one prepared command: bench/bench_core.py on cuda in fp32, then
# fp16, at 320x240 and 640x480; figures to OUT/core_fp32.json and OUT/core_fp16.json and a summary line per
# precision (goal: >= 200 frames/s at 320x240); then bench/bench_ort_gpu.py: the exported graph in ONNX
# Runtime on the CPU, CUDA (fp32) and TensorRT (fp32, fp16) execution providers, each skipped with a
# printed line where this onnxruntime lacks it (onnxruntime-gpu needed), figures to OUT/ort_gpu.json.
# Needs a CUDA build of torch; imports no ROS module.
#   bench/bench_gpu.sh [OUT]            (OUT defaults to bench_gpu_out/)
#   DEVICE=cpu bench/bench_gpu.sh OUT   (fp32 only: a smoke test of this script without a GPU)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench_gpu_out}
DEVICE=${DEVICE:-cuda}
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
mkdir -p "$OUT"
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
runs=(fp32)
[ "$DEVICE" != cpu ] && runs+=(fp16)
for p in "${runs[@]}"; do
  echo "== $DEVICE $p"
  "$PY" bench/bench_core.py --device "$DEVICE" --runs 100 --warmup 10 --json "$OUT/core_$p.json" \
    $( [ "$p" = fp16 ] && echo --half ) | tee "$OUT/core_$p.txt"
done
"$PY" - "$OUT" "${runs[@]}" <<'PYEOF'
import json, sys
out, precisions = sys.argv[1], sys.argv[2:]
for p in precisions:
    r = json.load(open(f'{out}/core_{p}.json'))
    for s in r['sizes']:
        fps, fast = 1000 / s['ms_all'], 1000 / s['ms_all_fast']
        goal = ' (goal >= 200 frames/s: ' + ('met' if fast >= 200 else 'NOT met') + ')' if s['size'] == '320x240' else ''
        print(f"{r['device']} {p} {s['size']}: whole forward {s['ms_all']:.2f} ms = {fps:.0f} frames/s as trained, "
              f"{s['ms_all_fast']:.2f} ms = {fast:.0f} frames/s inference form{goal}")
PYEOF
echo "== ONNX Runtime execution providers"
ORT_RUNS=100
[ "$DEVICE" = cpu ] && ORT_RUNS=10
"$PY" bench/bench_ort_gpu.py --out "$OUT" --runs "$ORT_RUNS" | tee "$OUT/ort_gpu.txt"
