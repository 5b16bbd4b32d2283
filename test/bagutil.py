"""Build small test bags from REAL frames (the real_dir fixture: depth3dseg_ros.samples) with the
rosbags writers.

Reusable by every test that needs a bag::

    from bagutil import make_frames, write_bag, TOPICS
    # NYU 0001 (labelled) + 2 TUM frames, cycled
    frames = make_frames(real_dir, 6)
    bag = write_bag(tmp_path / 'b', frames, storage='mcap', compression='zstd-chunks')

Frames (160x120 by default, so tests stay fast):
* ``nyu0001``: RGB densedepth_nyu_test_rgb/examples/377_image.png, depth
  depth2hha_nyu_demo/demo/0_raw.png (value/10000 m -> mm), 13-class label new_nyu_class13_0001.png
  from the tgz, NYU RGB K.
* ``tum1``, ``tum2``: slambook_rgbd/ch7 {1,2}.png and *_depth.png (value/5000 m -> mm), TUM fr2 K,
no labels. Frame i of ``make_frames`` has its valid depth raised by i mm and its RGB rolled by i
columns, so every frame is distinct and a pairing error shows in the values.

Bags: ``storage`` 'sqlite3' | 'mcap' (rosbag2 directory, version 9) | 'ros1' (one ``.bag`` file);
``compression``: rosbag2 'none' | 'file' | 'message' (zstd) | 'zstd-chunks' | 'lz4-chunks' (MCAP
only); ROS 1 'none' | 'bz2' | 'lz4'. Images: ``rgb_format`` 'raw' (rgb8 Image) | 'png' | 'jpeg'
(CompressedImage); ``depth_format`` 'raw' (16UC1 Image) | '32FC1' (Image, metres) |
'compressedDepth' | 'png' (CompressedImage).
"""

from __future__ import annotations

import sqlite3
import struct
import tarfile
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import cv2
import lz4.frame
import numpy as np
import yaml
from rosbags.interfaces import Nodetype
from rosbags.rosbag1 import Writer as Writer1
from rosbags.rosbag2 import Writer as Writer2
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode, StoragePlugin
from rosbags.typesys import Stores, get_typestore, get_types_from_msg

#: The package's synthetic-bag topic names (the extractor's defaults).
TOPICS = {
    'rgb': '/camera/color/image_raw',
    'camera_info': '/camera/color/camera_info',
    'depth': '/camera/depth/image_raw',
    'labels': '/camera/semantic/labels',
}
NYU_K = np.array(
    [
        [518.85790117450188, 0, 325.58244941119034],
        [0, 519.46961112127485, 253.73616633400465],
        [0, 0, 1],
    ]
)
TUM_K = np.array([[520.908620, 0, 325.141442], [0, 521.007327, 249.701764], [0, 0, 1]])
PERIOD_NS = 33_333_333
T0_NS = 1_700_000_000_123_456_789

#: A custom type no typestore knows (C28).
DETECTIONS_TYPE = 'my_pkg/msg/Detections'
DETECTIONS_MSG = 'std_msgs/Header header\nstring[] labels\nfloat32[] scores\n'


@dataclass(frozen=True)
class Frame:
    """One RGB-D frame: rgb HxWx3 uint8 RGB, depth_mm HxW uint16 (0 = no data) or None,
    labels HxW uint8 class ids or None, K 3x3 float64 at this size, stamp_ns header stamp."""

    rgb: np.ndarray
    depth_mm: Optional[np.ndarray]
    labels: Optional[np.ndarray]
    K: np.ndarray
    stamp_ns: int
    name: str = ''


def _read(path: Path, flags: int = cv2.IMREAD_UNCHANGED) -> np.ndarray:
    img = cv2.imread(str(path), flags)
    if img is None:
        raise FileNotFoundError(f'cannot read image {path}')
    return img


