"""Pure core (docs/method.md M1-M9): imports neither rclpy nor rosbags
(test/test_core_purity.py)."""
