"""Case C43, "ignore label 255 outside the class range in the label images": ids outside the class
set are handled at extraction (map to void and count, or refuse the frame), the writer never stores
them, and a training / evaluation run checks the label range before its first step (from the
index's ``label_max``; label PNGs decoded only for datasets written without it)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bagutil import TOPICS, make_frames, read_png, write_bag
from depth3dseg_ros.bags.dataset_writer import DatasetWriter, check_label_range
from depth3dseg_ros.dataset_format import read_index
from depth3dseg_ros.bags.extract import ExtractConfig, extract, main
from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.training import evaluate, train
from depth3dseg_ros.training.dataset import FrameDataset
from depth3dseg_ros.training.dataset import read_index as read_records
from trainutil import tiny_train_args


def _frames_with_bad_ids(real_dir):
    """4 frames (nyu0001 labelled, tum1, tum2, nyu0001 labelled); frame 0's labels get 255 in rows
    0-9 (1600 px at 160x120) and 14 at (50, 50) and (60, 70): 1602 out-of-range pixels of NYU13
    (0..13)."""
    frames = make_frames(real_dir, 4)
    lab = frames[0].labels.copy()
    lab[:10] = 255
    lab[50, 50] = lab[60, 70] = 14
    frames[0] = replace(frames[0], labels=lab)
    return frames


def _topic(report, bag, topic):
    return next(t for t in report[bag]['topics'] if t['topic'] == topic)


def test_c43_out_of_range_label_ids_map_to_void_by_default(tmp_path, real_dir):
    frames = _frames_with_bad_ids(real_dir)
    bag = write_bag(tmp_path / 'b', frames)
    out = tmp_path / 'ds'
    report = extract([bag], out, ExtractConfig(workers=1))
    assert report['b']['labels_out_of_range'] == {
        'policy': 'void',
        'num_classes': 14,
        'void_id': 0,
        'frames': 1,
        'pixels': 1602,
        'ids': [14, 255],
    }
    entries = read_index(out)
    assert len(entries) == 4 and [e['labels'] is not None for e in entries] == [
        True,
        False,
        False,
        True,
    ]
    got = read_png(out / entries[0]['labels'])
    want = frames[0].labels.copy()
    want[want >= 14] = 0
    np.testing.assert_array_equal(got, want)  # only the out-of-range pixels changed, to void 0
    assert got[:10].max() == 0 and got[50, 50] == 0 and got[60, 70] == 0
    np.testing.assert_array_equal(
        read_png(out / entries[3]['labels']), frames[3].labels
    )  # untouched
    assert entries[0]['label_max'] == int(want.max()) == entries[3]['label_max'] <= 13
    manifest = json.loads((out / 'manifest.json').read_text())
    assert manifest['labels'] == {
        'max_id': int(want.max()),
        'num_classes': 14,
        'frames': 2,
        'frames_without_max': 0,
    }
    assert _topic(report, 'b', TOPICS['labels'])['used'] == 2
    assert manifest['report']['b']['labels_out_of_range']['pixels'] == 1602


def test_c43_refuse_policy_skips_the_frame_with_its_reason(tmp_path, real_dir, capsys):
    bag = write_bag(tmp_path / 'b', _frames_with_bad_ids(real_dir))
    out = tmp_path / 'ds'
    assert (
        main([str(bag), '-o', str(out), '--out-of-range-labels', 'refuse', '--workers', '1']) == 0
    )
    cap = capsys.readouterr()
    entries = read_index(out)
    assert [e['id'] for e in entries] == ['b_000001', 'b_000002', 'b_000003']
    report = json.loads((out / 'manifest.json').read_text())['report']
    reason = 'label ids outside 0..13 (refused)'
    rgb, labels = _topic(report, 'b', TOPICS['rgb']), _topic(report, 'b', TOPICS['labels'])
    assert (rgb['read'], rgb['used'], rgb['reasons']) == (4, 3, {reason: 1})
    assert (labels['read'], labels['used'], labels['reasons']) == (2, 1, {reason: 1})
    assert _topic(report, 'b', TOPICS['depth'])['reasons'] == {'frame not extracted': 1}
    info = _topic(report, 'b', TOPICS['camera_info'])
    assert (info['used'], info['reasons']) == (3, {'frame not extracted': 1})
    assert report['b']['labels_out_of_range'] == {
        'policy': 'refuse',
        'num_classes': 14,
        'void_id': 0,
        'frames': 1,
        'pixels': 1602,
        'ids': [14, 255],
    }
    assert f'{reason}: 1' in cap.out  # the per-topic table
    assert (
        'ids [14, 255], 1602 px in 1 frames, frames refused (--out-of-range-labels refuse)'
        in cap.out
    )
    assert (
        cap.err.count('\n') == 1
        and "ids [14, 255] outside the class set 0..13: those frames refused" in cap.err
    )


def test_c43_policy_flag_and_yaml_key_are_validated(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(['x', '-o', str(tmp_path / 'o'), '--out-of-range-labels', 'clip'])
    assert e.value.code == 2
    (tmp_path / 'e.yaml').write_text('out_of_range_labels: drop\n')
    capsys.readouterr()
    assert main(['x', '-o', str(tmp_path / 'o'), '--config', str(tmp_path / 'e.yaml')]) == 2
    assert "out_of_range_labels='drop' is not one of ['void', 'refuse']" in capsys.readouterr().err


def test_c43_writer_refuses_out_of_range_ids(tmp_path):
    rgb = np.zeros((4, 5, 3), np.uint8)
    lab = np.zeros((4, 5), np.uint8)
    lab[1, 1] = 255
    with DatasetWriter(tmp_path / 'ds', NYU13) as w:
        with pytest.raises(
            ValueError, match=r'frame f1: label ids \[255\] are outside the class set 0..13'
        ):
            w.write_frame('f1', rgb, np.eye(3), 0, 'b', {}, labels=lab)
        lab[1, 1] = 13
        assert w.write_frame('f2', rgb, np.eye(3), 0, 'b', {}, labels=lab)['label_max'] == 13
    assert [e['id'] for e in read_index(tmp_path / 'ds')] == ['f2']


def _dataset(real_dir, out: Path) -> Path:
    """6 frames (nyu0001 with labels, tum1/tum2 without) written by DatasetWriter, with
    label_max."""
    with DatasetWriter(out, NYU13, workers=1) as w:
        for i, f in enumerate(make_frames(real_dir, 6)):
            w.write_frame(
                f'f{i}', f.rgb, f.K, f.stamp_ns, 'b', {}, depth_mm=f.depth_mm, labels=f.labels
            )
        w.write_manifest([], {})
    return out


def _poison(ds: Path, *, keep_label_max: bool) -> Path:
    """Another tool's dataset: frame f3's label PNG gets 255 in its first row. keep_label_max=False
    drops label_max from the index (a dataset extracted before it was recorded: the check decodes
    the PNGs); True records the true max 255 (the check reads only the index)."""
    import cv2

    lines = [json.loads(x) for x in (ds / 'index.jsonl').read_text().splitlines()]
    for e in lines:
        if e['id'] == 'f3':
            lab = cv2.imread(str(ds / e['labels']), cv2.IMREAD_UNCHANGED)
            lab[0] = 255
            cv2.imwrite(str(ds / e['labels']), lab)
            e['label_max'] = 255
        if not keep_label_max:
            e.pop('label_max', None)
    (ds / 'index.jsonl').write_text(''.join(json.dumps(e) + '\n' for e in lines))
    return ds


def test_c43_label_range_check_reads_the_index_and_decodes_only_old_datasets(
    tmp_path, real_dir, monkeypatch
):
    ds = _dataset(real_dir, tmp_path / 'ds')
    assert check_label_range(read_records(ds), NYU13) == {
        'frames': 2,
        'from_index': 2,
        'decoded': 0,
        'max_id': read_index(ds)[0]['label_max'],
    }
    _poison(ds, keep_label_max=True)
    import cv2

    monkeypatch.setattr(
        cv2, 'imread', lambda *a: pytest.fail('decoded a PNG although label_max is recorded')
    )
    with pytest.raises(
        ValueError,
        match=r'^1 of 2 label images hold ids outside the class set 0..13 '
        r'\(14 classes; largest id 255, first .*labels/f3.png\)',
    ):
        check_label_range(read_records(ds), NYU13)
    monkeypatch.undo()
    old = _poison(_dataset(real_dir, tmp_path / 'old'), keep_label_max=False)
    with pytest.raises(ValueError, match='largest id 255'):
        check_label_range(read_records(old), NYU13)


@pytest.mark.parametrize('keep_label_max', [True, False])
def test_c43_training_refuses_before_the_first_step(
    keep_label_max, tmp_path, real_dir, capsys, monkeypatch
):
    ds = _poison(_dataset(real_dir, tmp_path / 'ds'), keep_label_max=keep_label_max)
    monkeypatch.setattr(
        FrameDataset, '__getitem__', lambda *a: pytest.fail('a frame was loaded: mid-epoch')
    )
    run = tmp_path / 'run'
    assert train.main(tiny_train_args(ds, run, epochs=1)) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'Traceback' not in err, err
    assert err.startswith(
        'depth3dseg-train: error: 1 of 2 label images hold ids outside the class set 0..13 '
        '(14 classes; largest id 255, first '
    )
    assert (
        not run.exists()
    )  # refused before the run directory (config.yaml, tb/) and the first step


def test_c43_eval_refuses_before_any_frame(tmp_path, real_dir, capsys):
    import torch

    from depth3dseg_ros.core.model import Depth3DSeg
    from depth3dseg_ros.core.modelfile import save_model

    torch.manual_seed(0)
    model = save_model(
        tmp_path / 'm.pt',
        Depth3DSeg(num_classes=14, width=0.25),
        {'classes': NYU13, 'input_size': [64, 48]},
    )
    ds = _poison(_dataset(real_dir, tmp_path / 'ds'), keep_label_max=True)
    assert (
        evaluate.main(['--model', str(model), '--data', str(ds), '--out', str(tmp_path / 'ev')])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and err.startswith(
        'depth3dseg-eval: error: 1 of 2 label images hold ids'
    )


@pytest.mark.parametrize(
    'encoding,dtype', [('32SC1', np.int32), ('16SC1', np.int16), ('8SC1', np.int8)]
)
def test_c43_signed_label_images_decode_and_negative_ids_become_void(encoding, dtype):
    """Label images in signed encodings (a simulator's 32SC1 with -1 for "no class") decode;
    negative and too large ids are out of range like 255: mapped to void and counted, the frame
    written as uint8 (before: the whole label image was dropped as undecodable)."""
    from rosbags.typesys import Stores, get_typestore

    from bagutil import image_msg
    from depth3dseg_ros.bags.decode import decode_labels
    from depth3dseg_ros.bags.frames import FrameData
    from depth3dseg_ros.bags.label_policy import LabelRange

    ts = get_typestore(Stores.ROS2_KILTED)
    lab = np.array([[-1, 3, 12], [13, 100 if dtype is np.int8 else 255, 5]], dtype)
    got = decode_labels(image_msg(ts, lab, encoding, 0), 'sensor_msgs/msg/Image')
    assert got.tolist() == lab.tolist()
    rng = LabelRange(NYU13, 'void')
    fr = rng.apply(FrameData(0, 0, np.zeros((2, 3, 3), np.uint8), np.eye(3), labels=got))
    assert fr.labels.dtype == np.uint8 and fr.labels.tolist() == [[0, 3, 12], [13, 0, 5]]
    assert (rng.frames, rng.pixels, rng.ids) == (1, 2, {-1, int(lab[1, 1])})
    ok = rng.apply(FrameData(1, 0, np.zeros((1, 2, 3), np.uint8), np.eye(3), labels=got[:1, 1:]))
    assert ok.labels.dtype == np.uint8 and ok.labels.tolist() == [[3, 12]]  # in range: cast only
    assert (
        LabelRange(NYU13, 'refuse').apply(
            FrameData(0, 0, np.zeros((2, 3, 3), np.uint8), np.eye(3), labels=got)
        )
        is None
    )
