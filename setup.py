"""ament_python package definition for depth3dseg_ros.

Works unchanged for ``colcon build`` in a ROS 2 workspace and for ``pip install -e .`` in the
pip-only path (see README). Every file under launch/, config/ and models/ is installed under
``share/depth3dseg_ros`` (test/test_packaging.py checks the list against the tree).
"""
from glob import glob
import os

from setuptools import find_packages, setup

PACKAGE = 'depth3dseg_ros'


def _files(pattern):
    return sorted(f for f in glob(pattern) if os.path.isfile(f))


setup(
    name=PACKAGE,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*', 'bench', 'scripts']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + PACKAGE]),
        ('share/' + PACKAGE, ['package.xml']),
        ('share/' + PACKAGE + '/launch', _files('launch/*.launch.py')),
        ('share/' + PACKAGE + '/config', _files('config/*.yaml') + _files('config/*.rviz')),
        ('share/' + PACKAGE + '/models', _files('models/*')),
    ],
    install_requires=['setuptools', 'numpy', 'pyyaml'],
    extras_require={'test': ['pytest', 'pytest-timeout', 'hypothesis']},
    zip_safe=False,
    maintainer='depth3dseg_ros maintainers',
    maintainer_email='maintainers@depth3dseg.dev',
    description='RGB -> depth + 2D/3D semantic segmentation -> labelled PointCloud2, as a ROS 2 node.',
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'depth3dseg_node = depth3dseg_ros.node.main:main',
            'depth3dseg_lifecycle_node = depth3dseg_ros.node.lifecycle:main',
            'depth3dseg-extract = depth3dseg_ros.bags.extract:main',
            'depth3dseg-train = depth3dseg_ros.training.train:main',
            'depth3dseg-eval = depth3dseg_ros.training.evaluate:main',
            'depth3dseg-compare = depth3dseg_ros.training.compare:main',
            'depth3dseg-calibrate = depth3dseg_ros.training.calibrate:main',
            'depth3dseg-replay = depth3dseg_ros.bags.replay:main',
            'depth3dseg-synth = depth3dseg_ros.synth.cli:main',
            'depth3dseg-synth-cycles = depth3dseg_ros.synth.cycles_cli:main',
            'depth3dseg-demo = depth3dseg_ros.node.demo:main',
            'depth3dseg-export = depth3dseg_ros.export:main',
        ],
    },
)
