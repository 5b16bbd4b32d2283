"""--help names the defaults (depth3dseg_ros.clihelp.DefaultsHelpFormatter) in the CLIs a user
meets first: demo, eval, replay."""

from __future__ import annotations

import argparse

import pytest

from depth3dseg_ros.bags import replay
from depth3dseg_ros.clihelp import DefaultsHelpFormatter
from depth3dseg_ros.node import demo
from depth3dseg_ros.training import evaluate


def _help(parser: argparse.ArgumentParser) -> str:
    return ' '.join(parser.format_help().split())


def test_a_value_default_is_named_once_and_none_false_or_empty_are_not():
    p = argparse.ArgumentParser(formatter_class=DefaultsHelpFormatter)
    p.add_argument('--rate', type=float, default=1.5, help='time scale')
    p.add_argument('--model', default=None, help='model file')
    p.add_argument('--loop', action='store_true', help='forever')
    p.add_argument('--topic', action='append', default=[], help='a topic')
    p.add_argument('--wait', type=float, default=10.0, help='seconds (default 10)')
    p.add_argument('bag', help='the bag')
    text = _help(p)
    assert 'time scale (default: 1.5)' in text
    for bare in ('model file', 'forever', 'a topic', 'the bag'):
        assert f'{bare} (default' not in text
    assert 'seconds (default 10)' in text and 'default: 10.0' not in text


def test_the_first_clis_show_their_defaults(capsys):
    assert 'replay time scale (> 0) (default: 1.0)' in _help(demo.build_parser())
    assert "the node's device (default: auto)" in _help(demo.build_parser())
    assert 'reliability of the publishers (default: reliable)' in _help(replay.build_parser())
    with pytest.raises(SystemExit):
        evaluate.parse_args(['--help'])
    assert 'frames per forward pass (default: 8)' in ' '.join(capsys.readouterr().out.split())
