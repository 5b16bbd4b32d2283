"""Issue 55 on the dataset path: a frame refused before decoding is skipped with its reason by
depth3dseg-train and depth3dseg-eval --data, never fatal to the run (training.frame_check)."""

from __future__ import annotations

import json

import torch

from bombutil import png_header_bomb
from depth3dseg_ros.dataset_format import read_index
from depth3dseg_ros.training import evaluate, train
from trainutil import make_dataset_dir, tiny_train_args


def test_a_decompression_bomb_in_a_dataset_is_skipped_by_training_and_eval(
    real_dir, tmp_path, capsys
):
    """A dataset of 10 frames, one of whose colour PNGs declares 100000×100000 pixels in its
    header: training (one step) and evaluation both run to the end, each says once on stderr that
    it skipped 1 of 10 frames over max_image_pixels, naming the file, and they use the other 9
    (7 + 2 validation frames of the 30 % split; 9 evaluated). Before: both stopped with one error
    line naming the file."""
    d = make_dataset_dir(real_dir, tmp_path / 'ds', size=(80, 60))
    bomb = d / read_index(d)[4]['rgb']
    bomb.write_bytes(png_header_bomb(100000, 100000))
    line = f'skipped 1 of 10 frames of {d}: 1 over max_image_pixels=67108864, e.g. {bomb}'

    out = tmp_path / 'run'
    args = tiny_train_args(d, out, '--max-steps-per-epoch', '1', epochs=1)
    assert train.main(args) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert err.count('skipped') == 1 and f'depth3dseg-train: {line}' in err.splitlines(), err
    ck = torch.load(out / 'last.pt', weights_only=True)
    assert ck['train_samples'] == 9 - 3 and ck['global_step'] == 1  # 30 % of 9: 3 held out

    rep = tmp_path / 'eval'
    argv = ['--model', str(out / 'model.pt'), '--data', str(d), '--out', str(rep)]
    assert evaluate.main(argv) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert err.count('skipped') == 1 and f'depth3dseg-eval: {line}' in err.splitlines(), err
    assert json.loads((rep / 'report.json').read_text())['frames'] == 9
