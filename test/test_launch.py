"""launch/depth3dseg.launch.py (checked with ast: launch/launch_ros are not on pip) and the RViz
config."""

import ast
import importlib.util
from pathlib import Path

import yaml

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
    assert {'model_file', 'namespace', 'params_file', 'image', 'camera_info'} <= declared
    used = {c.args[0].value for c in _calls(tree, 'LaunchConfiguration')}
    assert used <= declared, used - declared


def test_launch_node_action_targets_console_script_with_params_and_remaps():
    tree = ast.parse(LAUNCH.read_text())
    (node,) = _calls(tree, 'Node')
    assert _kw(node, 'executable').value == 'depth3dseg_node'
    assert ast.unparse(_kw(node, 'package')) == 'PACKAGE'
    assert "LaunchConfiguration('namespace')" in ast.unparse(_kw(node, 'namespace'))
    params = _kw(node, 'parameters')
    assert isinstance(params, ast.List) and "LaunchConfiguration('params_file')" in ast.unparse(
        params.elts[0]
    )
    remaps = _kw(node, 'remappings')
    froms = {e.elts[0].value for e in remaps.elts}
    assert {'image', 'camera_info'} <= froms
    # the console script the launch file runs is the one setup.py declares
    assert "'depth3dseg_node = depth3dseg_ros.node.main:main'" in (REPO / 'setup.py').read_text()
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
    assert cloud['Topic']['Value'].endswith('/points')
    assert cloud['Channel Name'] == 'label' and cloud['Color Transformer'] == 'Intensity'
    assert displays['RGB cloud']['Color Transformer'] == 'RGB8'
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
