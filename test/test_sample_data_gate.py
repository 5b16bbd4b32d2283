"""``make test`` without the real sample files (issue 54): the run stops before the first test
with the one line that says how to get them and a non-zero exit, instead of one setup error per
test that needs them (262); never a skip. A run that needs no sample file is not stopped."""

import os
import subprocess
import sys

from nodeutil import REPO


def _pytest(tmp_path, *args):
    env = dict(
        os.environ,
        DEPTH3DSEG_CACHE=str(tmp_path / 'empty_cache'),
        DEPTH3DSEG_SAMPLE_URL='http://127.0.0.1:9',  # nothing listens: offline
    )
    env.pop('DEPTH3DSEG_SAMPLE_DATA', None)
    return subprocess.run(
        [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
        env=env,
    )


def test_run_without_sample_data_stops_at_the_start_with_one_line(tmp_path):
    r = _pytest(
        tmp_path,
        'test/test_ros_image.py::test_bigendian_real_pgm_depth',  # needs the real files
        'test/test_samples.py::test_registry_urls_name_a_pinned_commit',  # does not
        'test/test_ros_image.py',
    )
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert out.count('real camera sample data unavailable') == 1, out
    assert 'DEPTH3DSEG_SAMPLE_DATA' in out and 'Connection refused' in out
    assert 'no tests ran' in out and ' error' not in out and 'skipped' not in out, out


def test_run_that_needs_no_sample_data_is_not_stopped(tmp_path):
    r = _pytest(tmp_path, 'test/test_samples.py::test_registry_urls_name_a_pinned_commit')
    assert r.returncode == 0 and '1 passed' in r.stdout, r.stdout + r.stderr
