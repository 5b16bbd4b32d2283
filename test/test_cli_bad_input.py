"""Issue 55: every console script of setup.py, run as a user runs it, on bad input: a broken YAML
file for every option that takes one, an empty directory and a file that is not a bag (or dataset,
model, report) for every input path. Each ends with exit code 2 and exactly one line on stderr
(``<command>: error: ...``, or the node's ``start-up failed:`` line), nothing on stdout, no
traceback, no library output (pybullet's banner, rcl's log line) before it.

The YAML-taking options are found from each command's ``--help`` (an option or parameter whose help
says it is a YAML file) and must all be walked here; every console script must have its cases.
Full tier: subprocesses (about 2 min).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
MODEL = REPO / 'models' / 'depth3dseg_nyu13.pt'
BROKEN_YAML = 'a: [1,\nb: 2\n'  # line 3, column 1: the flow sequence is never closed


def console_scripts() -> list[str]:
    """The console scripts setup.py declares."""
    text = (REPO / 'setup.py').read_text()
    return re.findall(r"'([\w-]+) = depth3dseg_ros\.", text)


#: script -> [(arguments, the option as the error line names it)]; {bad} is the broken YAML file,
#: {dir} an empty directory, {file} a small text file (not a bag, dataset, model or report)
YAML_CASES = {
    'depth3dseg_node': [
        (['--ros-args', '--params-file', '{bad}'], '--params-file {bad}:3:1'),
        (
            ['--ros-args', '-p', 'class_palette_file:={bad}', '-p', 'device:=cpu'],
            'class_palette_file: {bad}:3:1',
        ),
    ],
    'depth3dseg_lifecycle_node': [
        (['--ros-args', '--params-file', '{bad}'], '--params-file {bad}:3:1'),
    ],
    'depth3dseg-replay': [
        (['{file}', '--ros-args', '--params-file', '{bad}'], '--params-file {bad}:3:1'),
    ],
    'depth3dseg-extract': [
        (['{file}', '-o', '{out}', '--config', '{bad}'], '--config {bad}:3:1'),
        (['{file}', '-o', '{out}', '--classes', '{bad}'], '--classes {bad}:3:1'),
    ],
    'depth3dseg-train': [
        (['--config', '{bad}', '--out', '{out}'], '--config {bad}:3:1'),
        (
            ['--set', 'data.classes={bad}', '--set', 'data.train=[{dir}]', '--out', '{out}'],
            'data.classes: {bad}:3:1',
        ),
    ],
    'depth3dseg-eval': [
        (
            [
                '--model',
                str(MODEL),
                '--bag',
                '{file}',
                '--extract-config',
                '{bad}',
                '--out',
                '{out}',
            ],
            '--extract-config {bad}:3:1',
        ),
    ],
    'depth3dseg-calibrate': [
        (
            [
                '--model',
                str(MODEL),
                '--bag',
                '{file}',
                '--extract-config',
                '{bad}',
                '--out',
                '{out}',
            ],
            '--extract-config {bad}:3:1',
        ),
    ],
}

#: script -> [arguments] that name an empty directory or a file of the wrong kind as the input
BAD_INPUT_CASES = {
    'depth3dseg_node': [
        ['--ros-args', '-p', 'model_file:={file}', '-p', 'device:=cpu'],
        ['--ros-args', '-p', 'model_file:={dir}', '-p', 'device:=cpu'],
    ],
    'depth3dseg_lifecycle_node': [['--ros-args', '-p', 'x']],  # loads nothing until configured
    'depth3dseg-replay': [['{dir}'], ['{file}']],
    'depth3dseg-extract': [['{dir}', '-o', '{out}'], ['{file}', '-o', '{out}']],
    'depth3dseg-train': [
        ['--set', 'data.train=[{dir}]', '--out', '{out}'],
        ['--set', 'data.train=[{file}]', '--out', '{out}'],
    ],
    'depth3dseg-eval': [
        ['--model', str(MODEL), '--bag', '{dir}', '--out', '{out}'],
        ['--model', str(MODEL), '--bag', '{file}', '--out', '{out}'],
        ['--model', str(MODEL), '--data', '{dir}', '--out', '{out}'],
        ['--model', '{file}', '--data', '{dir}', '--out', '{out}'],
    ],
    'depth3dseg-compare': [['{dir}', '{dir}'], ['{file}', '{file}']],
    'depth3dseg-calibrate': [
        ['--model', str(MODEL), '--bag', '{dir}', '--out', '{out}.pt'],
        ['--model', str(MODEL), '--bag', '{file}', '--out', '{out}.pt'],
        ['--model', str(MODEL), '--data', '{dir}', '--out', '{out}.pt'],
    ],
    'depth3dseg-synth': [['--out', '{out}', '--scenes', '0']],  # pybullet's banner came first
    'depth3dseg-synth-cycles': [['--out', '{out}', '--scenes', '0']],
    'depth3dseg-demo': [
        ['--bag', '{dir}', '--out', '{out}'],
        ['--bag', '{file}', '--out', '{out}'],
    ],
    'depth3dseg-export': [['{file}', '-o', '{out}.onnx'], ['{dir}', '-o', '{out}.onnx']],
}


#: YAML parameters a command reads only later: the managed node loads its palette file at the
#: configure transition (a FAILURE with one error line, the process keeps running: docs/node.md)
NOT_AT_START = {'depth3dseg_lifecycle_node': {'class_palette_file'}}


def yaml_options_in_help(script: str) -> set[str]:
    """The options (``--config``) and node parameters (``class_palette_file``) whose ``--help``
    entry says they take a YAML file; ``--params-file`` where the help shows it."""
    text = subprocess.run(
        [str(BIN / script), '--help'], capture_output=True, text=True, timeout=120
    ).stdout
    found = set()
    entries = re.split(r'\n(?=  -|  [a-z_]+ {2,})', text)
    for entry in entries:
        entry = entry.split('\n\n')[0]  # a paragraph after the last option is not its help
        name = entry.split()[0] if entry.split() else ''
        words = ' '.join(entry.split()[1:])
        if re.search(r'\bYAML\b', words) and 'overrides' not in words:
            found.add(name.lstrip('-') if not name.startswith('--') else name)
    if '--params-file' in text:
        found.add('--params-file')
    return found


def cases():
    for script, items in YAML_CASES.items():
        for args, named in items:
            yield pytest.param(
                script, args, named, id=f'{script} {args[-2] if len(args) > 1 else ""}'
            )
    for script, items in BAD_INPUT_CASES.items():
        for k, args in enumerate(items):
            yield pytest.param(script, args, None, id=f'{script} bad input {k}')


def test_every_console_script_and_yaml_option_is_walked():
    scripts = console_scripts()
    assert len(scripts) == 12 and set(BAD_INPUT_CASES) == set(scripts), scripts
    for script in scripts:
        walked = {
            a.split(':=')[0] if ':=' in a else a
            for args, _ in YAML_CASES.get(script, [])
            for a in args
            if a.startswith('--') or ':=' in a
        }
        missing = yaml_options_in_help(script) - walked - NOT_AT_START.get(script, set())
        assert not missing, f'{script}: YAML options not walked: {missing}'
    # replay takes ROS arguments too (rclpy.utilities.remove_ros_args), though --help omits them
    assert 'depth3dseg-replay' in YAML_CASES


@pytest.mark.parametrize('script,args,named', list(cases()))
def test_bad_input_is_one_line_and_exit_2(script, args, named, tmp_path):
    bad = tmp_path / 'bad.yaml'
    bad.write_text(BROKEN_YAML)
    empty = tmp_path / 'empty'
    empty.mkdir()
    other = tmp_path / 'notes.txt'
    other.write_text('not a bag\n')
    fill = {'bad': str(bad), 'dir': str(empty), 'file': str(other), 'out': str(tmp_path / 'out')}
    argv = [a.format(**fill) for a in args]
    p = subprocess.run(
        [str(BIN / script), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != 'PYTHONWARNINGS'},
    )
    lines = p.stderr.splitlines()
    assert p.returncode == 2, (p.returncode, p.stderr[-3000:])
    assert len(lines) == 1 and p.stdout == '', (p.stdout[-2000:], p.stderr[-3000:])
    assert lines[0].startswith(f'{script}: '), lines[0]
    if named is not None:
        want = named.format(**fill)
        assert f'{want}: not valid YAML: expected' in lines[0], lines[0]
