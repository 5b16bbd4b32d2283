#!/usr/bin/env bash
# Real-camera lever of docs/levers.md: camera-true augmentation (augment.camera, training.camera_aug).
# The loss-term ablation's "+ consistency" run (scripts/ablation.sh: the shipped configuration, 160x120,
# EPOCHS x 100 steps of batch 8, 3D net at stride 4 / k 6 as in those runs) with the camera preset on,
# then depth3dseg-eval of the exported model on the real-camera bag.
# Usage: scripts/ablation_camera.sh OUT_DIR [SEED] [EPOCHS] [RUN ...]
#   RUN: camera (default; --set augment.camera=real_camera), texture (--set augment.texture=domain_rand:
#   label-guided texture/colour randomisation, training.texture_rand), texture_camera (both), balance
#   (--set loss.class_weights=median_freq: median-frequency class balancing, training.class_weights), wide
#   (--set model.arch.width=1.0: the encoder at MobileNetV2's full width instead of 0.75; capacity lever) and/or base
#   (the same run without any, which reproduces scripts/ablation.sh's plus_consistency run)
# Env: BAG (default: the real-camera sample bag, python -m depth3dseg_ros.samples bag), PRESET (default real_camera).
# Table: python scripts/ablation_camera_table.py OUT_DIR_seed0 OUT_DIR_seed1 ... [--base ABL_DIR_seed0 ...]
set -euo pipefail
out=${1:?usage: scripts/ablation_camera.sh OUT_DIR [SEED] [EPOCHS] [RUN ...]}
seed=${2:-0}
epochs=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(camera)
bag=${BAG:-$(python -m depth3dseg_ros.samples bag)}
preset=${PRESET:-real_camera}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
common=(--config config/train_shipped.yaml --set "data.input_size=[160,120]" --set train.epochs=$epochs
        --set early_stop.patience=99 --set "train.seed=$seed" --max-steps-per-epoch 100
        --set model.arch.p_stride=4 --set model.arch.p_k=6)
for r in "${runs[@]}"; do
  case $r in
    camera) extra=(--set "augment.camera=$preset"); dir=camera ;;
    texture) extra=(--set augment.texture=domain_rand); dir=texture ;;
    texture_camera) extra=(--set augment.texture=domain_rand --set "augment.camera=$preset"); dir=texture_camera ;;
    balance) extra=(--set loss.class_weights=median_freq); dir=balance ;;
    wide) extra=(--set model.arch.width=1.0); dir=wide ;;
    base) extra=(); dir=plus_consistency ;;
    *) echo "unknown run $r (camera | texture | texture_camera | balance | wide | base)" >&2; exit 2 ;;
  esac
  depth3dseg-train "${common[@]}" "${extra[@]}" --out "$out/$dir"
  depth3dseg-eval --model "$out/$dir/model.pt" --bag "$bag" --out "$out/$dir/eval_real" --device cpu >/dev/null
  python3 -c "import json; h=json.load(open('$out/$dir/summary.json'))['history'][-1]; \
r=json.load(open('$out/$dir/eval_real/report.json')); \
print('$dir', 'seed $seed', 'val', ' '.join(f'{k}={h[k]:.4f}' for k in ('miou_2d','miou_3d','miou_fused','absrel','delta1')), \
'| real', ' '.join(f'{k}={r[k]:.4f}' for k in ('miou_2d','miou_3d','miou_fused','absrel','delta1')))"
done