def _scaled(
    rgb_bgr: np.ndarray,
    depth_mm: np.ndarray,
    labels: Optional[np.ndarray],
    K: np.ndarray,
    size: Tuple[int, int],
    name: str,
) -> Frame:
    w, h = size
    h0, w0 = depth_mm.shape
    rgb = cv2.cvtColor(
        cv2.resize(rgb_bgr, (w, h), interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2RGB
    )
    depth = cv2.resize(depth_mm, (w, h), interpolation=cv2.INTER_NEAREST)
    lab = None if labels is None else cv2.resize(labels, (w, h), interpolation=cv2.INTER_NEAREST)
    K1 = K.copy()
    K1[0] *= w / w0
    K1[1] *= h / h0
    K1[2] = [0, 0, 1]
    return Frame(rgb, depth.astype(np.uint16), lab, K1, 0, name)


@lru_cache(maxsize=8)
def load_real_frames(real_dir: str, size: Tuple[int, int] = (160, 120)) -> Tuple[Frame, ...]:
    """The three real frames (nyu0001, tum1, tum2) at ``size`` (w, h); stamps 0."""
    real = Path(real_dir)
    rgb = _read(real / 'densedepth_nyu_test_rgb/examples/377_image.png', cv2.IMREAD_COLOR)
    raw = _read(real / 'depth2hha_nyu_demo/demo/0_raw.png').astype(np.float64)
    depth = np.round(raw / 10.0).astype(np.uint16)  # value/10000 m -> mm
    with tarfile.open(
        real / 'nyuv2_meta_data_13class_labels/test_labels_13/nyuv2_test_class13.tgz'
    ) as tf:
        member = next(m for m in tf.getmembers() if m.name.endswith('new_nyu_class13_0001.png'))
        buf = np.frombuffer(tf.extractfile(member).read(), np.uint8)
    labels = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)
    frames = [_scaled(rgb, depth, labels, NYU_K, size, 'nyu0001')]
    for i in (1, 2):
        trgb = _read(real / f'slambook_rgbd/ch7/{i}.png', cv2.IMREAD_COLOR)
        tdep = np.round(_read(real / f'slambook_rgbd/ch7/{i}_depth.png').astype(np.float64) / 5.0)
        frames.append(_scaled(trgb, tdep.astype(np.uint16), None, TUM_K, size, f'tum{i}'))
    return tuple(frames)


def make_frames(
    real_dir: Path | str,
    n: int,
    size: Tuple[int, int] = (160, 120),
    sources: Sequence[str] = ('nyu0001', 'tum1', 'tum2'),
    t0_ns: int = T0_NS,
    period_ns: int = PERIOD_NS,
) -> List[Frame]:
    """``n`` distinct frames cycling over ``sources``; frame i has stamp t0 + i*period."""
    base = {f.name: f for f in load_real_frames(str(real_dir), tuple(size))}
    out = []
    for i in range(n):
        f = base[sources[i % len(sources)]]
        depth = f.depth_mm.copy()
        depth[depth > 0] += np.uint16(i)
        out.append(
            replace(
                f,
                rgb=np.ascontiguousarray(np.roll(f.rgb, i, axis=1)),
                depth_mm=depth,
                stamp_ns=t0_ns + i * period_ns,
            )
        )
    return out


# -- messages ---------------------------------------------------------------------------------
_NP = {
    'bool': np.bool_,
    'byte': np.uint8,
    'char': np.uint8,
    'int8': np.int8,
    'uint8': np.uint8,
    'int16': np.int16,
    'uint16': np.uint16,
    'int32': np.int32,
    'uint32': np.uint32,
    'int64': np.int64,
    'uint64': np.uint64,
    'float32': np.float32,
    'float64': np.float64,
}


def _default(ts: Any, desc: Tuple[Any, Any]) -> Any:
    kind, arg = desc
    if kind == Nodetype.BASE:
        name = arg[0]
        return '' if name == 'string' else (False if name == 'bool' else _NP[name](0).item())
    if kind == Nodetype.NAME:
        return build_msg(ts, arg)
    sub, count = arg
    if sub[0] == Nodetype.BASE and sub[1][0] in _NP:
        return np.zeros(count if kind == Nodetype.ARRAY else 0, _NP[sub[1][0]])
    return [_default(ts, sub) for _ in range(count if kind == Nodetype.ARRAY else 0)]


def build_msg(ts: Any, msgtype: str, **fields: Any) -> Any:
    """A rosbags message of ``msgtype`` from typestore ``ts``; unspecified fields get zero
    defaults."""
    values = {
        name: fields[name] if name in fields else _default(ts, desc)
        for name, desc in ts.fielddefs[msgtype][1]
    }
    return ts.types[msgtype](**values)


def header(ts: Any, stamp_ns: int, frame_id: str = 'camera_color_optical_frame') -> Any:
    """std_msgs/Header with the stamp split into sec/nanosec (ROS 1 header gets seq 0)."""
    stamp = ts.types['builtin_interfaces/msg/Time'](
        sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9
    )
    return build_msg(ts, 'std_msgs/msg/Header', stamp=stamp, frame_id=frame_id)


