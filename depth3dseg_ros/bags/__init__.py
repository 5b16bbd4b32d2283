"""depth3dseg_ros.bags (see docs/ARCHITECTURE.md)."""
