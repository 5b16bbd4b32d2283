"""``depth3dseg_lifecycle_node``, the managed node (issue 14; design article "Managed nodes").

The node runs in a subprocess (real rclpy over FastDDS, the tiny model of nodeutil); this process
drives it with the lifecycle services ``/<node>/change_state`` and ``/<node>/get_state``
(lifecycle_msgs/srv/ChangeState, GetState), streams image + CameraInfo and counts what comes back:

- configure -> 'inactive': publishers exist, nothing is published, nothing is subscribed;
- activate -> outputs (labels image + its camera_info, cloud, ~/classes) for the frames sent;
- deactivate -> no outputs, input subscriptions gone; activate again -> outputs again;
- cleanup -> 'unconfigured', publishers gone; shutdown -> 'finalized';
- configure with a missing model_file -> FAILURE, one error line naming it, no traceback, the node
  alive in 'unconfigured'; a good model_file set with ``set_parameters`` then configures;
- SIGTERM in each primary state ends the process within 2 s, exit 0, no traceback (C40/C45).

The in-process lifecycle tests (quick tier) are in test_node_lifecycle_inproc.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import rclpy
from lifecycle_msgs.msg import State, Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image, PointCloud2
from std_msgs.msg import String

from depth3dseg_ros.procutil import StopSignals, popen_tied
from nodeutil import REPO, camera_image, camera_info_msg, make_tiny_model, spin_until

LIMIT_S = 2.0
K = np.array([[70.0, 0, 39.5], [0, 70.0, 29.5], [0, 0, 1]])
RELIABLE = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)


@pytest.fixture(scope='module')
def tiny_model(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp('lifecycle') / 'tiny.pt')


class Managed:
    """The lifecycle node in a subprocess plus a harness node here: lifecycle and parameter
    clients, an image + CameraInfo streamer and counters of the outputs."""

    def __init__(self, tmp: Path, model: Path | str, name: str) -> None:
        self.name = name
        cmd = [sys.executable, '-m', 'depth3dseg_ros.node.lifecycle', '--ros-args']
        cmd += ['-r', f'__node:={name}', '-r', f'image:=/{name}/in/image']
        cmd += ['-r', f'camera_info:=/{name}/in/camera_info']
        for k, v in dict(
            model_file=model, device='cpu', torch_threads=1, input_width=64, input_height=48
        ).items():
            cmd += ['-p', f'{k}:={v}']
        self.log_path = tmp / f'{name}.log'
        self._log = open(self.log_path, 'w')
        self.proc = popen_tied(cmd, stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO)
        n = self.node = rclpy.create_node(f'{name}_harness')
        self.change = n.create_client(ChangeState, f'/{name}/change_state')
        self.get = n.create_client(GetState, f'/{name}/get_state')
        self.set_params = n.create_client(SetParameters, f'/{name}/set_parameters')
        self.pub_img = n.create_publisher(Image, f'/{name}/in/image', RELIABLE)
        self.pub_info = n.create_publisher(CameraInfo, f'/{name}/in/camera_info', RELIABLE)
        self.counts = {'labels': 0, 'labels_info': 0, 'points': 0}
        self.classes: list[str] = []
        for topic, cls, key in (
            ('labels/image', Image, 'labels'),
            ('labels/camera_info', CameraInfo, 'labels_info'),
            ('points', PointCloud2, 'points'),
        ):
            n.create_subscription(cls, f'/{name}/{topic}', self._counter(key), RELIABLE)
        n.create_subscription(String, f'/{name}/classes', self._on_classes, LATCHED)
        self._next = 0.0

    def _counter(self, key):
        def count(_msg) -> None:
            self.counts[key] += 1

        return count

    def _on_classes(self, msg) -> None:
        self.classes.append(msg.data)

    def text(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def spin(self, seconds: float, stream: bool = False) -> None:
        """Spin the harness ``seconds``, publishing a frame every 0.1 s when ``stream``."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.tick(stream)

    def tick(self, stream: bool = True) -> None:
        now = time.monotonic()
        if stream and now >= self._next:
            self._next = now + 0.1
            t_ns = time.time_ns()
            self.pub_info.publish(camera_info_msg(K, 80, 60, t_ns))
            self.pub_img.publish(camera_image(80, 60, t_ns))
        rclpy.spin_once(self.node, timeout_sec=0.01)

    def until(self, cond, timeout: float, what: str, stream: bool = False) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if cond():
                return
            assert self.alive(), f'node ended before {what}:\n{self.text()}'
            self.tick(stream)
        pytest.fail(f'not {what} within {timeout} s:\n{self.text()}')

    def call(self, client, request, timeout: float = 60.0):
        self.until(client.service_is_ready, 90, f'{client.srv_name} available')
        future = client.call_async(request)
        assert spin_until(self.node, future.done, timeout), f'{client.srv_name}: no answer'
        return future.result()

    def state(self) -> tuple[int, str]:
        s = self.call(self.get, GetState.Request()).current_state
        return s.id, s.label

    def transition(self, transition_id: int) -> bool:
        req = ChangeState.Request(transition=Transition(id=transition_id))
        return self.call(self.change, req).success

    def set_string(self, name: str, value: str) -> bool:
        v = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value)
        res = self.call(
            self.set_params, SetParameters.Request(parameters=[ParameterMsg(name=name, value=v)])
        )
        return res.results[0].successful

    def subscribed(self) -> int:
        """The node's subscriptions on the image input, as seen from here."""
        return self.node.count_subscribers(f'/{self.name}/in/image')

    def published(self) -> int:
        return self.node.count_publishers(f'/{self.name}/labels/image')

    def signal_and_time(self, sig: int) -> tuple[float, int, str]:
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        while self.proc.poll() is None and time.monotonic() - t0 < 15:
            time.sleep(0.01)
        dt = time.monotonic() - t0
        self.close()
        return dt, self.proc.returncode, self.log_path.read_text()

    def close(self) -> None:
        """Kill the node if still running, close the log, destroy the harness (once)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        if not self._log.closed:
            self._log.close()
        if self.node is not None:
            self.node.destroy_node()
            self.node = None


def assert_clean(dt: float, rc: int, out: str) -> None:
    assert rc == StopSignals.EXIT_CODE, f'exit code {rc}:\n{out}'
    assert 'Traceback' not in out and 'Aborted' not in out, out
    assert dt <= LIMIT_S, f'ended {dt:.2f} s after the signal (limit {LIMIT_S} s):\n{out}'


def _outputs(m: Managed) -> bool:
    return all(v >= 2 for v in m.counts.values())


def _reset(m: Managed) -> None:
    m.counts.update({k: 0 for k in m.counts})


@pytest.mark.flaky(reruns=1)  # FastDDS discovery rarely never completes (docs/pip_ros_stack.md §1)
@pytest.mark.timeout(300)
def test_lifecycle_configure_activate_deactivate_cleanup_shutdown(tmp_path, tiny_model, ros):
    m = Managed(tmp_path, tiny_model, 'lc_cycle')
    try:
        assert m.state() == (State.PRIMARY_STATE_UNCONFIGURED, 'unconfigured')
        assert m.published() == 0 and m.subscribed() == 0

        assert m.transition(Transition.TRANSITION_CONFIGURE), m.text()
        assert m.state() == (State.PRIMARY_STATE_INACTIVE, 'inactive')
        m.until(lambda: m.published() > 0, 30, 'publishers advertised when inactive')
        m.spin(1.5, stream=True)  # inactive: no subscription, nothing published
        assert m.subscribed() == 0
        assert m.counts == {'labels': 0, 'labels_info': 0, 'points': 0} and not m.classes

        assert m.transition(Transition.TRANSITION_ACTIVATE), m.text()
        assert m.state() == (State.PRIMARY_STATE_ACTIVE, 'active')
        m.until(lambda: _outputs(m), 90, 'outputs while active', stream=True)
        m.until(lambda: bool(m.classes), 30, '~/classes while active')
        assert 'bed' in m.classes[-1]  # the tiny model's NYU13 classes

        assert m.transition(Transition.TRANSITION_DEACTIVATE), m.text()
        assert m.state() == (State.PRIMARY_STATE_INACTIVE, 'inactive')
        m.until(lambda: m.subscribed() == 0, 30, 'input unsubscribed when inactive')
        m.spin(0.5)  # outputs already on the way
        _reset(m)
        m.spin(2.0, stream=True)
        assert m.counts == {'labels': 0, 'labels_info': 0, 'points': 0}, m.text()

        assert m.transition(Transition.TRANSITION_ACTIVATE), m.text()
        m.until(lambda: _outputs(m), 90, 'outputs after activating again', stream=True)

        assert m.transition(Transition.TRANSITION_DEACTIVATE), m.text()
        assert m.transition(Transition.TRANSITION_CLEANUP), m.text()
        assert m.state() == (State.PRIMARY_STATE_UNCONFIGURED, 'unconfigured')
        m.until(lambda: m.published() == 0, 30, 'publishers gone after cleanup')

        assert m.transition(Transition.TRANSITION_UNCONFIGURED_SHUTDOWN), m.text()
        assert m.state() == (State.PRIMARY_STATE_FINALIZED, 'finalized')
        assert m.alive()
        assert_clean(*m.signal_and_time(signal.SIGTERM))  # finalized: still ends cleanly
    finally:
        m.close()


@pytest.mark.flaky(reruns=1)
@pytest.mark.timeout(300)
def test_lifecycle_configure_failure_keeps_node_unconfigured(tmp_path, tiny_model, ros):
    missing = tmp_path / 'no_such_model.pt'
    m = Managed(tmp_path, missing, 'lc_fail')
    try:
        assert not m.transition(Transition.TRANSITION_CONFIGURE)
        assert m.state() == (State.PRIMARY_STATE_UNCONFIGURED, 'unconfigured')
        assert m.alive()
        out = m.text()
        lines = [ln for ln in out.splitlines() if 'configure failed' in ln]
        assert len(lines) == 1 and str(missing) in lines[0] and 'model_file' in lines[0], out
        assert 'Traceback' not in out, out
        # recover: a good model file, configure again
        assert m.set_string('model_file', str(tiny_model))
        assert m.transition(Transition.TRANSITION_CONFIGURE), m.text()
        assert m.state() == (State.PRIMARY_STATE_INACTIVE, 'inactive')
        # configured: a start-up-only parameter now waits for cleanup + configure
        assert not m.set_string('device', 'cuda')
        assert_clean(*m.signal_and_time(signal.SIGTERM))
    finally:
        m.close()


@pytest.mark.flaky(reruns=1)
@pytest.mark.timeout(300)
@pytest.mark.parametrize('state', ['unconfigured', 'inactive', 'active'])
def test_lifecycle_sigterm_in_each_state_ends_cleanly(tmp_path, tiny_model, ros, state):
    m = Managed(tmp_path, tiny_model, f'lc_sig_{state}')
    try:
        m.until(m.get.service_is_ready, 90, 'lifecycle services')
        if state in ('inactive', 'active'):
            assert m.transition(Transition.TRANSITION_CONFIGURE), m.text()
        if state == 'active':
            assert m.transition(Transition.TRANSITION_ACTIVATE), m.text()
            m.until(lambda: m.counts['labels'] >= 2, 90, 'outputs', stream=True)
        assert m.state()[1] == state
        assert_clean(*m.signal_and_time(signal.SIGTERM))
    finally:
        m.close()


def test_lifecycle_help_and_argument_errors_before_ros(capsys, tmp_path):
    """``--help`` names the managed node and its transitions; a missing ``--params-file`` stops
    with exit code 2 and an ``error:`` line naming the executable (no rclpy started)."""
    from depth3dseg_ros.node.lifecycle import main

    assert main(['depth3dseg_lifecycle_node', '--help']) == 0
    out = capsys.readouterr().out
    assert out.startswith('usage: depth3dseg_lifecycle_node')
    assert 'lifecycle set' in out and 'model_file' in out and 'depth3dseg_node ' not in out
    missing = tmp_path / 'none.yaml'
    assert main(['depth3dseg_lifecycle_node', '--ros-args', '--params-file', str(missing)]) == 2
    err = capsys.readouterr().err
    assert f'depth3dseg_lifecycle_node: error: --params-file {missing} does not exist' in err
