"""core/palette.py: class palette and label groupings from a YAML file (issue 14,
parameter class_palette_file)."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from depth3dseg_ros.core.classes import NYU13, ClassSet
from depth3dseg_ros.core.imageops import colorize_labels
from depth3dseg_ros.core.palette import load_palette, model_palette, palette_from_dict

REPO = Path(__file__).resolve().parents[1]
NAV = REPO / 'config' / 'palette_navigation.yaml'


def test_empty_parameter_is_the_models_class_set_unchanged():
    pal = load_palette('', NYU13)
    assert pal.classes == NYU13 and pal.identity and pal.source == ''
    lab = np.arange(14, dtype=np.uint8).reshape(2, 7)
    assert pal.relabel(lab) is lab  # no copy on the default path
    assert pal.to_dict() == NYU13.to_dict()  # ~/classes as before
    assert model_palette(NYU13).classes == NYU13


def test_shipped_navigation_grouping_maps_all_13_classes_onto_4_groups():
    pal = load_palette(NAV, NYU13)
    assert pal.classes.names == ['void', 'floor', 'structure', 'furniture', 'objects']
    assert pal.classes.void_id == 0 and not pal.identity
    expect = {
        'void': 0,
        'floor': 1,
        'wall': 2,
        'ceiling': 2,
        'window': 2,
        'bed': 3,
        'chair': 3,
        'furniture': 3,
        'sofa': 3,
        'table': 3,
        'books': 4,
        'objects': 4,
        'picture': 4,
        'tv': 4,
    }
    assert {n: int(pal.lut[NYU13.index(n)]) for n in NYU13.names} == expect
    assert pal.classes.colors.tolist()[4] == [255, 221, 0]  # '#ffdd00'
    lab = np.array([[NYU13.index('wall'), NYU13.index('tv')], [0, NYU13.index('floor')]])
    out = pal.relabel(lab.astype(np.uint8))
    assert out.dtype == np.uint8 and out.tolist() == [[2, 4], [0, 1]]
    # one colour per group in the mask / overlay / cloud colour
    mask = colorize_labels(out, pal.colors)
    assert mask[0, 0].tolist() == [174, 199, 232] and mask[1, 1].tolist() == [140, 86, 75]
    d = pal.to_dict()
    assert d['palette_file'] == str(NAV)
    assert d['classes'][2] == {
        'id': 2,
        'name': 'structure',
        'color': [174, 199, 232],
        'model_classes': ['wall', 'ceiling', 'window'],
    }
    assert ClassSet.from_dict(d) == pal.classes  # a ~/classes reader still decodes it


def test_colours_only_recolours_and_keeps_ids():
    pal = palette_from_dict({'colors': {'wall': '#010203', 'void': [9, 9, 9]}}, NYU13)
    assert pal.identity and pal.classes.names == NYU13.names
    assert pal.colors[12].tolist() == [1, 2, 3] and pal.colors[0].tolist() == [9, 9, 9]
    assert pal.colors[1].tolist() == NYU13.colors[1].tolist()


def test_ungrouped_keep_and_void_and_colour_precedence():
    groups = [{'name': 'seat', 'classes': ['chair', 'sofa']}]
    keep = palette_from_dict({'groups': groups}, NYU13)
    assert keep.classes.names[:2] == ['void', 'seat'] and len(keep.classes) == 1 + 1 + 11
    assert keep.classes.names[2:] == [n for n in NYU13.names[1:] if n not in ('chair', 'sofa')]
    assert keep.colors[1].tolist() == NYU13.colors[NYU13.index('chair')].tolist()  # first's
    assert keep.colors[keep.classes.index('wall')].tolist() == [255, 187, 120]
    drop = palette_from_dict({'groups': groups, 'ungrouped': 'void'}, NYU13)
    assert drop.classes.names == ['void', 'seat']
    assert int(drop.lut[NYU13.index('wall')]) == 0 and 'wall' in drop.groups[0]
    both = palette_from_dict(
        {'groups': [dict(groups[0], color=[1, 1, 1])], 'colors': {'seat': [2, 2, 2]}}, NYU13
    )
    assert both.colors[1].tolist() == [2, 2, 2]  # colors[<name>] wins over the group's color


def test_more_than_256_model_classes_grouped_to_uint8_labels():
    big = ClassSet([f'c{i}' for i in range(300)], np.zeros((300, 3), int))
    pal = palette_from_dict(
        {'groups': [{'name': 'low', 'classes': ['c1', 'c299']}], 'ungrouped': 'void'}, big
    )
    assert pal.classes.label_dtype == np.uint8
    out = pal.relabel(np.array([[299, 5]], np.uint16))
    assert out.dtype == np.uint8 and out.tolist() == [[1, 0]]
    with pytest.raises(ValueError, match='label ids 0..300 outside the model classes 0..299'):
        pal.relabel(np.array([[0, 300]], np.uint16))


@pytest.mark.parametrize(
    'data,words',
    [
        ({'colours': {}}, ["unknown key(s) ['colours']", 'colors']),
        ({'colors': {'wal': [1, 2, 3]}}, ['colors.wal', "'wal' is not an output class"]),
        ({'colors': {'wall': [300, 0, 0]}}, ['colors.wall=[300, 0, 0]', '0..255']),
        ({'colors': {'wall': '#12345'}}, ["colors.wall='#12345'", '#rrggbb']),
        ({'colors': {'wall': [1, 2]}}, ['colors.wall=[1, 2]']),
        ({'colors': [1, 2]}, ['colors=[1, 2] must be a mapping']),
        ({'groups': []}, ['groups=[] must be a non-empty list']),
        (
            {'groups': [{'name': 'a', 'classes': ['sofaa']}]},
            ["groups[0].classes[0]='sofaa' is not a model class", "'sofa'"],
        ),
        (
            {'groups': [{'name': 'a', 'classes': ['void']}]},
            ["groups[0].classes[0]='void' is the void class"],
        ),
        (
            {
                'groups': [
                    {'name': 'a', 'classes': ['bed']},
                    {'name': 'b', 'classes': ['tv', 'bed']},
                ]
            },
            ["groups[1].classes[1]='bed' is already in group 'a'"],
        ),
        (
            {'groups': [{'name': 'a', 'classes': ['bed']}, {'name': 'a', 'classes': ['tv']}]},
            ["groups[1].name='a' is used twice"],
        ),
        ({'groups': [{'name': '', 'classes': ['bed']}]}, ["groups[0].name='' must be"]),
        ({'groups': [{'name': 'a', 'classes': []}]}, ['groups[0].classes=[] must be a non-empty']),
        (
            {'groups': [{'name': 'a', 'classes': ['bed'], 'colour': 1}]},
            ["groups[0]: unknown key(s) ['colour']"],
        ),
        (
            {'groups': [{'name': 'a', 'classes': ['bed'], 'color': 'red'}]},
            ["groups[0].color='red'"],
        ),
        (
            {'groups': [{'name': 'wall', 'classes': ['bed']}]},
            ["ungrouped class 'wall' has the name of a group"],
        ),
        ({'ungrouped': 'drop'}, ["ungrouped='drop' must be one of ['keep', 'void']"]),
        ([1, 2], ['must be a mapping']),
    ],
)
def test_bad_files_name_the_field_and_value(data, words):
    with pytest.raises(ValueError) as err:
        palette_from_dict(data, NYU13, 'pal.yaml')
    text = str(err.value)
    assert text.startswith('pal.yaml'), text
    for w in words:
        assert w in text, text


def test_load_palette_file_errors_name_the_parameter_and_path(tmp_path):
    with pytest.raises(ValueError, match=r"class_palette_file='/nope.yaml': no such file"):
        load_palette('/nope.yaml', NYU13)
    bad = tmp_path / 'bad.yaml'
    bad.write_text('groups: [unclosed\n')
    with pytest.raises(ValueError) as err:  # one line: file, line, column, reason (issue 55)
        load_palette(bad, NYU13)
    assert str(err.value) == (
        f"class_palette_file: {bad}:2:1: not valid YAML: expected ',' or ']', but got "
        "'<stream end>' (while parsing a flow sequence started at line 1, column 9)"
    )
    good = tmp_path / 'good.yaml'
    good.write_text(yaml.safe_dump({'colors': {'tv': [1, 2, 3]}}))
    assert load_palette(str(good), NYU13).colors[11].tolist() == [1, 2, 3]
    empty = tmp_path / 'empty.yaml'
    empty.write_text('# nothing\n')
    assert load_palette(empty, NYU13).classes == NYU13
