"""Packaging (issue 2): ament_python layout, data_files completeness, entry points, colcon build.

`colcon build` itself runs here (colcon-common-extensions from pip); `ros2 launch` cannot, so the
install tree is checked for everything it would need.
"""

import ast
import importlib
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PKG = 'depth3dseg_ros'


def _setup_kwargs():
    """Evaluate setup.py's setup(...) call arguments without running setuptools."""
    import setuptools

    captured = {}
    orig = setuptools.setup
    setuptools.setup = lambda **kw: captured.update(kw)
    cwd = os.getcwd()
    try:
        os.chdir(REPO)
        src = (REPO / 'setup.py').read_text()
        exec(
            compile(src, 'setup.py', 'exec'),
            {'__name__': '__main__', '__file__': str(REPO / 'setup.py')},
        )
    finally:
        setuptools.setup = orig
        os.chdir(cwd)
    return captured


def test_package_xml_is_format3_ament_python_with_deps():
    root = ET.parse(REPO / 'package.xml').getroot()
    assert root.get('format') == '3'
    assert root.findtext('name') == PKG
    assert root.find('export/build_type').text == 'ament_python'
    deps = {e.text for e in root if e.tag.endswith('depend')}
    for dep in [
        'rclpy',
        'sensor_msgs',
        'std_msgs',
        'builtin_interfaces',
        'diagnostic_msgs',
        'lifecycle_msgs',
        'rviz2',
        'python3-numpy',
        'python3-opencv',
        'python3-pytest',
    ]:
        assert dep in deps, dep
    email = root.find('maintainer').get('email')
    assert '@' in email and '.' in email.split('@')[1] and len(email.split('.')[-1]) >= 2


def test_data_files_list_every_launch_config_model_file():
    kw = _setup_kwargs()
    installed = {f for _, files in kw['data_files'] for f in files}
    on_disk = {
        str(p.relative_to(REPO))
        for d in ('launch', 'config', 'models')
        for p in (REPO / d).glob('*')
        if p.is_file()
    }
    missing = on_disk - installed
    assert not missing, f'not installed by setup.py data_files: {sorted(missing)}'
    assert 'package.xml' in installed and f'resource/{PKG}' in installed


def test_every_console_script_resolves_to_a_callable():
    kw = _setup_kwargs()
    scripts = kw['entry_points']['console_scripts']
    names = {s.split('=')[0].strip() for s in scripts}
    assert {
        'depth3dseg_node',
        'depth3dseg_lifecycle_node',
        'depth3dseg-extract',
        'depth3dseg-train',
        'depth3dseg-eval',
        'depth3dseg-replay',
        'depth3dseg-synth',
        'depth3dseg-synth-cycles',
    } <= names
    for spec in scripts:
        target = spec.split('=')[1].strip()
        mod, func = target.split(':')
        assert callable(getattr(importlib.import_module(mod), func)), target


def test_setup_cfg_puts_executables_where_ros2_run_looks():
    text = (REPO / 'setup.cfg').read_text()
    assert f'install_scripts=$base/lib/{PKG}' in text
    assert f'script_dir=$base/lib/{PKG}' in text


@pytest.mark.timeout(300)
def test_colcon_build_install_tree(tmp_path):
    colcon = Path(sys.executable).parent / 'colcon'
    assert colcon.exists(), 'colcon-common-extensions missing from the venv (requirements.txt)'
    src = tmp_path / 'ws' / 'src' / PKG
    ignore = shutil.ignore_patterns(
        '.venv',
        '.venv-render',
        'data',
        '.git',
        'build',
        'install',
        'log',
        '__pycache__',
        '*.egg-info',
        '.pytest_cache',
        '.hypothesis',
        'runs',
        'demo_out',
    )
    shutil.copytree(REPO, src, ignore=ignore)
    ws = tmp_path / 'ws'
    env = {k: v for k, v in os.environ.items() if not k.startswith('COLCON')}
    r = subprocess.run(
        [str(colcon), 'build', '--base-paths', 'src'],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert 'Failed to parse ROS package manifest' not in r.stderr
    share = ws / 'install' / PKG / 'share' / PKG
    assert (share / 'package.xml').is_file()
    for d in ('launch', 'config', 'models'):
        want = sorted(p.name for p in (REPO / d).iterdir() if p.is_file())
        got = sorted(p.name for p in (share / d).iterdir())
        assert want and got == want, (d, got, want)
    marker = ws / 'install' / PKG / 'share' / 'ament_index' / 'resource_index' / 'packages' / PKG
    assert marker.is_file()
    lib = ws / 'install' / PKG / 'lib' / PKG
    for exe in (
        'depth3dseg_node',
        'depth3dseg_lifecycle_node',
        'depth3dseg-extract',
        'depth3dseg-train',
        'depth3dseg-eval',
        'depth3dseg-replay',
    ):
        assert (lib / exe).is_file() and os.access(lib / exe, os.X_OK), exe
    # The ament_python hook sets AMENT_PREFIX_PATH so get_package_share_directory works.
    hooks = list((ws / 'install' / PKG / 'share' / PKG / 'hook').glob('ament_prefix_path.*'))
    assert hooks, 'ament_prefix_path hook missing: package degraded to plain python'


def test_launch_file_is_valid_python():
    for f in (REPO / 'launch').glob('*.launch.py'):
        tree = ast.parse(f.read_text())
        assert any(
            isinstance(n, ast.FunctionDef) and n.name == 'generate_launch_description'
            for n in tree.body
        ), f
