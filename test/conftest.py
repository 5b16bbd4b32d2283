"""Test-wide settings: DDS environment (one place: depth3dseg_ros.rosenv), the real sample
frames."""

import faulthandler
import os
import sys
from pathlib import Path

import pytest

from depth3dseg_ros.rosenv import apply_ros_env, pick_domain_id
from depth3dseg_ros.samples import SampleDataUnavailable, fetch_all, real_camera_bag

pytest_plugins = ['leakguard']  # no process a test starts outlives the run (test/leakguard.py)

REPO = Path(__file__).resolve().parents[1]

# A per-run domain id, inherited by every child process the tests start.
if 'DEPTH3DSEG_TEST_DOMAIN' not in os.environ:
    os.environ['DEPTH3DSEG_TEST_DOMAIN'] = str(pick_domain_id())
apply_ros_env(domain_id=int(os.environ['DEPTH3DSEG_TEST_DOMAIN']))
os.environ.setdefault('AMENT_PREFIX_PATH', os.environ.get('VIRTUAL_ENV', str(REPO / '.venv')))


@pytest.fixture(scope='session')
def ros():
    """rclpy's default context, initialised once for the whole run, with a hidden node that keeps
    its DDS participant until the process ends.

    Tests create and destroy their harness nodes (and in-process nodes) in it, so the test process
    never deletes a DDS participant while a node process may still be alive: with FastDDS 3.2's
    TCP transport (LARGE_DATA) that deletion can deadlock inside a call that keeps the GIL, where
    no timeout can end it (docs/pip_ros_stack.md §1; the node processes themselves leave the same
    way, depth3dseg_ros/departure.py)."""
    import rclpy

    from depth3dseg_ros.departure import keep_participant

    rclpy.init()
    yield keep_participant('_pytest_keeper')
    rclpy.try_shutdown()  # the participant itself goes with the process (no node process is left)


@pytest.fixture(scope='session')
def real_dir() -> Path:
    """Root of the real camera sample files (depth3dseg_ros.samples: cache, local copy or
    download).

    Tests that need real frames fail here, with the message saying how to get them, when the files
    are neither cached nor in $DEPTH3DSEG_SAMPLE_DATA and cannot be downloaded (never a silent
    skip)."""
    try:
        return fetch_all()
    except SampleDataUnavailable as err:
        pytest.fail(f'real camera sample data unavailable: {err}', pytrace=False)


@pytest.fixture(scope='session')
def real_bag(real_dir) -> Path:
    """The real-camera bag (22 frames, depth3dseg_ros.samples.realbag), built once into the
    cache."""
    return real_camera_bag()


#: Modules of the full tier only: multi-process ROS tests, subprocess CLIs, training runs, exports.
#: The quick tier (`make test-fast`, `pytest -m "not slow"`) runs every other test: the pure core,
#: message layer, sample data, dataset and sync logic, under a minute on this machine.
SLOW_MODULES = {
    'test_bad_input_files',
    'test_bags_reader',
    'test_c34_resume',
    'test_cli_bad_input',
    'test_core_inference',
    'test_core_overfit',
    'test_diagnostics',
    'test_core_purity',
    'test_cutoff_recordings',
    'test_cutoff_splits',
    'test_decode_bombs',
    'test_demo',
    'test_departure',
    'test_eval_cli',
    'test_extract',
    'test_no_leaks',
    'test_node',
    'test_node_backend',
    'test_node_camera_info',
    'test_node_latency',
    'test_node_params',
    'test_node_snapshot',
    'test_onnx_export',
    'test_packaging',
    'test_params',
    'test_replay',
    'test_sample_data_gate',
    'test_ros_pip_stack',
    'test_shipped_model',
    'test_synth',
    'test_synth_handheld',
    'test_synth_cycles',
    'test_train_cli',
    'test_train_ddp',
    'test_train_interrupt',
    'test_train_resume',
    'test_train_skips',
}


