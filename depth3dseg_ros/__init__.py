"""depth3dseg_ros: RGB -> depth + 2D semantic segmentation -> labelled 3D cloud, for ROS 2.

Layout (see docs/ARCHITECTURE.md):
  core/      pure PyTorch/numpy method (docs/method.md M1-M9); imports neither rclpy nor rosbags
  ros/       message adapters (Image, CompressedImage, CameraInfo, PointCloud2), duck-typed
  node/      the rclpy node, its parameters, the demo
  bags/      rosbags-based extraction and replay
  training/  dataset, train and eval entry points
  synth/     pybullet-rendered labelled RGB-D bags
"""

__version__ = '0.1.0'
