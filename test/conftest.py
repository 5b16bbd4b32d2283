"""Test-wide settings: DDS environment (one place: depth3dseg_ros.rosenv), shared data paths."""
import os
from pathlib import Path

import pytest

from depth3dseg_ros.rosenv import apply_ros_env, pick_domain_id

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get('DEPTH3DSEG_SHARED', REPO.parent / 'shared'))
REAL = SHARED / 'data' / 'real'

# A per-run domain id, inherited by every child process the tests start.
if 'DEPTH3DSEG_TEST_DOMAIN' not in os.environ:
    os.environ['DEPTH3DSEG_TEST_DOMAIN'] = str(pick_domain_id())
apply_ros_env(domain_id=int(os.environ['DEPTH3DSEG_TEST_DOMAIN']))
os.environ.setdefault('AMENT_PREFIX_PATH', os.environ.get('VIRTUAL_ENV', str(REPO / '.venv')))


@pytest.fixture(scope='session')
def real_dir() -> Path:
    """../shared/data/real; the suite needs it (CI lays shared/ beside the clone)."""
    if not REAL.is_dir():
        raise FileNotFoundError(f'real camera data not found at {REAL} (set DEPTH3DSEG_SHARED)')
    return REAL