def image_msg(ts: Any, arr: np.ndarray, encoding: str, stamp_ns: int) -> Any:
    """sensor_msgs/Image (little endian, unpadded rows) from an HxW[xC] array."""
    h, w = arr.shape[:2]
    data = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
    return build_msg(
        ts,
        'sensor_msgs/msg/Image',
        header=header(ts, stamp_ns),
        height=h,
        width=w,
        encoding=encoding,
        is_bigendian=0,
        step=data.size // h,
        data=data,
    )


def compressed_msg(ts: Any, arr: np.ndarray, fmt: str, stamp_ns: int) -> Any:
    """sensor_msgs/CompressedImage: fmt 'jpeg'/'png' (arr RGB or mono), '16UC1 png' (16-bit PNG),
    or 'compressedDepth' (image_transport compressed_depth: 12-byte config header + 16-bit PNG)."""
    if fmt == 'compressedDepth':
        ok, png = cv2.imencode('.png', arr)
        payload = (
            struct.pack('<iff', 0, 0.0, 0.0) + png.tobytes()
        )  # format INV_DEPTH, unused quant
        fmt_str = '16UC1; compressedDepth png'
    else:
        ext = '.jpg' if fmt == 'jpeg' else '.png'
        img = cv2.cvtColor(arr, cv2.COLOR_RGB2BGR) if arr.ndim == 3 else arr
        ok, enc = cv2.imencode(ext, img)
        payload = enc.tobytes()
        fmt_str = {'jpeg': 'rgb8; jpeg compressed bgr8', 'png': 'rgb8; png compressed bgr8'}.get(
            fmt, fmt
        )
    assert ok
    return build_msg(
        ts,
        'sensor_msgs/msg/CompressedImage',
        header=header(ts, stamp_ns),
        format=fmt_str,
        data=np.frombuffer(payload, np.uint8).copy(),
    )


def camera_info_msg(ts: Any, K: np.ndarray, width: int, height: int, stamp_ns: int) -> Any:
    """sensor_msgs/CameraInfo with K, R = I, P = [K|0], plumb_bob with zero D (ROS 1 or 2 field
    names)."""
    names = [n for n, _ in ts.fielddefs['sensor_msgs/msg/CameraInfo'][1]]
    up = 'K' in names
    P = np.zeros((3, 4))
    P[:, :3] = K
    vals = {
        ('D' if up else 'd'): np.zeros(5),
        ('K' if up else 'k'): np.asarray(K, float).reshape(9),
        ('R' if up else 'r'): np.eye(3).reshape(9),
        ('P' if up else 'p'): P.reshape(12),
    }
    return build_msg(
        ts,
        'sensor_msgs/msg/CameraInfo',
        header=header(ts, stamp_ns),
        height=height,
        width=width,
        distortion_model='plumb_bob',
        **vals,
    )


# -- bags -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExtraTopic:
    """An extra topic with one default-valued message per frame (e.g. a custom type, C28)."""

    topic: str = '/det'
    msgtype: str = DETECTIONS_TYPE
    msgdef: str = DETECTIONS_MSG


