"""depth3dseg_ros.node (see docs/ARCHITECTURE.md)."""
