"""launch/depth3dseg.launch.py (checked with ast: launch/launch_ros are not on pip) and the RViz
config."""

import ast
import importlib.util
import sys
import types
from pathlib import Path

import pytest
import yaml

from depth3dseg_ros.node.rviz_config import (
    launch_flag,
    main as rviz_main,
    namespaced_rviz_config,
    node_overrides,
    normalize_namespace,
    write_namespaced_rviz,
)

REPO = Path(__file__).resolve().parents[1]
LAUNCH = REPO / 'launch' / 'depth3dseg.launch.py'


def _calls(tree, name):
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, 'id', getattr(n.func, 'attr', None)) == name
    ]


def _kw(call, key):
    return next(k.value for k in call.keywords if k.arg == key)


def test_launch_file_declares_arguments_and_uses_real_launch_api():
    tree = ast.parse(LAUNCH.read_text())
    imports = {
        (n.module, a.name)
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom)
        for a in n.names
    }
    assert ('launch', 'LaunchDescription') in imports
    assert ('launch.actions', 'DeclareLaunchArgument') in imports
    assert ('launch.substitutions', 'LaunchConfiguration') in imports
    assert ('launch_ros.actions', 'Node') in imports
    assert any(
        isinstance(n, ast.FunctionDef) and n.name == 'generate_launch_description'
        for n in tree.body
    )
    declared = {c.args[0].value for c in _calls(tree, 'DeclareLaunchArgument')}
    assert {'model_file', 'namespace', 'params_file', 'image', 'camera_info', 'depth'} <= declared
    assert {'rgbd', 'geometry_model'} <= declared
    assert {'rviz', 'rviz_config', 'cloud_rgb', 'managed'} <= declared
    used = {
        c.args[0].value
        for name in ('LaunchConfiguration', 'arg')  # arg(name): LaunchConfiguration(name).perform
        for c in _calls(tree, name)
        if isinstance(c.args[0], ast.Constant)
    }
    assert used <= declared, used - declared
    assert {'rviz', 'rviz_config', 'cloud_rgb', 'managed'} <= used


def test_launch_node_action_targets_console_script_with_params_and_remaps():
    tree = ast.parse(LAUNCH.read_text())
    nodes = {
        # the node's executable is chosen by managed:= (rviz_config.node_executable)
        getattr(_kw(n, 'executable'), 'value', 'depth3dseg_node'): n
        for n in _calls(tree, 'Node')
    }
    assert sorted(nodes) == ['depth3dseg_node', 'rviz2']
    assert (
        ast.unparse(_kw(nodes['depth3dseg_node'], 'executable'))
        == "node_executable(arg('managed'))"
    )
    node = nodes['depth3dseg_node']
    assert ast.unparse(_kw(node, 'package')) == 'PACKAGE'
    assert "LaunchConfiguration('namespace')" in ast.unparse(_kw(node, 'namespace'))
    params = _kw(node, 'parameters')
    assert isinstance(params, ast.List) and "LaunchConfiguration('params_file')" in ast.unparse(
        params.elts[0]
    )
    remaps = _kw(node, 'remappings')
    froms = {e.elts[0].value for e in remaps.elts}
    assert {'image', 'camera_info', 'depth'} <= froms
    # the console script the launch file runs is the one setup.py declares
    setup_py = (REPO / 'setup.py').read_text()
    assert "'depth3dseg_node = depth3dseg_ros.node.main:main'" in setup_py
    assert "'depth3dseg_lifecycle_node = depth3dseg_ros.node.lifecycle:main'" in setup_py
    assert (REPO / 'config' / 'depth3dseg.yaml').is_file()


