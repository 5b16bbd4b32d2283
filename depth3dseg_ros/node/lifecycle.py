"""``depth3dseg_lifecycle_node``: the managed (lifecycle) variant of ``depth3dseg_node``.

Same topics, parameters and per-frame work (node/node.py ``NodePipeline``); the set-up and
tear-down steps (node/steps.py) run from the transitions of the ROS 2 managed-node state machine
(design article "Managed nodes", rclpy.lifecycle) instead of the constructor:

- constructor: the parameters are declared (any type accepted until configure), the lifecycle
  services exist (``~/change_state``, ``~/get_state``, ...); state 'unconfigured', nothing loaded;
- configure (on_configure): parameters validated (node/params.py), model loaded and warmed up,
  class palette, publishers created as lifecycle publishers (nothing goes out unless active).
  A bad parameter, a missing or unloadable model file or a bad palette file: FAILURE, back to
  'unconfigured', one error line naming the value (no traceback, the process lives on);
- activate (on_activate): publishers enabled, ``~/classes`` published, subscriptions, diagnostics
  timer and worker thread started;
- deactivate (on_deactivate): subscriptions and timer dropped, worker stopped, publishers
  disabled: no outputs;
- cleanup (on_cleanup): publishers destroyed, model released; 'unconfigured' again;
- shutdown (on_shutdown, from any primary state): as deactivate + cleanup where needed;
  'finalized'. ``destroy_node`` takes this transition first, so SIGINT/SIGTERM (node/main.py)
  always release through it;
- an exception inside a transition (on_error): everything released, back to 'unconfigured'.

Run-time parameter changes (C44, node/runtime.py): unconfigured, any change is accepted and checked
at configure; configured, the plain node's rules apply, and a start-up-only parameter is refused
with "... read at configure: cleanup and configure again to change it".
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from rclpy.lifecycle import LifecycleNodeMixin, LifecycleState, TransitionCallbackReturn
from rclpy.node import Node

from depth3dseg_ros.node.node import NodePipeline
from depth3dseg_ros.node.param_specs import SPECS, STARTUP_ONLY
from depth3dseg_ros.node.params import (
    NodeParams,
    declare_parameters,
    descriptor,
    read_parameters,
)

SUCCESS = TransitionCallbackReturn.SUCCESS
FAILURE = TransitionCallbackReturn.FAILURE
#: the primary states the shutdown transition leaves from (design article "Managed nodes")
PRIMARY = ('unconfigured', 'inactive', 'active')


def first_line(err: BaseException) -> str:
    """``err``'s message in one line (its first non-empty line), for a one-line log."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


