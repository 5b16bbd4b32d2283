"""The core is pure (docs/ARCHITECTURE.md): importing every depth3dseg_ros.core module loads
neither rclpy nor rosbags (checked in a fresh interpreter, so other tests' imports cannot hide a
leak)."""

import pkgutil
import subprocess
import sys

import depth3dseg_ros.core as core

SCRIPT = r'''
import importlib, pkgutil, sys
import depth3dseg_ros.core as core
names = sorted(m.name for m in pkgutil.iter_modules(core.__path__, core.__name__ + '.'))
for name in names:
    importlib.import_module(name)
leaks = sorted(m for m in sys.modules if m.split('.')[0] in ('rclpy', 'rosbags'))
print('MODULES', ' '.join(names))
print('LEAKS', ' '.join(leaks))
'''


def test_core_imports_neither_rclpy_nor_rosbags():
    expected = {m.name for m in pkgutil.iter_modules(core.__path__, core.__name__ + '.')}
    assert {
        'depth3dseg_ros.core.model',
        'depth3dseg_ros.core.pointnet',
        'depth3dseg_ros.core.inference',
        'depth3dseg_ros.core.modelfile',
        'depth3dseg_ros.core.geometry',
    } <= expected
    proc = subprocess.run(
        [sys.executable, '-c', SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    lines = dict(
        line.split(' ', 1) if ' ' in line else (line, '') for line in proc.stdout.splitlines()
    )
    assert set(lines['MODULES'].split()) == expected
    assert lines['LEAKS'].strip() == '', f"core imports pulled in: {lines['LEAKS']}"


def test_the_check_sees_a_leak():
    """The same probe reports rclpy when a module does import it (so the test above can fail)."""
    probe = (
        'import sys, rclpy; print(sorted(m for m in sys.modules if m.split(".")[0] == '
        '"rclpy")[:1])'
    )
    proc = subprocess.run(
        [sys.executable, '-c', probe], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and 'rclpy' in proc.stdout, proc.stderr
