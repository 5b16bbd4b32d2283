"""depth3dseg_ros.ros (see docs/ARCHITECTURE.md)."""
