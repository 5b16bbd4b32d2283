"""Issue 55: the one loader of the YAML files a user names (core.yamlfile.load_yaml_file): a file
that does not parse is one line naming the file, the line and column (1-based) and the parser's
short reason; the library functions behind every YAML-taking option use it. The command lines
themselves (one line, exit 2) are walked in test_cli_bad_input.py (subprocesses, full tier)."""

from __future__ import annotations

import pytest

from depth3dseg_ros.bags.sniff import detect_format
from depth3dseg_ros.bags.extract_config import config_error_line, load_extract_config
from depth3dseg_ros.core.classes import ClassSet
from depth3dseg_ros.core.palette import load_palette
from depth3dseg_ros.core.classes import NYU13
from depth3dseg_ros.core.yamlfile import YamlFileError, load_yaml_file
from depth3dseg_ros.training.config import load_config

BROKEN = {  # text -> (line, column, reason)
    'a: [1,\nb: 2\n': (
        3,
        1,
        "expected ',' or ']', but got '<stream end>' (while parsing a flow sequence started at "
        'line 1, column 4)',
    ),
    'a: 1\n  b: 2\n': (2, 4, 'mapping values are not allowed here'),
    'a: "x\n': (
        2,
        1,
        'found unexpected end of stream (while scanning a quoted scalar started at line 1, '
        'column 4)',
    ),
    '\t- x\n': (
        1,
        1,
        "found character '\\t' that cannot start any token (while scanning for the next token)",
    ),
    'x: !!python/object:os.system a\n': (
        1,
        4,
        'could not determine a constructor for the tag '
        "'tag:yaml.org,2002:python/object:os.system'",
    ),
}


@pytest.mark.parametrize('text', sorted(BROKEN))
def test_a_parse_error_is_one_line_with_file_line_column_and_reason(tmp_path, text):
    path = tmp_path / 'f.yaml'
    path.write_text(text)
    line, column, reason = BROKEN[text]
    with pytest.raises(YamlFileError) as err:
        load_yaml_file(path)
    assert str(err.value) == f'{path}:{line}:{column}: not valid YAML: {reason}'
    assert (err.value.line, err.value.column, err.value.path) == (line, column, str(path))
    assert isinstance(err.value, ValueError) and '\n' not in str(err.value)


def test_files_that_are_not_yaml_text_and_missing_files(tmp_path):
    binary = tmp_path / 'b.yaml'
    binary.write_bytes(b'a: 1\n\xff\xfe')
    with pytest.raises(YamlFileError, match=r'b.yaml: not a YAML file \(byte 5 is not UTF-8'):
        load_yaml_file(binary)
    with pytest.raises(YamlFileError, match='is a directory, not a YAML file'):
        load_yaml_file(tmp_path)
    with pytest.raises(FileNotFoundError, match='none.yaml: no such file'):
        load_yaml_file(tmp_path / 'none.yaml')
    empty = tmp_path / 'e.yaml'
    empty.write_text('# nothing\n')
    assert load_yaml_file(empty) is None


def test_every_loader_behind_an_option_gives_the_same_line(tmp_path):
    """train --config (load_config), extract --config / eval and calibrate --extract-config
    (load_extract_config), extract --classes and train data.classes (ClassSet.from_yaml), the
    node's class_palette_file (load_palette): the loader's line, no traceback text."""
    bad = tmp_path / 'bad.yaml'
    bad.write_text('a: [1,\nb: 2\n')
    want = f'{bad}:3:1: not valid YAML: expected'
    for load in (
        lambda: load_config(bad),
        lambda: load_extract_config(str(bad)),
        lambda: ClassSet.from_yaml(bad),
        lambda: load_palette(bad, NYU13),
    ):
        with pytest.raises(ValueError) as err:
            load()
        assert want in str(err.value) and '\n' not in str(err.value), str(err.value)
    with pytest.raises(ValueError) as err:
        load_extract_config(str(bad))
    assert config_error_line(err.value, '--extract-config', str(bad)).startswith(
        f'--extract-config {bad}:3:1: not valid YAML'
    )


def test_a_bag_directory_metadata_yaml_that_does_not_parse_is_one_line(tmp_path):
    """A bag's metadata.yaml is read first by bags.sniff.detect_format, for every command that
    opens a bag (extract, eval/calibrate --bag, replay, demo): one line, not a traceback."""
    bag = tmp_path / 'rec'
    bag.mkdir()
    (bag / 'metadata.yaml').write_text('rosbag2_bagfile_information: [1,\n')
    with pytest.raises(YamlFileError, match=r'rec/metadata.yaml:2:1: not valid YAML: '):
        detect_format(bag)
    (bag / 'metadata.yaml').write_text('- 1\n')
    with pytest.raises(ValueError, match='not a rosbag2 metadata.yaml'):
        detect_format(bag)
