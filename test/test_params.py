"""Node parameters: one declaration (node/params.py), defaults in config/depth3dseg.yaml,
docs/node.md."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from depth3dseg_ros.node.params import SPECS, NodeParams, defaults, validate

REPO = Path(__file__).resolve().parents[1]


def test_yaml_defaults_equal_declared_defaults_under_wildcard_key():
    doc = yaml.safe_load((REPO / 'config' / 'depth3dseg.yaml').read_text())
    assert list(doc) == ['/**']
    values = doc['/**']['ros__parameters']
    assert values == defaults()
    for name, value in values.items():  # same types (a 0 where 0.0 is declared fails in rclpy)
        assert type(value) is type(defaults()[name]), name


def test_docs_document_every_parameter():
    text = (REPO / 'docs' / 'node.md').read_text()
    for spec in SPECS:
        assert f'`{spec.name}`' in text, spec.name


def test_defaults_validate():
    p = validate({})
    assert isinstance(p, NodeParams)
    assert p.input_reliability == 'best_effort' and p.output_reliability == 'reliable'  # C24
    assert p.input_depth == 1  # C26
    assert p.input_size is None
    assert validate({'input_width': 320, 'input_height': 240}).input_size == (320, 240)


@pytest.mark.parametrize(
    'name,value,words',
    [
        ('device', 'gpu', ["device='gpu'", "'auto', 'cuda', 'cpu'"]),
        ('label_source', '4d', ["label_source='4d'", "'2d', '3d', 'fused'"]),
        ('depth_encoding', '16UC2', ['depth_encoding', "'32FC1', '16UC1'"]),
        ('output_resolution', 'full', ['output_resolution', "'network', 'camera'"]),
        ('input_reliability', 'RELIABLE', ['input_reliability', "'best_effort', 'reliable'"]),
        ('overlay_alpha', 1.5, ['overlay_alpha=1.5', '<= 1.0']),
        ('cloud_stride', 0, ['cloud_stride=0', '>= 1']),
        ('sync_slop', -0.01, ['sync_slop=-0.01', '>= 0']),
        ('max_depth', 0.0, ['max_depth=0.0']),
        ('max_depth', float('inf'), ['max_depth=inf', '<= 1000.0']),  # was accepted, then failed
        ('half', 'yes', ['half', 'bool']),
        ('input_depth', 1.5, ['input_depth', 'integer']),
    ],
)
def test_bad_value_names_parameter_and_allowed_values(name, value, words):
    with pytest.raises(ValueError) as e:
        validate({name: value})
    for w in words:
        assert w in str(e.value)


def test_half_set_input_size_and_unknown_names_rejected():
    with pytest.raises(ValueError, match='input_width=320 and input_height=0'):
        validate({'input_width': 320})
    with pytest.raises(ValueError, match='unknown parameter'):
        validate({'cloud_strid': 2})


def test_node_start_stops_on_bad_value_with_message():
    """Real rclpy start-up: `depth3dseg_node --ros-args -p device:=gpu` exits non-zero naming
    it."""
    cmd = [
        sys.executable,
        '-m',
        'depth3dseg_ros.node.main',
        '--ros-args',
        '-p',
        'device:=gpu',
        '-p',
        'model_file:=/nonexistent.pt',
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "device='gpu'" in out and "'auto', 'cuda', 'cpu'" in out
    assert 'Traceback' not in out
    # an integer for a float parameter is fine; a string is refused, naming the parameter
    cmd = [
        sys.executable,
        '-m',
        'depth3dseg_ros.node.main',
        '--ros-args',
        '-p',
        'max_depth:=10',
        '-p',
        'overlay_alpha:=abc',
        '-p',
        'model_file:=/nonexistent.pt',
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    assert (
        r.returncode == 2
        and "overlay_alpha='abc' must be a number" in out
        and 'max_depth' not in out
    )


def test_params_file_applies_under_any_namespace_and_node_name(tmp_path):
    """The shipped YAML parses with rclpy, and its `/**` key reaches a node renamed into a
    namespace:
    a copy with device: gpu stops that node's start-up naming the parameter."""
    text = (REPO / 'config' / 'depth3dseg.yaml').read_text()
    assert '    device: "auto"' in text
    bad = tmp_path / 'bad.yaml'
    bad.write_text(text.replace('    device: "auto"', '    device: "gpu"'))
    base = [
        sys.executable,
        '-m',
        'depth3dseg_ros.node.main',
        '--ros-args',
        '-r',
        '__ns:=/robot1',
        '-r',
        '__node:=seg',
    ]
    r = subprocess.run(
        base + ['--params-file', str(bad)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "device='gpu'" in r.stdout + r.stderr
    r = subprocess.run(
        base
        + [
            '--params-file',
            str(REPO / 'config' / 'depth3dseg.yaml'),
            '-p',
            'model_file:=/nonexistent.pt',
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        r.returncode == 2 and "model_file='/nonexistent.pt': no such file" in r.stdout + r.stderr
    )


def _node_cmd(*args):
    return [sys.executable, '-m', 'depth3dseg_ros.node.main', *args]


def test_unknown_names_get_the_closest_known_name():
    from depth3dseg_ros.node.params import unknown_names

    known = [s.name for s in SPECS] + ['use_sim_time']
    assert unknown_names(
        ['lable_source', 'device', 'use_sim_time', 'cloud_strid', 'xyzzy'], known
    ) == [('cloud_strid', 'cloud_stride'), ('lable_source', 'label_source'), ('xyzzy', None)]
    assert unknown_names(known, known) == []


@pytest.mark.parametrize('flag', ['--help', '-h'])
def test_help_prints_usage_with_every_parameter_and_exits_0_without_rclpy(flag):
    """`depth3dseg_node --help` used to start the node and run until killed. Now: usage with every
    parameter of node/params.py and its default, how to pass them, exit 0; rclpy not even
    imported."""
    code = (
        'import sys; from depth3dseg_ros.node.main import main; rc = main(sys.argv); '
        "print('rclpy imported:', 'rclpy' in sys.modules); sys.exit(rc)"
    )
    r = subprocess.run(
        [sys.executable, '-c', code, '--ros-args', '-p', 'device:=cpu', '--', flag],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert out.startswith('usage: depth3dseg_node') and 'rclpy imported: False' in out
    lines = out.splitlines()
    for spec in SPECS:
        line = next((ln for ln in lines if ln.split()[:1] == [spec.name]), None)
        assert line is not None, spec.name
        assert spec.doc in line
    assert any(ln.split()[:2] == ['label_source', 'fused'] for ln in lines)
    assert any(ln.split()[:2] == ['publish_points', 'true'] for ln in lines)
    assert [ln.split()[0] for ln in lines if ln.endswith('[start-up only]')] == [
        s.name for s in SPECS if not s.dynamic
    ]
    for words in (
        '--ros-args -p',
        '--params-file config/depth3dseg.yaml',
        'docs/node.md',
        '~/points',
        'camera_info',
    ):
        assert words in out, words
    # the console entry point (python -m) exits on -h too
    r = subprocess.run(_node_cmd(flag), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and 'torch_threads' in r.stdout


def test_scan_args_help_only_outside_ros_args_and_params_files_only_inside():
    from depth3dseg_ros.node.main import scan_args

    assert scan_args(
        [
            'prog',
            '--ros-args',
            '-p',
            'a:=1',
            '--params-file',
            'x.yaml',
            '--',
            '--params-file',
            'y.yaml',
        ]
    ) == (False, ['x.yaml'], ['--params-file', 'y.yaml'])
    assert scan_args(
        ['prog', '--ros-args', '--params-file', 'x.yaml', '--ros-args', '--params-file']
    ) == (False, ['x.yaml', None], [])
    assert scan_args(['prog', '--ros-args', '-r', '__node:=-h']) == (False, [], [])
    assert scan_args(['prog', '-h', '--ros-args']) == (True, [], [])


def test_arguments_outside_ros_args_are_refused(capsys):
    """`depth3dseg_node -p device:=cpu` (no --ros-args) used to start with the -p silently
    ignored."""
    from depth3dseg_ros.node.main import main, scan_args

    assert scan_args(['prog', '-p', 'device:=cpu'])[2] == ['-p', 'device:=cpu']
    assert scan_args(['prog', '--ros-args', '-p', 'a:=1', '--', 'extra', '-h'])[2] == ['extra']
    assert scan_args(['prog', '--help', '--ros-args', '-r', '__node:=x'])[2] == []
    assert main(['prog', '-p', 'device:=cpu']) == 2  # refused before rclpy.init
    err = capsys.readouterr().err
    assert "unexpected arguments ['-p', 'device:=cpu']" in err and 'go after --ros-args' in err


def test_missing_params_file_is_one_line_and_exit_2(tmp_path):
    """A missing --params-file used to end in an RCLError traceback from rclpy.init."""
    missing = tmp_path / 'nope.yaml'
    r = subprocess.run(
        _node_cmd('--ros-args', '-p', 'device:=cpu', '--params-file', str(missing)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert r.stderr.strip() == f'depth3dseg_node: error: --params-file {missing} does not exist'
    assert r.stdout == ''
    r = subprocess.run(
        _node_cmd('--ros-args', '--params-file', str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        r.returncode == 2
        and r.stderr.strip() == f'depth3dseg_node: error: --params-file {tmp_path} is not a file'
    )
    r = subprocess.run(
        _node_cmd('--ros-args', '--params-file'), capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and 'error: --params-file needs a path' in r.stderr


def test_unparsable_ros_argument_is_one_line_and_exit_2():
    r = subprocess.run(
        _node_cmd('--ros-args', '-p', 'device'), capture_output=True, text=True, timeout=60
    )
    out = r.stdout + r.stderr
    assert r.returncode == 2 and 'Traceback' not in out
    assert "depth3dseg_node: error: bad ROS arguments: " in out and "'-p device'" in out


def test_misspelt_parameter_warns_with_closest_name_before_validation():
    """`-p lable_source:=2d` was silently ignored. Now a warning names it and the closest known
    name (real rclpy start-up; the missing model then stops it, so the warning comes before any
    check); parameters rclpy declares itself (use_sim_time) and the shipped YAML give no
    warning."""
    r = subprocess.run(
        _node_cmd(
            '--ros-args',
            '--params-file',
            str(REPO / 'config' / 'depth3dseg.yaml'),
            '-p',
            'lable_source:=2d',
            '-p',
            'use_sim_time:=true',
            '-p',
            'xyzzy:=3',
            '-p',
            'model_file:=/nonexistent.pt',
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "model_file='/nonexistent.pt': no such file" in out
    assert "unknown parameter 'lable_source' is ignored; did you mean 'label_source'?" in out
    assert "unknown parameter 'xyzzy' is ignored (" in out
    assert out.count('unknown parameter') == 2, out


def test_c44_updated_applies_dynamic_changes_and_refuses_like_start_up():
    """Run-time changes (C44) go through the start-up rules: the same messages, start-up-only
    refused."""
    from depth3dseg_ros.node.params import STARTUP_ONLY, updated

    p = validate({})
    assert updated(p, {}) is p
    q = updated(
        p, {'overlay_alpha': 0.8, 'max_depth': 2, 'publish_points': False, 'label_source': '2d'}
    )
    assert (q.overlay_alpha, q.max_depth, q.publish_points, q.label_source) == (
        0.8,
        2.0,
        False,
        '2d',
    )
    assert isinstance(q.max_depth, float) and p.overlay_alpha == 0.5  # frozen: p unchanged
    for name, value in (
        ('max_depth', -3.0),
        ('label_source', 'bogus'),
        ('cloud_stride', 0),
        ('overlay_alpha', 'x'),
    ):
        with pytest.raises(ValueError) as run_time:
            updated(p, {name: value})
        with pytest.raises(ValueError) as start_up:
            validate({name: value})
        assert str(run_time.value) == str(start_up.value)
    for spec in SPECS:
        if not spec.dynamic:
            with pytest.raises(
                ValueError, match=f'parameter {spec.name} is {STARTUP_ONLY} to change it'
            ):
                updated(p, {spec.name: spec.default})
    with pytest.raises(ValueError, match='unknown parameter'):
        updated(p, {'cloud_strid': 2})


def test_c44_start_up_only_set_is_the_one_documented():
    """Model, device, precision, input size, QoS, compressed input, the measured-depth
    subscription, the geometry model and its weight, and torch threads are read at start-up;
    docs/node.md's "changes" column says so for each parameter."""
    startup = {s.name for s in SPECS if not s.dynamic}
    assert startup == {
        'model_file',
        'device',
        'half',
        'backend',
        'input_width',
        'input_height',
        'input_reliability',
        'input_depth',
        'output_reliability',
        'output_depth',
        'use_compressed',
        'use_measured_depth',
        'geometry_model',
        'geometry_weight',
        'torch_threads',
    }
    text = (REPO / 'docs' / 'node.md').read_text()
    for spec in SPECS:
        row = next(ln for ln in text.splitlines() if ln.startswith(f'| `{spec.name}` |'))
        assert ('| start-up only |' if spec.name in startup else '| run time |') in row, row


def test_c44_descriptor_ranges_read_only_and_description():
    from depth3dseg_ros.node.params import SPEC_BY_NAME, descriptor

    for spec in SPECS:
        d = descriptor(spec)
        assert (
            d.name == spec.name and d.description == spec.doc and d.read_only == (not spec.dynamic)
        )
        assert d.dynamic_typing == isinstance(spec.default, float)
    d = descriptor(SPEC_BY_NAME['overlay_alpha'])
    assert [(r.from_value, r.to_value, r.step) for r in d.floating_point_range] == [
        (0.0, 1.0, 0.0)
    ]
    d = descriptor(SPEC_BY_NAME['sync_slop'])
    assert d.floating_point_range[0].from_value == 0.0 and d.floating_point_range[
        0
    ].to_value == float('inf')
    d = descriptor(SPEC_BY_NAME['cloud_stride'])
    assert [(r.from_value, r.to_value, r.step) for r in d.integer_range] == [(1, 2**63 - 1, 1)]
    d = descriptor(SPEC_BY_NAME['label_source'])
    assert (
        not d.integer_range
        and not d.floating_point_range
        and "['2d', '3d', 'fused']" in d.additional_constraints
    )
    assert 'restart the node' in descriptor(SPEC_BY_NAME['model_file']).additional_constraints


def _start_up_failure(given: str) -> str:
    """The one 'start-up failed' line of a node started with ``-p given`` (exit 2, no
    traceback)."""
    r = subprocess.run(
        _node_cmd('--ros-args', '-p', 'device:=cpu', '-p', given),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and 'Traceback' not in r.stderr, r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if 'start-up failed' in ln]
    return line


@pytest.mark.parametrize(
    'given,declared',
    [
        ('cloud_stride:=2.0', 'INTEGER'),
        ('publish_points:=1', 'BOOL'),
        ('model_file:=123', 'STRING'),
    ],
)
def test_c39_wrong_type_stops_start_up_with_one_line_naming_both_types(given, declared):
    line = _start_up_failure(given)
    name = given.split(':=')[0]
    assert f"'{name}'" in line and f"expecting type '{declared}'" in line, line


@pytest.mark.parametrize('given,kind', [('model_file:=[]', 'string'), ('max_depth:=[]', 'number')])
def test_c39_empty_list_stops_start_up_naming_the_parameter_and_its_type(given, kind):
    """`:=[]` leaves a parameter without a value (rclpy: 'not initialized', or None): one line
    naming the parameter and the type it needs, exit 2."""
    line = _start_up_failure(given)
    name = given.split(':=')[0]
    assert f'parameter {name} has no value' in line and f'must be a {kind}' in line, line


@pytest.mark.timeout(180)
def test_c39_integers_for_double_parameters_are_used_as_floats(tmp_path):
    import signal
    import time

    from nodeutil import make_tiny_model

    model = make_tiny_model(tmp_path / 'tiny.pt')
    params = tmp_path / 'p.yaml'
    params.write_text(
        yaml.safe_dump({'/**': {'ros__parameters': {'overlay_alpha': 1, 'sync_slop': 0}}})
    )
    proc = subprocess.Popen(
        _node_cmd(
            '--ros-args',
            '--params-file',
            str(params),
            '-p',
            f'model_file:={model}',
            '-p',
            'device:=cpu',
            '-p',
            'max_depth:=5',
            '-p',
            'diagnostics_period:=1',
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out = ''
    try:
        end = time.monotonic() + 120
        while time.monotonic() < end and 'label_source=' not in out and proc.poll() is None:
            out += proc.stdout.readline()
        assert 'label_source=' in out, out  # started: the integers were accepted
        proc.send_signal(signal.SIGTERM)
        out += proc.communicate(timeout=20)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and 'Traceback' not in out, out
