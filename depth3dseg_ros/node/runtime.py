"""Run-time parameter changes of ``depth3dseg_node`` (docs/cases.md C44), as a mixin of the node.

A change (``ros2 param set``, the ``~/set_parameters`` services) is checked with the start-up
rules (node/params.py ``updated``) plus the node's own (``_check_extra``: the class palette file
is loaded and checked against the model's classes) and refused with the reason start-up would
print, or one naming a start-up-only parameter ("... read at start-up: restart the node ...");
an accepted change is applied from the next frame: the post-set callback builds the new
``NodeParams`` from the stored values and swaps it in with one assignment (the worker reads
``self.p`` once per frame: no torn update), after ``_apply_parameters(old, new)`` has prepared
what the new values need (publishers, synchroniser slop, timer period, palette). A failure there
is logged and leaves the old values in force; no exception leaves a callback.
"""

from __future__ import annotations

from typing import Any

from rcl_interfaces.msg import SetParametersResult
from rclpy.parameter import Parameter

from depth3dseg_ros.node.params import SPEC_BY_NAME, SPECS, NodeParams, unknown_names, updated
from depth3dseg_ros.node.params import validate


class RuntimeParameters:
    """Mixin for an rclpy Node subclass (listed before ``Node``) with ``self.p: NodeParams``
    (None in a managed node that is not configured: every change is accepted then, and checked by
    the configure transition).

    The node provides ``_check_extra(changes) -> str | None`` (a refusal reason or None) and
    ``_apply_parameters(old, new)`` (may raise: the change is then not applied), and calls
    ``_install_parameter_callbacks()`` once its state exists.
    """

    p: NodeParams

    def _install_parameter_callbacks(self) -> None:
        """Register the on-set check and the post-set application with rclpy."""
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.add_post_set_parameters_callback(self._on_parameters_set)

    def _warn_unknown_parameters(self) -> None:
        """Log a warning for each parameter given to this node (``-p``, ``--params-file``) that it
        does not have, naming the closest known name: rclpy ignores such overrides silently, so a
        misspelt ``-p lable_source:=2d`` would otherwise start with the default. Known:
        node/params.py and the parameters rclpy declares itself (use_sim_time, ...). Runs before
        the values are validated.
        """
        # rclpy (9.x) keeps the overrides that apply to this node, -p and params files, here
        given = getattr(self, '_parameter_overrides', None)
        if not isinstance(given, dict):
            self.get_logger().debug(
                'this rclpy has no Node._parameter_overrides: unknown names not checked'
            )
            return
        known = {s.name for s in SPECS} | set(self.list_parameters([], 0).names)
        for name, close in unknown_names(given, known):
            hint = f"; did you mean '{close}'?" if close else ''
            self.get_logger().warning(
                f"unknown parameter '{name}' is ignored{hint} "
                f'(depth3dseg_node --help lists the parameters)'
            )

    def _check_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        """Refuse (``successful=False``, reason) a change start-up validation would refuse, with
        the same message, or one to a start-up-only parameter; parameters not in node/params.py
        (use_sim_time, ...) are left to rclpy."""
        changes = {q.name: q.value for q in parameters if q.name in SPEC_BY_NAME}
        if not changes or getattr(self, 'p', None) is None:  # unconfigured: read at configure
            return SetParametersResult(successful=True)
        try:
            updated(self.p, changes)
        except ValueError as err:
            return SetParametersResult(successful=False, reason=str(err))
        reason = self._check_extra(changes)
        if reason:
            return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    def _check_extra(self, changes: dict[str, Any]) -> str | None:
        """The node's own checks of a change that passed ``updated`` (default: none)."""
        return None

    def _apply_parameters(self, old: NodeParams, new: NodeParams) -> None:
        """Prepare what ``new`` needs before it is swapped in (default: nothing)."""

    def set_parameters_atomically(self, parameter_list: list[Parameter]) -> SetParametersResult:
        """rclpy's, after ``_check_parameters``: so a refusal carries this node's reason (rclpy's
        own read-only and range checks, which run before any on-set callback, would word it
        differently). The ``~/set_parameters`` and ``~/set_parameters_atomically`` services call
        this method."""
        result = self._check_parameters(list(parameter_list))
        return (
            result if not result.successful else super().set_parameters_atomically(parameter_list)
        )

    def set_parameters(self, parameter_list: list[Parameter]) -> list[SetParametersResult]:
        """One ``set_parameters_atomically`` per parameter, in order (rclpy's semantics)."""
        return [self.set_parameters_atomically([q]) for q in parameter_list]

    def _on_set_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        """On-set callback: the same check, for any path that reaches rclpy's setter directly."""
        return self._check_parameters(parameters)

    def _on_parameters_set(self, parameters: list[Parameter]) -> None:
        """Post-set callback (executor thread): the new ``NodeParams`` from the stored values,
        ``_apply_parameters``, then one assignment; logs what changed."""
        if not any(q.name in SPEC_BY_NAME for q in parameters) or getattr(self, 'p', None) is None:
            return
        old = self.p
        try:
            new = validate({s.name: self.get_parameter(s.name).value for s in SPECS})
            self._apply_parameters(old, new)
        except Exception as err:  # noqa: BLE001 - checked before; never let a callback raise
            self.get_logger().error(f'parameter change not applied: {err}')
            return
        self.p = new
        changed = [
            f'{s.name}: {getattr(old, s.name)!r} -> {getattr(new, s.name)!r}'
            for s in SPECS
            if getattr(old, s.name) != getattr(new, s.name)
        ]
        if changed:
            self.get_logger().info(
                f'parameters changed ({", ".join(changed)}): applied from the next frame'
            )