def test_launch_file_builds_description_when_launch_is_importable():
    """Only on a ROS install (launch/launch_ros are not on PyPI): build the LaunchDescription."""
    if importlib.util.find_spec('launch_ros') is None:
        compile(LAUNCH.read_text(), str(LAUNCH), 'exec')  # syntax at least, here
        return
    spec = importlib.util.spec_from_file_location('d3s_launch', LAUNCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ld = mod.generate_launch_description()
    names = {a.name for a in ld.entities if type(a).__name__ == 'DeclareLaunchArgument'}
    assert {'model_file', 'namespace', 'params_file', 'image', 'camera_info'} <= names


def test_rviz_config_shows_overlay_depth_and_labelled_cloud():
    cfg = yaml.safe_load((REPO / 'config' / 'depth3dseg.rviz').read_text())
    vm = cfg['Visualization Manager']
    displays = {d['Name']: d for d in vm['Displays']}
    assert displays['Overlay']['Class'] == 'rviz_default_plugins/Image'
    # image_transport layout (issue 14): <output>/image, its camera_info beside it
    assert displays['Overlay']['Topic']['Value'] == '/depth3dseg/overlay/image'
    assert displays['Depth']['Topic']['Value'] == '/depth3dseg/depth/image'
    assert displays['Mask']['Class'] == 'rviz_default_plugins/Image'
    assert displays['Mask']['Topic']['Value'] == '/depth3dseg/mask/image'
    cloud = displays['Labelled cloud']
    assert cloud['Class'] == 'rviz_default_plugins/PointCloud2'
    assert cloud['Topic']['Value'] == '/depth3dseg/points'
    # class colours (issue 14): RGB8 on the rgb field, which holds them with cloud_rgb: class
    assert cloud['Channel Name'] == 'rgb' and cloud['Color Transformer'] == 'RGB8'
    assert cloud['Enabled'] is True and cloud['Value'] is True
    ids = displays['Label ids']
    assert ids['Channel Name'] == 'label' and ids['Color Transformer'] == 'Intensity'
    assert ids['Topic']['Value'] == '/depth3dseg/points' and ids['Enabled'] is False
    # RViz and our publishers agree on QoS (C24): reliable display, reliable publisher
    for d in displays.values():
        if 'Topic' in d:
            assert d['Topic']['Reliability Policy'] == 'Reliable'
    assert vm['Global Options']['Fixed Frame'] == 'camera_color_optical_frame'


def test_rviz_fixed_frame_is_the_sample_bags_optical_frame(real_bag):
    from depth3dseg_ros.bags.reader import BagReader

    cfg = yaml.safe_load((REPO / 'config' / 'depth3dseg.rviz').read_text())
    with BagReader(real_bag) as bag:
        topic, msgtype, _, raw = next(bag.messages(['/camera/color/image_raw']))
        frame = bag.deserialize(raw, msgtype).header.frame_id
    assert cfg['Visualization Manager']['Global Options']['Fixed Frame'] == frame


# -- issue 14: RViz topics follow the launch namespace; cloud_rgb with rviz -------------------
RVIZ = REPO / 'config' / 'depth3dseg.rviz'


def _topics(text):
    vm = yaml.safe_load(text)['Visualization Manager']
    return [d['Topic']['Value'] for d in vm['Displays'] if 'Topic' in d]


@pytest.mark.parametrize(
    'ns,prefix',
    [
        ('front', '/front'),
        ('/front/', '/front'),
        ('robot1/cam_left', '/robot1/cam_left'),
        ('', ''),
    ],
)
def test_namespaced_rviz_config_renames_every_topic_and_nothing_else(ns, prefix):
    text = RVIZ.read_text()
    out = namespaced_rviz_config(text, ns)
    before, after = _topics(text), _topics(out)
    assert len(before) == 5 and all(t.startswith('/depth3dseg/') for t in before)
    assert after == [prefix + t for t in before]
    changed = [(a, b) for a, b in zip(text.splitlines(), out.splitlines()) if a != b]
    assert len(out.splitlines()) == len(text.splitlines())
    assert len(changed) == (0 if not prefix else 6)
    assert all(a.strip().startswith('Value: /depth3dseg/') for a, _ in changed[1:])
    if prefix:  # the header comment names the namespace instead of "no namespace"
        assert changed[0][1].startswith('# RViz2 display config for depth3dseg_node:')
        assert f"in namespace '{prefix}' ({prefix}/depth3dseg/...)" in changed[0][1]


def test_bad_namespace_and_launch_arguments_are_named():
    assert normalize_namespace('/') == '' and normalize_namespace('a//b') == '/a/b'
    for bad in ('front cam', '1cam', 'a/b-c'):
        with pytest.raises(ValueError, match=f'namespace={bad!r}'):
            normalize_namespace(bad)
    with pytest.raises(ValueError, match="node_name='de-pth'"):
        namespaced_rviz_config('', 'x', node_name='de-pth')
    assert [launch_flag(v, 'rviz') for v in ('true', 'True', '1', 'false', '', 'off')] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]
    with pytest.raises(ValueError, match="launch argument rviz:='maybe' must be true or false"):
        launch_flag('maybe', 'rviz')
    assert node_overrides('false', '') == {}  # the params file's value stands
    assert node_overrides('true', '') == {'cloud_rgb': 'class'}  # RViz shows class colours
    assert node_overrides('true', 'camera') == {'cloud_rgb': 'camera'}
    assert node_overrides('false', 'class') == {'cloud_rgb': 'class'}
    with pytest.raises(ValueError, match="cloud_rgb:='labels' must be camera, class or ''"):
        node_overrides('true', 'labels')
    # an RGB-D camera: measured depth, and the geometry model of the late fusion when named
    assert node_overrides('false', '', 'true') == {'use_measured_depth': True}
    assert node_overrides('false', '', 'true', ' g.pt ') == {
        'use_measured_depth': True,
        'geometry_model': 'g.pt',
    }
    assert node_overrides('false', '', 'false', 'g.pt') == {'geometry_model': 'g.pt'}
    with pytest.raises(ValueError, match="launch argument rgbd:='rgb-d' must be true or false"):
        node_overrides('false', '', 'rgb-d')


