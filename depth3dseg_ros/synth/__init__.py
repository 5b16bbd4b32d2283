"""depth3dseg_ros.synth (see docs/ARCHITECTURE.md)."""