def frame_messages(
    ts: Any,
    frames: Sequence[Frame],
    *,
    rgb_format: str = 'raw',
    depth_format: str = 'raw',
    with_depth: bool = True,
    with_labels: bool = True,
    with_info: bool = True,
    topics: Mapping[str, str] = TOPICS,
    stamp_offsets_ns: Optional[Mapping[str, int]] = None,
    drop: Optional[Mapping[str, Iterable[int]]] = None,
    extra: Sequence[ExtraTopic] = (),
) -> List[Tuple[int, str, str, Any]]:
    """All messages of a bag, sorted by receive time: ``[(bag_time_ns, topic, msgtype, msg)]``.

    ``stamp_offsets_ns[role]`` shifts that role's header stamps; ``drop[role]`` lists frame indices
    for which that role has no message. A frame without labels/depth gets no such message.
    """
    offs = dict(stamp_offsets_ns or {})
    dropped = {k: set(v) for k, v in (drop or {}).items()}
    out: List[Tuple[int, str, str, Any]] = []
    for i, f in enumerate(frames):
        h, w = f.rgb.shape[:2]

        def add(role: str, msgtype: str, make: Any) -> None:
            if i in dropped.get(role, ()):
                return
            stamp = f.stamp_ns + offs.get(role, 0)
            out.append((stamp + 1_000_000, topics.get(role, role), msgtype, make(stamp)))

        if rgb_format == 'raw':
            add('rgb', 'sensor_msgs/msg/Image', lambda s: image_msg(ts, f.rgb, 'rgb8', s))
        else:
            add(
                'rgb',
                'sensor_msgs/msg/CompressedImage',
                lambda s: compressed_msg(ts, f.rgb, rgb_format, s),
            )
        if with_info:
            add(
                'camera_info',
                'sensor_msgs/msg/CameraInfo',
                lambda s: camera_info_msg(ts, f.K, w, h, s),
            )
        if with_depth and f.depth_mm is not None:
            if depth_format == 'raw':
                add(
                    'depth',
                    'sensor_msgs/msg/Image',
                    lambda s: image_msg(ts, f.depth_mm, '16UC1', s),
                )
            elif depth_format == '32FC1':  # metres, NaN = no data
                m = np.where(
                    f.depth_mm > 0, f.depth_mm.astype(np.float32) / np.float32(1000), np.nan
                )
                add(
                    'depth',
                    'sensor_msgs/msg/Image',
                    lambda s: image_msg(ts, m.astype(np.float32), '32FC1', s),
                )
            else:
                fmt = 'compressedDepth' if depth_format == 'compressedDepth' else '16UC1 png'
                add(
                    'depth',
                    'sensor_msgs/msg/CompressedImage',
                    lambda s: compressed_msg(ts, f.depth_mm, fmt, s),
                )
        if with_labels and f.labels is not None:
            add('labels', 'sensor_msgs/msg/Image', lambda s: image_msg(ts, f.labels, 'mono8', s))
        for ex in extra:
            out.append(
                (
                    f.stamp_ns + 2_000_000,
                    ex.topic,
                    ex.msgtype,
                    build_msg(ts, ex.msgtype, header=header(ts, f.stamp_ns)),
                )
            )
    out.sort(key=lambda m: m[0])
    return out


def bag_typestore(storage: str, extra: Sequence[ExtraTopic] = ()) -> Any:
    """Typestore for writing: ros1_noetic for 'ros1', else ros2_kilted; ``extra`` types
    registered."""
    ts = get_typestore(Stores.ROS1_NOETIC if storage == 'ros1' else Stores.ROS2_KILTED)
    for ex in extra:
        ts.register(get_types_from_msg(ex.msgdef, ex.msgtype))
    return ts


def write_bag(
    path: Path | str,
    frames: Sequence[Frame],
    *,
    storage: str = 'sqlite3',
    compression: str = 'none',
    strip_definitions: bool = False,
    extra: Sequence[ExtraTopic] = (),
    **kwargs: Any,
) -> Path:
    """Write ``frames`` as a bag at ``path`` and return it (rosbag2: the directory; ROS 1: the
    file).

    ``strip_definitions`` removes the stored message definitions from a ``.db3`` bag (like bags
    recorded before Iron, C28). Other keyword arguments go to :func:`frame_messages`.
    """
    ts = bag_typestore(storage, extra)
    msgs = frame_messages(ts, frames, extra=extra, **kwargs)
    return write_messages(
        path,
        ts,
        msgs,
        storage=storage,
        compression=compression,
        strip_definitions=strip_definitions,
    )


