"""ClassSet and the NYU13 default (core/classes.py, config/classes_nyu13.yaml)."""

from pathlib import Path

import numpy as np
import pytest

from depth3dseg_ros.core.classes import NYU13, ClassSet

REPO = Path(__file__).resolve().parents[1]


def test_nyu13_default_ids_and_palette():
    assert NYU13.names == [
        'void',
        'bed',
        'books',
        'ceiling',
        'chair',
        'floor',
        'furniture',
        'objects',
        'picture',
        'sofa',
        'table',
        'tv',
        'wall',
        'window',
    ]
    assert len(NYU13) == 14 and NYU13.void_id == 0 and NYU13.index('wall') == 12
    assert NYU13.colors.dtype == np.uint8 and NYU13.colors.shape == (14, 3)
    assert NYU13.colors[0].tolist() == [0, 0, 0]
    c = NYU13.colors.astype(float)
    dist = np.sqrt(((c[:, None] - c[None]) ** 2).sum(-1)) + np.eye(14) * 1e9
    assert dist.min() >= 60  # distinct, readable palette
    assert NYU13.label_dtype is np.uint8


def test_shipped_yaml_equals_default():
    assert ClassSet.from_yaml(REPO / 'config' / 'classes_nyu13.yaml') == NYU13


def test_dict_and_yaml_round_trip(tmp_path):
    cs = ClassSet(['unlabelled', 'a: b', 'c'], [[0, 0, 0], [1, 2, 3], [255, 255, 255]], void_id=0)
    assert ClassSet.from_dict(cs.to_dict()) == cs
    cs.to_yaml(tmp_path / 'c.yaml')
    assert ClassSet.from_yaml(tmp_path / 'c.yaml') == cs
    # ids may be listed in any order
    d = cs.to_dict()
    d['classes'].reverse()
    assert ClassSet.from_dict(d) == cs


def test_label_dtype_switches_above_256():
    names = [f'c{i}' for i in range(257)]
    assert ClassSet(names[:256], np.zeros((256, 3))).label_dtype is np.uint8
    assert ClassSet(names, np.zeros((257, 3))).label_dtype is np.uint16


@pytest.mark.parametrize(
    'kwargs,match',
    [
        (dict(names=['a'], colors=[[0, 0, 0]]), 'at least 2'),
        (dict(names=['a', 'a'], colors=[[0, 0, 0]] * 2), 'duplicates'),
        (dict(names=['a', ''], colors=[[0, 0, 0]] * 2), r'names\[1\]'),
        (dict(names=['a', 'b'], colors=[[0, 0, 0]]), 'shape'),
        (dict(names=['a', 'b'], colors=[[0, 0, 0], [0, 0, 256]]), '0..255'),
        (dict(names=['a', 'b'], colors=[[0, 0, 0]] * 2, void_id=2), 'void_id=2'),
    ],
)
def test_bad_class_sets_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ClassSet(**kwargs)


def test_from_dict_rejects_gaps(tmp_path):
    d = NYU13.to_dict()
    d['classes'][5]['id'] = 99
    with pytest.raises(ValueError, match='without gaps'):
        ClassSet.from_dict(d)
    (tmp_path / 'bad.yaml').write_text('classes: 3\n')
    with pytest.raises(ValueError, match='bad.yaml'):
        ClassSet.from_yaml(tmp_path / 'bad.yaml')
