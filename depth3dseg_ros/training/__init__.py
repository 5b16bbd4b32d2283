"""depth3dseg_ros.training (see docs/ARCHITECTURE.md)."""