def write_messages(
    path: Path | str,
    ts: Any,
    msgs: Sequence[Tuple[int, str, str, Any]],
    *,
    storage: str = 'sqlite3',
    compression: str = 'none',
    strip_definitions: bool = False,
    chunk_codec: Optional[str] = None,
) -> Path:
    """Write ``[(bag_time_ns, topic, msgtype, msg)]`` (msg: rosbags object, or bytes already
    serialized) with the rosbags writers; see the module docstring for storage/compression.
    ``chunk_codec`` forces the MCAP or ROS 1 chunk compression name with an identity compressor (to
    build a bag with a codec no reader supports, C29)."""
    path = Path(path)
    ros1 = storage == 'ros1'
    serialize = ts.serialize_ros1 if ros1 else ts.serialize_cdr
    if ros1:
        writer: Any = Writer1(path)
        if compression != 'none':
            writer.set_compression(Writer1.CompressionFormat[compression.upper()])
        writer.chunk_threshold = 256 * 1024  # several chunks even for small frames
    else:
        plugin = StoragePlugin.MCAP if storage == 'mcap' else StoragePlugin.SQLITE3
        writer = Writer2(path, version=9, storage_plugin=plugin)
        mode = {
            'none': CompressionMode.NONE,
            'file': CompressionMode.FILE,
            'message': CompressionMode.MESSAGE,
            'zstd-chunks': CompressionMode.STORAGE,
            'lz4-chunks': CompressionMode.NONE,
        }[compression]
        writer.set_compression(mode, CompressionFormat.ZSTD)
    with writer:
        if (
            compression == 'lz4-chunks'
        ):  # rosbags writes zstd chunks only; lz4 frames are MCAP's lz4
            writer.storage.compression = 'lz4'
            writer.storage.compressor = lz4.frame.compress
        if chunk_codec is not None and ros1:
            writer.compression_format = chunk_codec
            writer.compressor = bytes
        elif chunk_codec is not None:
            writer.storage.compression = chunk_codec
            writer.storage.compressor = bytes
        conns: Dict[Tuple[str, str], Any] = {}
        for t_ns, topic, msgtype, msg in msgs:
            key = (topic, msgtype)
            if key not in conns:
                conns[key] = writer.add_connection(topic, msgtype, typestore=ts)
            data = msg if isinstance(msg, (bytes, bytearray)) else serialize(msg, msgtype)
            writer.write(conns[key], t_ns, data)
    if strip_definitions:
        strip_message_definitions(path)
    return path


def strip_message_definitions(bag_dir: Path) -> None:
    """Drop the message_definitions table of every .db3 in a plain rosbag2 bag (schema 3,
    pre-Iron)."""
    dbs = sorted(Path(bag_dir).glob('*.db3'))
    if not dbs:
        raise ValueError(f'{bag_dir}: no plain .db3 file to strip')
    for db in dbs:
        con = sqlite3.connect(db)
        con.executescript('DROP TABLE message_definitions; UPDATE schema SET schema_version = 3;')
        con.commit()
        con.close()


def set_metadata_compression(bag_dir: Path, mode: str, fmt: str) -> None:
    """Rewrite metadata.yaml's compression_mode/format (to build an unsupported variant, C29)."""
    meta_path = Path(bag_dir) / 'metadata.yaml'
    meta = yaml.safe_load(meta_path.read_text())
    info = meta['rosbag2_bagfile_information']
    info['compression_mode'], info['compression_format'] = mode, fmt
    meta_path.write_text(yaml.safe_dump(meta))


def read_png(path: Path | str) -> np.ndarray:
    """A PNG as stored (IMREAD_UNCHANGED); 3-channel images are returned RGB."""
    img = _read(Path(path))
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB) if img.ndim == 3 else img


__all__ = [
    'TOPICS',
    'Frame',
    'ExtraTopic',
    'make_frames',
    'load_real_frames',
    'build_msg',
    'image_msg',
    'compressed_msg',
    'camera_info_msg',
    'frame_messages',
    'write_bag',
    'write_messages',
    'bag_typestore',
    'header',
    'strip_message_definitions',
    'set_metadata_compression',
    'read_png',
]


def damage_mcap_chunk(mcap: Path, k: int, n: int = 64) -> int:
    """Give every uncompressed chunk of the closed MCAP file ``mcap`` its CRC-32, as rosbag2's
    MCAP writer does (the rosbags writer leaves 0: "not checked"), then flip ``n`` bytes a third
    of the way into chunk ``k`` (bit rot, a broken copy). Returns chunk ``k``'s file offset."""
    import zlib

    from rosbags.rosbag2.storage_mcap import McapReader

    reader = McapReader(mcap)
    reader.open()
    try:
        chunks = [(c.chunk_start_offset, c.chunk_length) for c in reader.chunks]
    finally:
        reader.close()
    data = bytearray(mcap.read_bytes())
    for start, _length in chunks:
        head = start + 9  # after the opcode and the record length
        usize = struct.unpack_from('<Q', data, head + 16)[0]
        comp = struct.unpack_from('<I', data, head + 28)[0]  # length of the compression string
        records = head + 32 + comp + 8
        struct.pack_into('<I', data, head + 24, zlib.crc32(bytes(data[records : records + usize])))
    start, length = chunks[k]
    at = start + length // 3
    data[at : at + n] = bytes(b ^ 0xFF for b in data[at : at + n])
    mcap.write_bytes(bytes(data))
    return start
