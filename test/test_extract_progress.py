"""depth3dseg-extract's progress bar (issue 14): tqdm on stderr only when it is a terminal,
``--no-progress``; the bar counts the messages of both passes, without a total for a cut-off
recording."""

import io
import re
import shutil

import pytest

from bagutil import make_frames, write_bag
from depth3dseg_ros.bags import progress
from depth3dseg_ros.bags.extract import ExtractConfig, extract, main
from depth3dseg_ros.bags.progress import BagBar, bar_total, show_progress
from depth3dseg_ros.dataset_format import read_index


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_show_rule_like_eval():
    """Shown only on a terminal and without --no-progress (the rule of depth3dseg-eval)."""
    assert show_progress(False, _Tty()) is True
    assert show_progress(True, _Tty()) is False
    assert show_progress(False, io.StringIO()) is False  # a pipe, a log file, CI
    assert show_progress(False, object()) is False  # no isatty at all


def test_bar_total_counts_both_passes():
    counts = {'/rgb': 10, '/depth': 9, '/info': 10, '/labels': 3, '/other': 50}
    roles = {'rgb': '/rgb', 'depth': '/depth', 'camera_info': '/info', 'labels': '/labels'}
    assert bar_total(counts, roles, cut_off=False) == (10 + 9 + 10 + 3) + (10 + 9 + 3)
    assert bar_total(counts, roles, cut_off=True) is None


def test_hidden_bar_is_free_and_closes_twice():
    bar = BagBar('b', 10, enabled=False)
    bar.tick()
    bar.phase('frames', 3)
    bar.close()
    bar.close()


def test_bar_counts_the_messages_of_both_passes(tmp_path, real_dir, capsys):
    frames = make_frames(real_dir, 6)
    bag = write_bag(tmp_path / 'b', frames)
    report = extract([bag], tmp_path / 'ds', ExtractConfig(workers=1), progress=True)
    err = capsys.readouterr().err
    read = {t['role']: t['read'] for t in report['b']['topics'] if t['role']}
    total = sum(read.values()) + read['rgb'] + read['depth'] + read['labels']
    assert total == 6 * 3 + 2 + 6 * 2 + 2
    assert f'{total}/{total}' in err and 'b: frames (6)' in err
    assert len(read_index(tmp_path / 'ds')) == 6


def test_cut_off_recording_bar_has_no_total(tmp_path, real_dir, capsys):
    """A rosbag2 directory without metadata.yaml (C38): the bar counts without a total."""
    bag = write_bag(tmp_path / 'b', make_frames(real_dir, 4))
    rec = tmp_path / 'rec'
    rec.mkdir()
    shutil.move(next(bag.glob('*.db3')), rec / 'rec_0.db3')
    extract([rec], tmp_path / 'ds', ExtractConfig(workers=1), progress=True)
    err = capsys.readouterr().err
    assert re.search(r'\b(\d+)msg|\b(\d+) msg', err) and not re.search(r'\d+/\d+', err)
    assert len(read_index(tmp_path / 'ds')) == 4


@pytest.mark.parametrize('flag', [[], ['--no-progress']])
def test_cli_shows_no_bar_in_a_pipe_or_with_no_progress(tmp_path, real_dir, capsys, flag):
    """stderr captured (not a terminal) or --no-progress: the CLI runs and prints no bar."""
    bag = write_bag(tmp_path / 'b', make_frames(real_dir, 3))
    assert main([str(bag), '-o', str(tmp_path / 'ds'), '-q', *flag]) == 0
    err = capsys.readouterr().err
    assert 'msg' not in err and '\r' not in err and '%|' not in err
    assert len(read_index(tmp_path / 'ds')) == 3


def test_cli_asks_the_show_rule(tmp_path, real_dir, monkeypatch):
    """main() passes show_progress(--no-progress) on to extract: a terminal gets the bar."""
    seen = []
    real = progress.BagBar
    monkeypatch.setattr(
        'depth3dseg_ros.bags.extract_bag.BagBar',
        lambda name, total, enabled: seen.append(enabled) or real(name, total, False),
    )
    monkeypatch.setattr('depth3dseg_ros.bags.extract.show_progress', lambda no: not no)
    bag = write_bag(tmp_path / 'b', make_frames(real_dir, 2))
    assert main([str(bag), '-o', str(tmp_path / 'a'), '-q']) == 0
    assert main([str(bag), '-o', str(tmp_path / 'b2'), '-q', '--no-progress']) == 0
    assert seen == [True, False]
