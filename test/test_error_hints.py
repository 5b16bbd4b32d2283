"""Errors that say what to do (a new user's mistakes): a --set section typo lists the sections, a
bag given where a dataset directory belongs says to extract it, a scalar given for a mapping option
shows the mapping's form."""

import pytest

from depth3dseg_ros.dataset_format import read_index
from depth3dseg_ros.training.config import load_config


def test_a_section_typo_lists_the_sections():
    with pytest.raises(ValueError) as err:
        load_config(None, ['trian.batch_size=2'])
    msg = str(err.value)
    assert "'trian' is not a config section" in msg
    assert "'train'" in msg and "'data'" in msg and "'augment'" in msg, msg


@pytest.mark.parametrize('layout', ['rosbag2 directory', 'mcap file', 'plain directory'])
def test_a_bag_given_as_a_dataset_says_to_extract_it(tmp_path, layout):
    if layout == 'rosbag2 directory':
        path = tmp_path / 'bag'
        path.mkdir()
        (path / 'metadata.yaml').write_text('rosbag2_bagfile_information: {}\n')
        (path / 'bag_0.db3').write_bytes(b'')
    elif layout == 'mcap file':
        path = tmp_path / 'cam.mcap'
        path.write_bytes(b'\x89MCAP0\r\n')
    else:
        path = tmp_path / 'empty'
        path.mkdir()
    with pytest.raises(FileNotFoundError) as err:
        read_index(path)
    msg = str(err.value)
    if layout == 'plain directory':
        assert 'is' in msg and 'a depth3dseg-extract directory?' in msg, msg
    else:
        assert f'looks like a bag: extract it first, depth3dseg-extract {path} -o' in msg, msg


@pytest.mark.parametrize(
    'key, form',
    [('train.class_mix', '{p: 0.5}'), ('train.mixstyle', '{p: 0.5, stages: [1, 2, 3]}')],
)
def test_a_scalar_for_a_mapping_option_shows_the_mapping(key, form):
    with pytest.raises(ValueError) as err:
        load_config(None, [f'{key}=0.5'])
    assert f"e.g. --set '{key}={form}'" in str(err.value), str(err.value)