def pytest_configure(config) -> None:
    config.addinivalue_line(
        'markers', 'slow: full tier only (multi-process, subprocess CLIs, training)'
    )
    global _REAL_STDERR
    # output capture is suspended while plugins configure: fd 2 is the terminal / CI log here
    _REAL_STDERR = os.fdopen(os.dup(2), 'w')


#: The real stderr (opened in pytest_configure), where the wedge watchdog writes.
_REAL_STDERR = None

#: Seconds past a test's own timeout (pytest-timeout) after which the GIL-free watchdog ends
#: the run.
WEDGE_GRACE_S = float(os.environ.get('DEPTH3DSEG_WEDGE_GRACE_S', '120'))


def pytest_unconfigure(config) -> None:
    if _REAL_STDERR is not None:
        _REAL_STDERR.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A GIL-free watchdog around every test (faulthandler's C thread).

    pytest-timeout's signal method runs its handler between bytecodes of the main thread: a test
    whose main thread is stuck in a C call that keeps the GIL (rclpy's destroy_node or publish
    waiting on a wedged DDS transport, docs/pip_ros_stack.md §1) would never be ended, and the
    whole run would hang until CI's own limit, with no output. This ends such a run
    ``WEDGE_GRACE_S`` after the test's timeout, with every thread's stack on the real stderr and
    exit status 1."""
    marker = item.get_closest_marker('timeout')
    limit = (
        float(marker.args[0])
        if marker and marker.args
        else float(item.config.getini('timeout') or 300)
    )
    flaky = item.get_closest_marker('flaky')  # pytest-rerunfailures runs the attempts in here
    attempts = 1 + int(flaky.kwargs.get('reruns', 1)) if flaky else 1
    faulthandler.dump_traceback_later(
        attempts * limit + WEDGE_GRACE_S, exit=True, file=_REAL_STDERR or sys.stderr
    )
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


#: The one node test module that runs no node (the pure per-frame rules).
FAST_NODE_MODULES = {'test_node_frame', 'test_node_lifecycle_inproc'}


def _slow(module: str) -> bool:
    """Full tier only: SLOW_MODULES, and every test_node* module that starts or spins a node."""
    return module in SLOW_MODULES or (
        module.startswith('test_node') and module not in FAST_NODE_MODULES
    )


#: The fixtures that need the real camera sample files.
SAMPLE_FIXTURES = {'real_dir', 'real_bag'}


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if _slow(item.module.__name__.rsplit('.', 1)[-1]):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected
def pytest_collection_finish(session) -> None:
    """Fetch the real sample files once, before any test runs, when a selected test needs them;
    without them the run stops here with the one line that says how to get them and exit status
    2, instead of one setup error per test (issue 54: 262 of them). Never a skip."""
    if session.config.option.collectonly or not any(
        SAMPLE_FIXTURES & set(getattr(item, 'fixturenames', ())) for item in session.items
    ):
        return
    try:
        fetch_all()
    except SampleDataUnavailable as err:
        pytest.exit(f'real camera sample data unavailable: {err}', returncode=2)


#: How much of each rerun attempt's failure text the summary shows (its end: the assertion and,
#: for node tests, the node's log with its stack dump; nodeutil.NodeProcess.stop).
RERUN_TAIL_CHARS = 8000


def pytest_terminal_summary(terminalreporter) -> None:
    """Print why each rerun test failed its first attempt (pytest-rerunfailures only names them):
    an intermittent failure that a rerun hides still leaves its evidence in the CI log."""
    reports = terminalreporter.stats.get('rerun', [])
    if not reports:
        return
    terminalreporter.section('first attempts of rerun tests')
    for rep in reports:
        text = rep.longreprtext
        terminalreporter.write_line(f'--- {rep.nodeid} ({len(text)} chars, last shown)')
        terminalreporter.write_line(text[-RERUN_TAIL_CHARS:])