class Depth3DSegLifecycleNode(LifecycleNodeMixin, NodePipeline, Node):
    """The managed node (rclpy.lifecycle): state 'unconfigured' after construction.

    ``segmenter_factory(params, model_file)`` builds the model at configure (default: Segmenter).
    The constructor raises only what rclpy's Node does (bad ROS arguments); every parameter or
    model problem is a FAILURE of the configure transition.
    """

    def __init__(
        self,
        segmenter_factory: Callable[[NodeParams, str], Any] | None = None,
        node_name: str = 'depth3dseg',
        **kwargs: Any,
    ) -> None:
        Node.__init__(self, node_name, **kwargs)
        LifecycleNodeMixin.__init__(self, enable_communication_interface=True)
        self._factory = segmenter_factory
        self.p = None  # NodeParams once configured
        self.seg = None
        self._active = False
        self._warn_unknown_parameters()
        declare_parameters(self, any_type=True)
        self._install_parameter_callbacks()
        name = self.get_fully_qualified_name()
        self.get_logger().info(
            f'managed node {name}: unconfigured (ros2 lifecycle set {name} configure)'
        )

    # -- lifecycle publishers ---------------------------------------------------------------
    def _make_publisher(self, msg_type: Any, topic: str, qos: Any) -> Any:
        """A lifecycle publisher (publishes only while the node is active); one created while
        active (an output switched on at run time) is enabled at once."""
        pub = self.create_lifecycle_publisher(msg_type, topic, qos)
        if self._active:
            pub.on_activate(None)
        return pub

    def _destroy_publisher(self, pub: Any) -> None:
        self.destroy_lifecycle_publisher(pub)

    def state_label(self) -> str:
        """The current state's label ('unconfigured', 'inactive', 'active', 'finalized', or a
        transition state such as 'configuring')."""
        return self._state_machine.current_state[1]

    # -- transitions (design article "Managed nodes") -------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Validate the parameters, load the model, create the (disabled) publishers. FAILURE with
        one error line naming the value when any of it fails; nothing is kept then."""
        step = 'parameters'
        try:
            p = read_parameters(self)
            step = f'model_file={p.model_file!r}'
            model_file = self._setup_model(p, self._factory)
            step = 'publishers'
            self._setup_outputs()
        except Exception as err:  # noqa: BLE001 - a failed transition: one line, no traceback
            text = first_line(err)
            if step.startswith('model_file') and 'model_file' not in text:
                text = f'{step}: {type(err).__name__}: {text}'
            self.get_logger().error(f'configure failed: {text}')
            self._release()
            self.p = None
            return FAILURE
        self._describe_parameters(configured=True)
        self.get_logger().info('configured: ' + self._ready_line(model_file))
        return SUCCESS

    def _describe_parameters(self, configured: bool) -> None:
        """Parameter descriptors for describe_parameters: once configured the plain node's
        (node/params.descriptor: type, range, allowed values), start-up-only ones not read-only
        (this node refuses them itself until cleanup) but saying so; unconfigured again the loose
        ones of the constructor (any type until configure)."""
        from rcl_interfaces.msg import ParameterDescriptor

        for spec in SPECS:
            if configured:
                d = descriptor(spec)
                if d.read_only:
                    d.read_only = False
                    d.additional_constraints = d.additional_constraints.replace(
                        STARTUP_ONLY, 'read at configure: cleanup and configure again'
                    )
            else:
                d = ParameterDescriptor(description=spec.doc, dynamic_typing=True)
            try:
                self.set_descriptor(spec.name, d)
            except Exception:  # noqa: BLE001 - a value validate() coerced (no other effect)
                pass

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Enable the publishers, publish ``~/classes``, start the subscriptions and the worker."""
        ret = super().on_activate(state)  # the lifecycle publishers (managed entities)
        if ret != SUCCESS:
            return ret
        self._active = True
        try:
            self._publish_classes()
            self._start_inputs()
        except Exception as err:  # noqa: BLE001 - ERROR: rclpy goes on to on_error
            self.get_logger().error(f'activate failed: {type(err).__name__}: {first_line(err)}')
            return TransitionCallbackReturn.ERROR
        self.get_logger().info('active: processing frames')
        return SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Drop the subscriptions and the timer, stop the worker, disable the publishers."""
        self._deactivate()
        self.get_logger().info('inactive: no processing, no outputs')
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Destroy the publishers and release the model."""
        self._release()
        self.p = None
        self._describe_parameters(configured=False)
        self.get_logger().info('unconfigured: model and publishers released')
        return SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """From any primary state: stop what runs, release what is held."""
        self._deactivate()
        self._release()
        self.p = None
        self.get_logger().info(f'shut down from {state.label}')
        return SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        """An exception in a transition: release everything and go back to 'unconfigured'."""
        self.get_logger().error(f'error in a transition from {state.label}: releasing everything')
        try:
            self._deactivate()
            self._release()
        finally:
            self.p = None
            self._describe_parameters(configured=False)
        return SUCCESS

    def _deactivate(self) -> None:
        self._active = False
        if not self._stop_inputs(timeout=5.0):
            self.get_logger().warning('the worker is still inside a frame: its outputs go nowhere')

    # -- run-time parameters ----------------------------------------------------------------
    def _check_parameters(self, parameters: list[Any]) -> Any:
        """node/runtime.py's check; a start-up-only parameter names the configure transition."""
        result = super()._check_parameters(parameters)
        if not result.successful and STARTUP_ONLY in result.reason:
            result.reason = result.reason.replace(
                STARTUP_ONLY, 'read at configure: cleanup and configure again'
            )
        return result

    def destroy_node(self) -> bool:
        """Take the shutdown transition from a primary state (releasing through on_shutdown),
        then destroy the node (False: the worker is still inside a frame, node left alone)."""
        try:
            if self.state_label() in PRIMARY:
                self.trigger_shutdown()
        except Exception as err:  # noqa: BLE001 - shutting down: report, go on
            self.get_logger().error(f'shutdown transition: {first_line(err)}')
        return super().destroy_node()


def main(argv: list[str] | None = None) -> int:
    """Console script ``depth3dseg_lifecycle_node``: node/main.py's ``main`` with the managed node
    (same arguments, ``--help``, exit codes and signal handling, C40/C45)."""
    from depth3dseg_ros.node.main import main as run

    return run(argv, managed=True)


if __name__ == '__main__':
    sys.exit(main())
