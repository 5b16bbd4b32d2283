"""depth3dseg-extract's user errors and report wording: an output path that is a file (or cannot
be created), flag values out of range (named as typed, exit 2, before any bag is opened), the
defaults in --help, and CameraInfo skip reasons with --every / --max-frames."""

import json

import pytest

from cliutil import one_error_line
from bagutil import (
    TOPICS,
    bag_typestore,
    camera_info_msg,
    frame_messages,
    make_frames,
    write_bag,
    write_messages,
)
from depth3dseg_ros.bags.extract import (
    ExtractConfig,
    OutputDirError,
    build_parser,
    extract,
    load_extract_config,
    main,
    output_dir_problem,
)


def _one_error_line(capsys) -> str:
    return one_error_line(capsys, 'depth3dseg-extract')


@pytest.fixture
def small_bag(tmp_path, real_dir):
    return write_bag(tmp_path / 'small', make_frames(real_dir, 2))


def test_output_path_that_is_a_file_is_a_user_error(tmp_path, small_bag, capsys, monkeypatch):
    """-o naming an existing file: one line naming -o/--output, the path and 'is a file, not a
    directory', exit 2, nothing written; the same for a path below a file (cannot be created)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'README.md').write_text('hello\n')
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main([str(small_bag), '-o', 'README.md', '--preset', 'depth3dseg']) == 2
    err = _one_error_line(capsys)
    assert "-o/--output 'README.md' is a file, not a directory" in err
    assert main([str(small_bag), '-o', 'README.md/sub/ds']) == 2
    err = _one_error_line(capsys)
    assert "-o/--output 'README.md/sub/ds' cannot be created" in err
    assert "README.md' is a file, not a directory" in err
    assert (tmp_path / 'README.md').read_text() == 'hello\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    # the check comes before the bags: a missing bag is not what is reported
    assert main([str(tmp_path / 'no_such_bag'), '-o', 'README.md']) == 2
    assert 'is a file' in _one_error_line(capsys)
    # from Python too, before any bag is opened
    with pytest.raises(OutputDirError, match="out_dir 'README.md' is a file, not a directory"):
        extract([tmp_path / 'no_such_bag'], 'README.md', ExtractConfig())
    assert output_dir_problem(tmp_path) is None
    assert output_dir_problem(tmp_path / 'new' / 'deeper') is None


@pytest.mark.parametrize(
    'flag, message',
    [
        (['--every', '0'], '--every 0 must be >= 1'),
        (['--every=-2'], '--every -2 must be >= 1'),
        (['--png-level', '12'], '--png-level 12 must be in 0..9'),
        (['--png-level', '-1'], '--png-level -1 must be in 0..9'),
        (
            ['--allow-missing', 'colour'],
            "--allow-missing colour: 'colour' is not a role that may be missing: must be among "
            'depth, labels',
        ),
        (['--allow-missing', 'depth,rgb'], "--allow-missing depth,rgb: 'rgb' is not a role"),
        (['--tolerance-ms', '-1'], '--tolerance-ms -1 must be >= 0'),
        (['--max-frames', '-1'], '--max-frames -1 must be >= 0'),
        (['--workers', '0'], '--workers 0 must be >= 1'),
        (['--tolerance-ms', 'inf'], '--tolerance-ms inf must be a finite number >= 0'),
        (['--tolerance-ms', 'nan'], '--tolerance-ms nan must be a finite number >= 0'),
        (['--depth-scale', '-1'], '--depth-scale -1 must be > 0 (metres per unit'),
        (['--depth-scale', '0'], '--depth-scale 0 must be > 0'),
        (['--depth-scale', 'nan'], '--depth-scale nan must be a finite number > 0'),
        (['--typestore', 'ros2_nope'], '--typestore ros2_nope is not one of: '),
        (['--rgb-topic', ''], "--rgb-topic '': an RGB topic is required"),
    ],
)
def test_bad_flag_values_exit_2_naming_the_flag_before_any_bag(tmp_path, capsys, flag, message):
    """Out-of-range flag values: exit 2 like argparse's own errors, one line naming the flag as
    typed; the (missing) bag is never opened and no output directory appears."""
    out = tmp_path / 'ds'
    assert main([str(tmp_path / 'no_such_bag'), '-o', str(out), *flag]) == 2
    err = _one_error_line(capsys)
    assert message in err and 'no_such_bag' not in err
    assert not out.exists()


def test_library_and_config_file_keep_the_setting_names(tmp_path, small_bag, capsys):
    """The library's errors still name the config key; so does the CLI for a bad value in the
    --config YAML (one line naming the file, exit 2 like every user error), unreadable YAML
    included, and a --config path that does not exist."""
    with pytest.raises(ValueError, match='every=0 must be >= 1'):
        load_extract_config(None, overrides={'every': 0})
    with pytest.raises(ValueError, match='png_level=12 must be in 0..9'):
        ExtractConfig(png_level=12).validate()
    cfg = tmp_path / 'extract.yaml'
    cfg.write_text('every: 0\n')
    assert main([str(small_bag), '-o', str(tmp_path / 'ds'), '--config', str(cfg)]) == 2
    err = _one_error_line(capsys)
    assert f'--config {cfg}: every=0 must be >= 1' in err
    cfg.write_text('every: [1\n')  # not YAML
    assert main([str(small_bag), '-o', str(tmp_path / 'ds'), '--config', str(cfg)]) == 2
    assert str(cfg) in _one_error_line(capsys)
    missing = tmp_path / 'missing.yaml'
    assert main([str(small_bag), '-o', str(tmp_path / 'ds'), '--config', str(missing)]) == 2
    assert str(missing) in _one_error_line(capsys)
    assert not (tmp_path / 'ds').exists()


def test_help_shows_the_defaults(capsys):
    """--help names the default preset (depth3dseg) and the other defaults."""
    with pytest.raises(SystemExit) as exit_info:
        main(['--help'])
    assert exit_info.value.code == 0
    text = ' '.join(capsys.readouterr().out.split())
    assert 'default: depth3dseg' in text
    for part in (
        f'default: the preset\'s, {TOPICS["rgb"]}',
        f'default: the preset\'s, {TOPICS["camera_info"]}',
        'pairing tolerance (default 20 ms)',
        'keep every N-th RGB frame (default 1)',
        'default: no limit',
        'default 0 = stored',
        'zlib strategy (default rle)',
        'default ros2_kilted',
        'default void',
    ):
        assert part in text, part


def _reasons(out, role):
    report = json.loads((out / 'manifest.json').read_text())['report']
    (rep,) = report.values()
    t = next(t for t in rep['topics'] if t['role'] == role)
    return t['used'], t['reasons']


def test_camera_info_of_frames_left_out_is_frame_not_extracted(tmp_path, real_dir, capsys):
    """--every 2 on 6 frames: the CameraInfo of the 3 subsampled frames is 'frame not extracted'
    (as their depth is), not 'no partner within tolerance'; that reason stays for a CameraInfo
    no RGB frame pairs with (one 5 s away). --max-frames counts the same way."""
    frames = make_frames(real_dir, 6)
    ts = bag_typestore('sqlite3')
    msgs = frame_messages(ts, frames)
    stray = frames[-1].stamp_ns + 5_000_000_000
    h, w = frames[0].rgb.shape[:2]
    info = camera_info_msg(ts, frames[0].K, w, h, stray)
    msgs.append((stray, TOPICS['camera_info'], 'sensor_msgs/msg/CameraInfo', info))
    bag = write_messages(tmp_path / 'every', ts, msgs)
    out = tmp_path / 'ds'
    assert main([str(bag), '-o', str(out), '--every', '2', '-q']) == 0
    assert _reasons(out, 'rgb') == (3, {'subsampled (--every)': 3})
    assert _reasons(out, 'depth') == (3, {'frame not extracted': 3})
    assert _reasons(out, 'camera_info') == (
        3,
        {'frame not extracted': 3, 'no partner within tolerance': 1},
    )
    out2 = tmp_path / 'ds2'
    assert main([str(bag), '-o', str(out2), '--every', '2', '--max-frames', '2', '-q']) == 0
    assert _reasons(out2, 'rgb') == (2, {'max-frames reached': 1, 'subsampled (--every)': 3})
    assert _reasons(out2, 'camera_info') == (
        2,
        {'frame not extracted': 4, 'no partner within tolerance': 1},
    )
    # a re-run: the written frames' CameraInfo is 'already in dataset', the others unchanged
    assert main([str(bag), '-o', str(out2), '--every', '2', '--max-frames', '2', '-q']) == 0
    assert _reasons(out2, 'camera_info') == (
        0,
        {'already in dataset': 2, 'frame not extracted': 4, 'no partner within tolerance': 1},
    )
    assert capsys.readouterr().err == ''


def test_out_is_an_alias_of_output_beside_out_of_range_labels():
    """--out (as depth3dseg-eval and -train spell it) is -o/--output; --out-of-range-labels, which
    it prefixes, still parses as itself."""
    args = build_parser().parse_args(['b', '--out', 'ds', '--out-of-range-labels', 'refuse'])
    assert args.output == 'ds' and args.out_of_range_labels == 'refuse'


@pytest.mark.parametrize(
    'yaml_text, message',
    [
        ('png_level: 3.7\n', 'png_level=3.7 must be a whole number in 0..9'),
        ('max_frames: true\n', 'max_frames=True must be a finite number >= 0'),
        ('tolerance_ms: abc\n', "tolerance_ms='abc' must be a finite number >= 0"),
        ('tolerance_ms: .inf\n', 'tolerance_ms=inf must be a finite number >= 0'),
        ('depth_scale: -1\n', 'depth_scale=-1 must be > 0'),
    ],
)
def test_config_values_of_the_wrong_type_or_range_name_the_key(
    tmp_path, small_bag, capsys, yaml_text, message
):
    """A --config YAML value that is a string, a bool, a fraction where a count is meant, inf or
    out of range: exit 2, one line naming the file and the key; nothing written."""
    cfg = tmp_path / 'extract.yaml'
    cfg.write_text(yaml_text)
    assert main([str(small_bag), '-o', str(tmp_path / 'ds'), '--config', str(cfg)]) == 2
    err = _one_error_line(capsys)
    assert f'--config {cfg}: {message}' in err, err
    assert not (tmp_path / 'ds').exists()


def test_whole_numbers_from_yaml_become_ints():
    """png_level: 3.0 in a YAML file is the level 3 (an int reaches the PNG writer)."""
    cfg = load_extract_config(None, overrides={'png_level': 3.0, 'every': 2.0, 'depth_scale': 1})
    assert (cfg.png_level, cfg.every, cfg.depth_scale) == (3, 2, 1.0)
    assert isinstance(cfg.png_level, int) and isinstance(cfg.depth_scale, float)
