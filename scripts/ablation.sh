#!/usr/bin/env bash
# Loss-term ablation of models/README.md (METHOD M4/M5): the same data, seed and number of steps,
# 160x120 input, three runs: 2D + depth only; + 3D cross-entropy; + 2D/3D consistency (all four terms).
# Usage: scripts/ablation.sh OUT_DIR [SEED] [EPOCHS]   (EPOCHS x 100 steps of batch 8; default 3; the card: 20)
# Table over seeds: python scripts/ablation_table.py OUT_DIR_seed0 OUT_DIR_seed1 ...
# (expects data/ds_synth_train, data/ds_synth_val: models/README.md)
set -euo pipefail
out=${1:?usage: scripts/ablation.sh OUT_DIR [SEED]}
seed=${2:-0}
epochs=${3:-3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
common=(--config config/train_shipped.yaml --set "data.input_size=[160,120]" --set train.epochs=$epochs
        --set early_stop.patience=99 --set "train.seed=$seed" --max-steps-per-epoch 100)
depth3dseg-train "${common[@]}" --set loss.w_seg3d=0 --set loss.w_consistency=0 --out "$out/2d_depth"
depth3dseg-train "${common[@]}" --set loss.w_consistency=0 --out "$out/plus_3d"
depth3dseg-train "${common[@]}" --out "$out/plus_consistency"
for r in 2d_depth plus_3d plus_consistency; do  # the real-camera figures of models/README.md
  depth3dseg-eval --model "$out/$r/model.pt" --bag "$(python -m depth3dseg_ros.samples bag)" --out "$out/$r/eval_real" --device cpu >/dev/null
done
for r in 2d_depth plus_3d plus_consistency; do
  python3 -c "import json,sys; h=json.load(open('$out/$r/summary.json'))['history'][-1]; \
print('$r', 'seed $seed', ' '.join(f'{k}={h[k]:.4f}' for k in ('miou_2d','miou_3d','miou_fused','absrel','rmse','delta1')))"
done
