"""Test-wide settings: DDS environment (one place: depth3dseg_ros.rosenv), the real sample frames."""
import os
from pathlib import Path

import pytest

from depth3dseg_ros.rosenv import apply_ros_env, pick_domain_id
from depth3dseg_ros.samples import SampleDataUnavailable, fetch_all, real_camera_bag

pytest_plugins = ['leakguard']   # no process a test starts outlives the run (test/leakguard.py)

REPO = Path(__file__).resolve().parents[1]

# A per-run domain id, inherited by every child process the tests start.
if 'DEPTH3DSEG_TEST_DOMAIN' not in os.environ:
    os.environ['DEPTH3DSEG_TEST_DOMAIN'] = str(pick_domain_id())
apply_ros_env(domain_id=int(os.environ['DEPTH3DSEG_TEST_DOMAIN']))
os.environ.setdefault('AMENT_PREFIX_PATH', os.environ.get('VIRTUAL_ENV', str(REPO / '.venv')))


@pytest.fixture(scope='session')
def real_dir() -> Path:
    """Root of the real camera sample files (depth3dseg_ros.samples: cache, local copy or download).

    Tests that need real frames fail here, with the message saying how to get them, when the files are
    neither cached nor in $DEPTH3DSEG_SAMPLE_DATA and cannot be downloaded (never a silent skip)."""
    try:
        return fetch_all()
    except SampleDataUnavailable as err:
        pytest.fail(f'real camera sample data unavailable: {err}', pytrace=False)


@pytest.fixture(scope='session')
def real_bag(real_dir) -> Path:
    """The real-camera bag (22 frames, depth3dseg_ros.samples.realbag), built once into the cache."""
    return real_camera_bag()