def test_write_namespaced_rviz_and_cli(tmp_path, capsys):
    assert write_namespaced_rviz(RVIZ, '') == str(RVIZ)  # no namespace: the file itself
    a = write_namespaced_rviz(RVIZ, 'front', tmp_path)
    b = write_namespaced_rviz(RVIZ, 'rear', tmp_path)
    assert a != b and Path(a).parent == tmp_path
    assert set(_topics(Path(a).read_text())) == {
        '/front/depth3dseg/overlay/image',
        '/front/depth3dseg/mask/image',
        '/front/depth3dseg/depth/image',
        '/front/depth3dseg/points',
    }
    assert rviz_main(['--namespace', 'front', '--config', str(RVIZ)]) == 0
    assert capsys.readouterr().out == Path(a).read_text()
    assert rviz_main(['--namespace', 'a b', '--config', str(RVIZ)]) == 2
    assert "error: namespace='a b'" in capsys.readouterr().err


class _Rec:
    """A stand-in launch action/substitution: records its arguments."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class _Config(_Rec):
    def perform(self, context):
        return context.launch_configurations[self.args[0]]


def _load_launch_with_stubs(monkeypatch, share):
    """Import the launch file with launch / launch_ros / ament_index stand-ins (not on PyPI)."""
    stubs = {
        'launch': {'LaunchDescription': _Rec},
        'launch.actions': {
            'DeclareLaunchArgument': _Rec,
            'OpaqueFunction': _Rec,
            'SetEnvironmentVariable': _Rec,
        },
        'launch.substitutions': {'EnvironmentVariable': _Rec, 'LaunchConfiguration': _Config},
        'launch_ros': {},
        'launch_ros.actions': {'Node': _Rec},
        'launch_ros.parameter_descriptions': {'ParameterValue': _Rec},
        'ament_index_python.packages': {'get_package_share_directory': lambda pkg: str(share)},
    }
    for name, attrs in stubs.items():
        monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(**attrs))
    spec = importlib.util.spec_from_file_location('d3s_launch_stubbed', LAUNCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_launch_file_runs_node_and_namespaced_rviz(monkeypatch, tmp_path):
    """The launch file's own code, run against stand-ins: rviz:=true adds rviz2 with a copy of
    the RViz file in the launch namespace and the node gets cloud_rgb: class."""
    share = tmp_path / 'share'
    (share / 'config').mkdir(parents=True)
    (share / 'config' / 'depth3dseg.rviz').write_text(RVIZ.read_text())
    monkeypatch.setattr('tempfile.tempdir', str(tmp_path))
    mod = _load_launch_with_stubs(monkeypatch, share)
    ld = mod.generate_launch_description()
    (entities,) = ld.args
    declared = {
        e.args[0]: e.kwargs['default_value'] for e in entities if 'default_value' in e.kwargs
    }
    assert declared['rviz'] == 'false' and declared['cloud_rgb'] == ''
    assert declared['managed'] == 'false'
    assert declared['rviz_config'] == str(share / 'config' / 'depth3dseg.rviz')
    (opaque,) = [e for e in entities if 'function' in e.kwargs]
    base = {k: v for k, v in declared.items()}
    ctx = types.SimpleNamespace(launch_configurations=dict(base, namespace='front'))
    (node,) = opaque.kwargs['function'](ctx)  # rviz false: the node alone, no override
    assert node.kwargs['executable'] == 'depth3dseg_node' and node.kwargs['parameters'][2] == {}
    ctx.launch_configurations['rviz'] = 'true'
    node, rviz = opaque.kwargs['function'](ctx)
    assert node.kwargs['parameters'][2] == {'cloud_rgb': 'class'}
    assert rviz.kwargs['executable'] == 'rviz2' and rviz.kwargs['arguments'][0] == '-d'
    path = Path(rviz.kwargs['arguments'][1])
    assert path.parent == tmp_path
    assert all(t.startswith('/front/depth3dseg/') for t in _topics(path.read_text()))
    ctx.launch_configurations.update(namespace='', cloud_rgb='camera')
    node, rviz = opaque.kwargs['function'](ctx)
    assert node.kwargs['parameters'][2] == {'cloud_rgb': 'camera'}
    assert rviz.kwargs['arguments'][1] == declared['rviz_config']  # no namespace: as shipped
    ctx.launch_configurations.update(managed='true', rviz='false')
    (node,) = opaque.kwargs['function'](ctx)  # managed: the lifecycle node, same wiring
    assert node.kwargs['executable'] == 'depth3dseg_lifecycle_node'
    assert node.kwargs['name'] == 'depth3dseg' and node.kwargs['remappings'][0][0] == 'image'
    ctx.launch_configurations.update(rgbd='true', geometry_model='/m/geo.pt')
    (node,) = opaque.kwargs['function'](ctx)
    assert node.kwargs['parameters'][2] == {
        'cloud_rgb': 'camera',
        'use_measured_depth': True,
        'geometry_model': '/m/geo.pt',
    }
    remaps = {k: v.perform(ctx) for k, v in node.kwargs['remappings']}
    assert remaps['depth'] == declared['depth'] == '/camera/aligned_depth_to_color/image_raw'
    ctx.launch_configurations['managed'] = 'maybe'
    with pytest.raises(ValueError, match="launch argument managed:='maybe' must be true or false"):
        opaque.kwargs['function'](ctx)
