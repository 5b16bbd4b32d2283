"""Launch depth3dseg_node on a camera (``ros2 launch depth3dseg_ros depth3dseg.launch.py``).

Arguments (``name:=value``):
  model_file   model file ('' = the shipped models/depth3dseg_nyu13.pt)
  namespace    namespace of the node (one per camera), default ''
  params_file  parameter YAML, default <share>/config/depth3dseg.yaml
  image        camera image topic remapped onto the node's ``image`` input
  camera_info  camera CameraInfo topic remapped onto ``camera_info``
  depth        depth image topic registered to the colour image, remapped onto ``depth`` (used
               with rgbd:=true or use_measured_depth in the params file)
  rgbd         true: an RGB-D camera, use its measured depth (parameter use_measured_depth)
  geometry_model  geometry model file for the RGB-D late fusion (parameter geometry_model; '' =
               the params file's)
  device       auto | cuda | cpu
  use_sim_time true when replaying a bag with /clock
  rviz         true: also start rviz2 with config/depth3dseg.rviz, its topics renamed into
               ``namespace`` (a copy written at launch time, depth3dseg_ros.node.rviz_config)
  rviz_config  the RViz file to start from (default <share>/config/depth3dseg.rviz)
  cloud_rgb    camera | class: what ~/points' rgb field holds; '' (default) = class when rviz
               is true (the "Labelled cloud" display shows class colours), else the params file's
  managed      true: start depth3dseg_lifecycle_node, the managed (lifecycle) node, instead; it
               starts unconfigured (``ros2 lifecycle set /<namespace>/depth3dseg configure``,
               then ``activate``; docs/node.md "Managed (lifecycle) node")

Example (the bundled bag's topics are the defaults):
  ros2 launch depth3dseg_ros depth3dseg.launch.py namespace:=front device:=cuda rviz:=true

Needs ROS 2 ``launch`` / ``launch_ros`` (a ROS install; they are not on PyPI: in the pip-only setup
start ``depth3dseg_node --ros-args ...`` directly, see docs/node.md). FASTDDS_BUILTIN_TRANSPORTS is
set to LARGE_DATA unless the environment already has a value (depth3dseg_ros.rosenv).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, SetEnvironmentVariable
from launch.substitutions import EnvironmentVariable, LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

PACKAGE = 'depth3dseg_ros'


def _node_and_rviz(context):
    """OpaqueFunction (the launch arguments are known here): depth3dseg_node (or, with
    ``managed:=true``, depth3dseg_lifecycle_node) and, with
    ``rviz:=true``, rviz2 on a copy of the RViz file whose topics follow ``namespace``."""
    from depth3dseg_ros.node.rviz_config import (
        launch_flag,
        node_executable,
        node_overrides,
        write_namespaced_rviz,
    )

    def arg(name):
        return LaunchConfiguration(name).perform(context)

    node = Node(
        package=PACKAGE,
        executable=node_executable(arg('managed')),  # depth3dseg_node | depth3dseg_lifecycle_node
        name='depth3dseg',
        namespace=LaunchConfiguration('namespace'),
        output='screen',
        parameters=[
            LaunchConfiguration('params_file'),
            {
                # typed, so '' stays an empty string instead of YAML null
                'model_file': ParameterValue(LaunchConfiguration('model_file'), value_type=str),
                'device': ParameterValue(LaunchConfiguration('device'), value_type=str),
                'use_sim_time': ParameterValue(
                    LaunchConfiguration('use_sim_time'), value_type=bool
                ),
            },
            node_overrides(arg('rviz'), arg('cloud_rgb'), arg('rgbd'), arg('geometry_model')),
        ],
        remappings=[
            ('image', LaunchConfiguration('image')),  # use_compressed: <image>/compressed follows
            ('camera_info', LaunchConfiguration('camera_info')),
            ('depth', LaunchConfiguration('depth')),  # subscribed with use_measured_depth only
        ],
    )
    if not launch_flag(arg('rviz'), 'rviz'):
        return [node]
    rviz = Node(
        package='rviz2',
        executable='rviz2',
        name='rviz2',
        namespace=LaunchConfiguration('namespace'),
        output='screen',
        arguments=['-d', write_namespaced_rviz(arg('rviz_config'), arg('namespace'))],
        parameters=[
            {'use_sim_time': ParameterValue(LaunchConfiguration('use_sim_time'), value_type=bool)}
        ],
    )
    return [node, rviz]


def generate_launch_description():
    """The launch description: the arguments, the DDS transport default, depth3dseg_node and
    (``rviz:=true``) rviz2."""
    share = get_package_share_directory(PACKAGE)
    args = [
        DeclareLaunchArgument(
            'model_file',
            default_value='',
            description="model file ('' = the shipped depth3dseg_nyu13.pt)",
        ),
        DeclareLaunchArgument(
            'namespace', default_value='', description='node namespace (one per camera)'
        ),
        DeclareLaunchArgument(
            'params_file',
            default_value=os.path.join(share, 'config', 'depth3dseg.yaml'),
            description='parameter YAML (keys under /**)',
        ),
        DeclareLaunchArgument(
            'image',
            default_value='/camera/color/image_raw',
            description='input image topic (sensor_msgs/Image)',
        ),
        DeclareLaunchArgument(
            'camera_info',
            default_value='/camera/color/camera_info',
            description='input CameraInfo topic',
        ),
        DeclareLaunchArgument(
            'depth',
            default_value='/camera/aligned_depth_to_color/image_raw',
            description='depth image topic registered to the colour image (with rgbd:=true)',
        ),
        DeclareLaunchArgument(
            'rgbd',
            default_value='false',
            description='true: use the measured depth (parameter use_measured_depth)',
        ),
        DeclareLaunchArgument(
            'geometry_model',
            default_value='',
            description="geometry model for the RGB-D late fusion ('' = the params file's)",
        ),
        DeclareLaunchArgument('device', default_value='auto', description='auto | cuda | cpu'),
        DeclareLaunchArgument(
            'use_sim_time', default_value='false', description='use /clock (bag replay)'
        ),
        DeclareLaunchArgument(
            'rviz', default_value='false', description='also start rviz2 (topics in namespace)'
        ),
        DeclareLaunchArgument(
            'rviz_config',
            default_value=os.path.join(share, 'config', 'depth3dseg.rviz'),
            description='RViz file; its /depth3dseg/... topics are renamed into namespace',
        ),
        DeclareLaunchArgument(
            'cloud_rgb',
            default_value='',
            description="camera | class: ~/points rgb field; '' = class with rviz, else params",
        ),
        DeclareLaunchArgument(
            'managed',
            default_value='false',
            description='true: the managed (lifecycle) node depth3dseg_lifecycle_node',
        ),
    ]
    transport = SetEnvironmentVariable(
        'FASTDDS_BUILTIN_TRANSPORTS',
        EnvironmentVariable('FASTDDS_BUILTIN_TRANSPORTS', default_value='LARGE_DATA'),
    )
    # the transport first: it applies to the processes started after it (node and rviz2)
    return LaunchDescription(args + [transport, OpaqueFunction(function=_node_and_rviz)])
