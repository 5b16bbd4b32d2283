"""Write labelled RGB-D frames to a rosbag2 (MCAP with zstd chunks by default, or sqlite3) with
rosbags.

Topics (the defaults of ``depth3dseg-extract`` and the node's demo remaps):

| topic | type | encoding |
|---|---|---|
| ``/camera/color/image_raw`` | sensor_msgs/msg/Image | rgb8 |
| ``/camera/color/camera_info`` | sensor_msgs/msg/CameraInfo | K of the colour image, P = [K 0] |
| ``/camera/depth/image_raw`` | sensor_msgs/msg/Image | 16UC1 millimetres, 0 = no data |
| ``/camera/semantic/labels`` | sensor_msgs/msg/Image | mono8 NYU13 class ids, 0 = void |

Every message of one frame carries the same header (stamp, frame_id ``camera_color_optical_frame``,
since depth and labels are registered to the colour camera) and is written with the bag timestamp
equal to the header stamp, as a recorder on the robot would see them. Messages are built by
``ros.image.cv2_to_imgmsg`` / ``ros.camera_info.make_camera_info`` with the rosbags ROS 2 Kilted
classes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from depth3dseg_ros.ros.camera_info import make_camera_info
from depth3dseg_ros.ros.image import cv2_to_imgmsg

TOPIC_RGB = '/camera/color/image_raw'
TOPIC_INFO = '/camera/color/camera_info'
TOPIC_DEPTH = '/camera/depth/image_raw'
TOPIC_LABELS = '/camera/semantic/labels'
FRAME_ID = 'camera_color_optical_frame'
STORAGES = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}
#: stamp of the first frame of a synthetic bag (ns) and the frame rate of its stamps (Hz)
START_NS = 1_750_000_000 * 10**9
RATE_HZ = 30


def stamp_ns(index: int) -> int:
    """Header/bag stamp of frame ``index``: START_NS + index/30 s, rounded to the nanosecond."""
    return START_NS + (index * 10**9 + RATE_HZ // 2) // RATE_HZ


class RgbdBagWriter:
    """Context manager writing one frame at a time to a new rosbag2 directory ``path``.

    Args:
        path: bag directory to create (must not exist).
        storage: 'mcap' (default) or 'sqlite3'.
        compress: zstd chunk compression (MCAP only; sqlite3 bags are written uncompressed).
        with_depth / with_labels: create the depth / label connections (a frame may still omit
        them).
    Raises:
        ValueError: unknown storage.
        rosbags.rosbag2.WriterError: ``path`` exists.
    """

    def __init__(
        self,
        path: Path | str,
        storage: str = 'mcap',
        compress: bool = True,
        with_depth: bool = True,
        with_labels: bool = True,
        frame_id: str = FRAME_ID,
    ):
        if storage not in STORAGES:
            raise ValueError(f'storage={storage!r} must be one of {sorted(STORAGES)}')
        self.ts = get_typestore(Stores.ROS2_KILTED)
        self.Image = self.ts.types['sensor_msgs/msg/Image']
        self.CameraInfo = self.ts.types['sensor_msgs/msg/CameraInfo']
        self.Header = self.ts.types['std_msgs/msg/Header']
        self.Time = self.ts.types['builtin_interfaces/msg/Time']
        self.frame_id = frame_id
        self.writer = Writer(Path(path), version=9, storage_plugin=STORAGES[storage])
        if compress and storage == 'mcap':
            self.writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        self.writer.open()
        add = self.writer.add_connection
        self.c_rgb = add(TOPIC_RGB, 'sensor_msgs/msg/Image', typestore=self.ts)
        self.c_info = add(TOPIC_INFO, 'sensor_msgs/msg/CameraInfo', typestore=self.ts)
        self.c_depth = (
            add(TOPIC_DEPTH, 'sensor_msgs/msg/Image', typestore=self.ts) if with_depth else None
        )
        self.c_labels = (
            add(TOPIC_LABELS, 'sensor_msgs/msg/Image', typestore=self.ts) if with_labels else None
        )
        self.count = 0

    def __enter__(self) -> 'RgbdBagWriter':
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Finish the bag (writes the MCAP summary and metadata.yaml)."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def _put(self, conn, stamp_ns: int, msg) -> None:
        self.writer.write(conn, stamp_ns, self.ts.serialize_cdr(msg, conn.msgtype))

    def write_frame(
        self,
        stamp_ns: int,
        rgb: np.ndarray,
        K: np.ndarray,
        depth_mm: Optional[np.ndarray] = None,
        labels: Optional[np.ndarray] = None,
    ) -> None:
        """Write one frame: rgb (H×W×3 uint8, RGB), its K (3×3), optional depth (H×W uint16 mm,
        registered to rgb) and labels (H×W uint8 class ids), all stamped ``stamp_ns`` (header and
        bag).

        Raises:
            ValueError: sizes differ between rgb/depth/labels, wrong dtype, or a missing
                connection.
        """
        rgb = np.asarray(rgb)
        if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
            raise ValueError(f'rgb shape={rgb.shape} dtype={rgb.dtype} must be H×W×3 uint8')
        h, w = rgb.shape[:2]
        for name, arr, dt in (('depth_mm', depth_mm, np.uint16), ('labels', labels, np.uint8)):
            if arr is not None and (arr.shape != (h, w) or arr.dtype != dt):
                raise ValueError(
                    f'{name} shape={arr.shape} dtype={arr.dtype} must be {(h, w)} {np.dtype(dt)}'
                )
        if depth_mm is not None and self.c_depth is None:
            raise ValueError('depth_mm given but the writer was created with with_depth=False')
        if labels is not None and self.c_labels is None:
            raise ValueError('labels given but the writer was created with with_labels=False')
        stamp_ns = int(stamp_ns)
        header = self.Header(
            stamp=self.Time(sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9),
            frame_id=self.frame_id,
        )
        self._put(self.c_rgb, stamp_ns, cv2_to_imgmsg(rgb, 'rgb8', header, self.Image))
        self._put(
            self.c_info,
            stamp_ns,
            make_camera_info(K, w, h, header, self.CameraInfo, D=np.zeros(5)),
        )
        if depth_mm is not None:
            self._put(self.c_depth, stamp_ns, cv2_to_imgmsg(depth_mm, '16UC1', header, self.Image))
        if labels is not None:
            self._put(self.c_labels, stamp_ns, cv2_to_imgmsg(labels, 'mono8', header, self.Image))
        self.count += 1
