"""ros.pointcloud2: labelled PointCloud2 writer/reader (C09, C12, C14, C15, C20, C25 part) and the
PLY writer."""

import struct
import types

import numpy as np
import pytest
from rclpy.serialization import deserialize_message, serialize_message
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import PointCloud2, PointField

from depth3dseg_ros.core.depth import depth_to_meters
from depth3dseg_ros.ros.pointcloud2 import (
    FLOAT32,
    UINT16,
    UINT32,
    cloud_dtype,
    create_cloud,
    create_cloud_from_array,
    create_cloud_from_depth,
    dtype_from_fields,
    pack_rgb,
    read_points,
    unpack_rgb,
    write_ply,
)

TS = get_typestore(Stores.ROS2_KILTED)
RB_CLOUD = TS.types['sensor_msgs/msg/PointCloud2']
K9 = np.array([[500.0, 0, 0], [0, 500.0, 0], [0, 0, 1]])


def field(name, offset, datatype, count=1):
    return types.SimpleNamespace(name=name, offset=offset, datatype=datatype, count=count)


def raw_cloud(fields, point_step, width, height, data, row_step=None, is_bigendian=False):
    return types.SimpleNamespace(
        fields=fields,
        point_step=point_step,
        width=width,
        height=height,
        row_step=row_step if row_step is not None else width * point_step,
        data=data,
        is_bigendian=is_bigendian,
    )


def xyz_of(arr):
    return np.stack([arr['x'], arr['y'], arr['z']], axis=-1)


# ---------------------------------------------------------------- C09 zero depth is no point
@pytest.mark.parametrize(
    'depth,enc',
    [(np.array([[0.0, 2.0]], np.float32), '32FC1'), (np.array([[0, 2000]], np.uint16), '16UC1')],
)
def test_c09_zero_depth_never_a_point_at_origin(depth, enc):
    d = depth_to_meters(depth, enc)
    org = read_points(create_cloud_from_depth(None, d, K9), organized=True)
    assert org.shape == (1, 2)
    assert np.isnan(xyz_of(org)[0, 0]).all()
    assert tuple(xyz_of(org)[0, 1]) == pytest.approx((0.004, 0.0, 2.0))
    msg = create_cloud_from_depth(None, d, K9, organized=False)
    unorg = read_points(msg)
    assert (msg.height, msg.width) == (1, 1) and msg.is_dense
    assert tuple(xyz_of(unorg)[0]) == pytest.approx((0.004, 0.0, 2.0))
    assert not (xyz_of(unorg) == 0).all(axis=1).any()


# ---------------------------------------------------------------- C12 trailing padding
def test_c12_point_step_with_trailing_padding_read():
    fields = [field('x', 0, FLOAT32), field('y', 4, FLOAT32), field('z', 8, FLOAT32)]
    data = struct.pack('<3f4x', 1, 2, 3) + struct.pack('<3f4x', 4, 5, 6)
    pts = read_points(raw_cloud(fields, 16, 2, 1, data, row_step=32))
    assert xyz_of(pts).tolist() == [[1, 2, 3], [4, 5, 6]]
    dt = dtype_from_fields(fields, 16)
    assert dt == np.dtype(
        {'names': ['x', 'y', 'z'], 'formats': ['<f4'] * 3, 'offsets': [0, 4, 8], 'itemsize': 16}
    )


#: an Ouster-like padded layout: fields end at 36 bytes, point_step 48
LIDAR_DT = np.dtype(
    {
        'names': ['x', 'y', 'z', 'intensity', 't', 'ring', 'range'],
        'formats': ['<f4', '<f4', '<f4', '<f4', '<f8', '<u2', '<u4'],
        'offsets': [0, 4, 8, 16, 20, 28, 32],
        'itemsize': 48,
    }
)


def test_c12_padded_lidar_layout_round_trip_through_rclpy():
    """Fields end at 36 bytes, point_step 48 (the layout of the report): read, modify, write,
    read."""
    dt = LIDAR_DT
    pts = np.zeros((2, 3), dt)
    pts['x'] = np.arange(6).reshape(2, 3)
    pts['t'] = 1e-3 * np.arange(6).reshape(2, 3)
    pts['ring'] = 7
    msg = create_cloud_from_array(None, pts)
    assert (msg.point_step, msg.row_step, len(msg.data)) == (48, 144, 288)
    back = read_points(deserialize_message(serialize_message(msg), PointCloud2), organized=True)
    assert back['x'].tolist() == pts['x'].tolist() and back['t'].tolist() == pts['t'].tolist()
    back['intensity'] = 5.0  # read result is writable; write it again with the same layout
    again = read_points(create_cloud_from_array(None, back.astype(dt)), organized=True)
    assert (again['intensity'] == 5.0).all() and (again['ring'] == 7).all()


def test_c12_read_then_write_keeps_the_padded_layout_without_a_cast():
    """read_points keeps each field's offset and point_step (as sensor_msgs_py does), so writing
    its result back gives the same fields, offsets and point_step, padding zero."""
    dt = LIDAR_DT
    pts = np.zeros((2, 3), dt)
    pts['x'], pts['range'] = np.arange(6).reshape(2, 3), 70000
    msg = create_cloud_from_array(None, pts)
    back = read_points(msg, organized=True)
    assert back.dtype.itemsize == 48 and [back.dtype.fields[n][1] for n in dt.names] == [
        0,
        4,
        8,
        16,
        20,
        28,
        32,
    ]
    back['intensity'] = 5.0
    again = create_cloud_from_array(msg.header, back)
    assert (again.point_step, again.row_step) == (48, 144)
    assert [(f.name, f.offset, f.datatype) for f in again.fields] == [
        (f.name, f.offset, f.datatype) for f in msg.fields
    ]
    out = read_points(again, organized=True)
    assert (out['intensity'] == 5.0).all() and out['range'].tolist() == pts['range'].tolist()
    sub = read_points(msg, field_names=['x', 'ring'])  # a subset keeps its offsets too
    assert sub.dtype.itemsize == 48 and sub.dtype.fields['ring'][1] == 28


def test_c12_big_endian_structured_array_is_written_little_endian_with_its_values():
    """A structured array whose fields are big-endian (a dtype's own byteorder is '|', so a
    check of it alone misses them) is converted field by field, values kept."""
    arr = np.zeros(2, [('x', '>f4'), ('y', '>f4'), ('z', '>f4'), ('rgb', '>u4'), ('label', '>u4')])
    arr['x'], arr['z'], arr['rgb'], arr['label'] = [1.0, 4.0], 2.0, [0xFF8200, 0x82FF], [7, 300]
    msg = create_cloud_from_array(None, arr)
    assert msg.is_bigendian is False
    back = read_points(msg)
    assert back['x'].tolist() == [1.0, 4.0] and back['label'].tolist() == [7, 300]
    assert back['rgb'].tolist() == [0xFF8200, 0x82FF]


@pytest.mark.parametrize('shape', [(3, 3), (2, 5), (2, 5, 2), (2, 5, 4)])
def test_c20_cloud_colours_of_another_layout_are_refused_naming_the_shape(shape):
    """Mono (H×W: a square one used to give wrong colours silently), two- or four-channel colour
    for the cloud: one ValueError naming the shape, never wrong colours or an IndexError."""
    h, w = shape[:2]
    xyz = np.ones((h, w, 3), np.float32)
    with pytest.raises(ValueError, match=rf'rgb shape=\({shape[0]}, {shape[1]}'):
        create_cloud(None, xyz, rgb=np.zeros(shape, np.uint8))


def test_reader_any_field_order_row_padding_and_big_endian():
    dt = np.dtype(
        {
            'names': ['label', 'rgb', 'z', 'x', 'y'],
            'formats': ['>u2', '>u4', '>f4', '>f4', '>f4'],
            'offsets': [0, 2, 6, 10, 14],
            'itemsize': 18,
        }
    )
    pts = np.zeros(3, dt)
    pts['x'], pts['y'], pts['z'], pts['label'], pts['rgb'] = (
        [1, 2, 3],
        [4, 5, 6],
        [7, 8, 9],
        [1, 2, 300],
        0xABCDEF,
    )
    row = pts.tobytes() + b'\xff' * 6  # row_step 60 > 3*18
    fields = [
        field('label', 0, UINT16),
        field('rgb', 2, UINT32),
        field('z', 6, FLOAT32),
        field('x', 10, FLOAT32),
        field('y', 14, FLOAT32),
    ]
    got = read_points(raw_cloud(fields, 18, 3, 2, row * 2, row_step=60, is_bigendian=True))
    assert got.shape == (6,) and got.dtype['x'].isnative
    assert got['x'].tolist() == [1, 2, 3] * 2 and got['label'].tolist() == [1, 2, 300] * 2
    assert got['rgb'].tolist() == [0xABCDEF] * 6
    sel = read_points(
        raw_cloud(fields, 18, 3, 2, row * 2, row_step=60, is_bigendian=True),
        field_names=['y', 'x'],
    )
    assert sel.dtype.names == ('y', 'x')
    with pytest.raises(ValueError, match='row_step=50 < width\\*point_step=54'):
        read_points(raw_cloud(fields, 18, 3, 2, bytes(100), row_step=50))
    with pytest.raises(ValueError, match='len\\(data\\)=119 != height\\*row_step=120'):
        read_points(raw_cloud(fields, 18, 3, 2, bytes(119), row_step=60))
    with pytest.raises(ValueError, match="'y' offset=14 size=4 exceeds point_step=16"):
        dtype_from_fields(fields, 16)
    with pytest.raises(ValueError, match="no field\\(s\\) \\['w'\\]"):
        read_points(raw_cloud(fields, 18, 3, 2, row * 2, row_step=60), field_names=['w'])


# ---------------------------------------------------------------- C14 packed rgb bits survive
def test_c14_signalling_nan_rgb_bits_survive():
    packed = np.array([0xFF820000], np.uint32)
    # the fault: through a Python float the quiet bit is set, red 130 -> 194
    via_python = struct.pack('<f', struct.unpack('<f', packed.tobytes())[0])
    assert via_python == bytes([0x00, 0x00, 0xC2, 0xFF])
    dt = np.dtype(
        {
            'names': ['x', 'y', 'z', 'rgb'],
            'formats': ['<f4'] * 4,
            'offsets': [0, 4, 8, 12],
            'itemsize': 16,
        }
    )
    pts = np.zeros(1, dt)
    pts['rgb'] = packed.view(np.float32)
    back = deserialize_message(serialize_message(create_cloud_from_array(None, pts)), PointCloud2)
    assert bytes(back.data[12:16]) == bytes([0x00, 0x00, 0x82, 0xFF])
    assert read_points(back)['rgb'].view(np.uint32)[0] == 0xFF820000
    # our writer: (r<<16)|(g<<8)|b bit-viewed, for every red incl. 129..191
    reds = np.arange(256, dtype=np.uint8)
    rgb = np.stack([reds, np.zeros_like(reds), np.full_like(reds, 3)], axis=-1).reshape(1, 256, 3)
    xyz = np.ones((1, 256, 3), np.float32)
    cloud = deserialize_message(serialize_message(create_cloud(None, xyz, rgb=rgb)), PointCloud2)
    got = read_points(cloud)['rgb']
    assert np.array_equal(unpack_rgb(got), rgb.reshape(256, 3))
    assert got.view(np.uint32)[130] == (130 << 16) | 3
    assert pack_rgb(np.array([130, 0, 0], np.uint8)).view(np.uint32) == 0x00820000


# ---------------------------------------------------------------- C15 field layout
@pytest.mark.parametrize(
    'label_dtype,ldt,step', [(np.uint32, UINT32, 20), (np.uint16, UINT16, 18)]
)
def test_c15_field_layout(label_dtype, ldt, step):
    msg = create_cloud(
        None,
        np.ones((2, 2, 3), np.float32),
        rgb=np.zeros((2, 2, 3), np.uint8),
        labels=np.ones((2, 2), np.uint8),
        label_dtype=label_dtype,
    )
    layout = [(f.name, f.offset, f.datatype, f.count) for f in msg.fields]
    assert layout == [
        ('x', 0, 7, 1),
        ('y', 4, 7, 1),
        ('z', 8, 7, 1),
        ('rgb', 12, 7, 1),
        ('label', 16, ldt, 1),
    ]
    assert all(isinstance(f, PointField) for f in msg.fields)
    assert (msg.point_step, msg.row_step, msg.height, msg.width) == (step, 2 * step, 2, 2)
    assert msg.is_bigendian is False
    conf = create_cloud(
        None,
        np.ones((1, 1, 3), np.float32),
        labels=np.ones((1, 1), np.uint8),
        confidence=np.full((1, 1), 0.75, np.float32),
    )
    assert [(f.name, f.offset, f.datatype) for f in conf.fields][-1] == ('confidence', 16, FLOAT32)
    assert read_points(conf)['confidence'][0] == 0.75
    with pytest.raises(ValueError, match='uint32 or uint16'):
        cloud_dtype(label_dtype=np.uint8)
    with pytest.raises(ValueError, match='0..65535'):
        create_cloud(
            None, np.ones((1, 1, 3), np.float32), labels=np.array([[70000]]), label_dtype=np.uint16
        )


# ---------------------------------------------------------------- C20 sizes checked before packing
def test_c20_size_mismatch_names_both_sizes():
    depth = np.ones((480, 640), np.float32)
    rgb = np.zeros((720, 1280, 3), np.uint8)
    K = np.array([[525.0, 0, 320], [0, 525, 240], [0, 0, 1]])
    with pytest.raises(ValueError) as err:
        create_cloud_from_depth(None, depth, K, rgb=rgb)
    assert '640x480' in str(err.value) and '1280x720' in str(err.value)
    with pytest.raises(ValueError, match='labels is 4x3'):
        create_cloud(None, np.ones((2, 2, 3), np.float32), labels=np.zeros((3, 4), np.uint8))


# ---------------------------------------------------------------- C25 big organized cloud
def test_c25_full_hd_cloud_size():
    h, w = 1080, 1920
    xyz = np.ones((h, w, 3), np.float32)
    msg = create_cloud(
        None, xyz, rgb=np.zeros((h, w, 3), np.uint8), labels=np.zeros((h, w), np.uint8)
    )
    assert len(msg.data) == 41_472_000 and msg.point_step == 20 and msg.row_step == 38_400


def test_stride_and_organized_vs_unorganized():
    rng = np.random.default_rng(3)
    d = rng.uniform(0.5, 4.0, (6, 8)).astype(np.float32)
    d[1, 2] = np.nan
    d[0, 0] = 0.0
    K = np.array([[50.0, 0, 4], [0, 50, 3], [0, 0, 1]])
    lab = rng.integers(0, 14, (6, 8)).astype(np.uint8)
    full = create_cloud_from_depth(None, d, K, labels=lab)
    assert (full.height, full.width, full.is_dense) == (6, 8, False)
    s2 = read_points(create_cloud_from_depth(None, d, K, labels=lab, stride=2), organized=True)
    assert s2.shape == (3, 4) and s2['label'].tolist() == lab[::2, ::2].tolist()
    assert np.isnan(s2['x'][0, 0])  # depth 0 at (0, 0): invalid
    un = create_cloud_from_depth(None, d, K, labels=lab, organized=False)
    assert (un.height, un.width, un.is_dense) == (1, 46, True)
    valid = np.isfinite(d) & (d > 0)
    assert read_points(un)['label'].tolist() == lab[valid].tolist()
    assert read_points(full, skip_nans=True).shape == (46,)
    dense = create_cloud(None, np.ones((2, 2, 3), np.float32))
    assert dense.is_dense and [f.name for f in dense.fields] == ['x', 'y', 'z']
    with pytest.raises(ValueError, match='stride=0'):
        create_cloud(None, np.ones((2, 2, 3), np.float32), stride=0)


# ---------------------------------------------------------------- rclpy and rosbags round trips
def test_rclpy_and_rosbags_round_trip():
    rng = np.random.default_rng(4)
    d = rng.uniform(0.5, 4.0, (4, 5)).astype(np.float32)
    d[2, 3] = np.nan
    K = np.array([[50.0, 0, 2], [0, 50, 2], [0, 0, 1]])
    rgb = rng.integers(0, 255, (4, 5, 3), dtype=np.uint8)
    lab = rng.integers(0, 300, (4, 5)).astype(np.uint16)
    ref = create_cloud_from_depth(None, d, K, rgb=rgb, labels=lab)
    ref.header.frame_id = 'cam_optical'
    back = deserialize_message(serialize_message(ref), PointCloud2)
    assert back.header.frame_id == 'cam_optical'
    pts = read_points(back, organized=True)
    assert np.array_equal(unpack_rgb(pts['rgb']), rgb) and pts['label'].tolist() == lab.tolist()
    rb = create_cloud_from_depth(back.header, d, K, rgb=rgb, labels=lab, msg_cls=RB_CLOUD)
    assert isinstance(rb, RB_CLOUD) and rb.header.frame_id == 'cam_optical'
    t = RB_CLOUD.__msgtype__
    rb_back = TS.deserialize_cdr(TS.serialize_cdr(rb, t), t)
    assert isinstance(rb_back.data, np.ndarray)
    assert bytes(rb_back.data) == bytes(back.data)
    assert np.array_equal(read_points(rb_back).view(np.uint8), read_points(back).view(np.uint8))


# ---------------------------------------------------------------- PLY
def read_ply(path):
    raw = path.read_bytes()
    end = raw.index(b'end_header\n') + len(b'end_header\n')
    head = raw[:end].decode('ascii').splitlines()
    props = [ln.split()[1:] for ln in head if ln.startswith('property')]
    kinds = {'float': '<f4', 'uchar': 'u1', 'uint': '<u4'}
    dt = np.dtype([(name, kinds[kind]) for kind, name in props])
    n = int(next(ln for ln in head if ln.startswith('element vertex')).split()[-1])
    return head, np.frombuffer(raw[end:], dt, count=n), len(raw) - end - n * dt.itemsize


def test_binary_ply_labelled_cloud(tmp_path):
    d = np.array([[1.0, np.nan], [2.0, 0.0]], np.float32)
    from depth3dseg_ros.core.geometry import backproject_np

    xyz = backproject_np(d, K9)
    rgb = np.array([[[130, 0, 0], [1, 2, 3]], [[4, 5, 6], [7, 8, 9]]], np.uint8)
    lab = np.array([[5, 6], [300, 8]], np.uint16)
    n = write_ply(tmp_path / 'c.ply', xyz, rgb, lab)
    head, v, extra = read_ply(tmp_path / 'c.ply')
    assert n == 2 and extra == 0
    assert head[:3] == ['ply', 'format binary_little_endian 1.0', 'element vertex 2']
    assert [h for h in head if h.startswith('property')] == [
        'property float x',
        'property float y',
        'property float z',
        'property uchar red',
        'property uchar green',
        'property uchar blue',
        'property uint label',
    ]
    assert v['z'].tolist() == [1.0, 2.0] and v['label'].tolist() == [5, 300]
    assert v['red'].tolist() == [130, 4] and v['blue'].tolist() == [0, 6]
    assert write_ply(tmp_path / 'all.ply', xyz, drop_invalid=False) == 4
    with pytest.raises(ValueError, match='labels'):
        write_ply(tmp_path / 'bad.ply', xyz, labels=np.array([-1, 0, 1, 2]))


# -------------------------------------------------------- is_dense: every x, y, z finite (REP 118)
@pytest.mark.parametrize('bad', [np.nan, np.inf, -np.inf])
def test_is_dense_false_for_nan_and_inf_in_every_builder(bad):
    xyz = np.ones((2, 3, 3), np.float32)
    xyz[1, 2, 1] = bad  # one y coordinate
    org = create_cloud(None, xyz)
    assert (org.height, org.width, org.is_dense) == (2, 3, False)
    assert np.isnan(
        xyz_of(read_points(org, organized=True))[1, 2]
    ).all()  # stored as NaN, NaN, NaN
    un = create_cloud(None, xyz, organized=False)
    assert (un.height, un.width, un.is_dense) == (1, 5, True)  # the bad point is dropped
    pts = np.zeros((2, 3), cloud_dtype(rgb=False, labels=True))
    pts['z'] = 1.0
    pts['z'][0, 1] = bad
    ready = create_cloud_from_array(None, pts)
    assert ready.is_dense is False
    assert create_cloud_from_array(None, pts, is_dense=False).is_dense is False
    with pytest.raises(ValueError, match=r'is_dense=True but 1 of 6 points have a non-finite'):
        create_cloud_from_array(None, pts, is_dense=True)
    assert read_points(ready, skip_nans=True).shape == (5,)
    pts['z'][0, 1] = 1.0
    assert create_cloud_from_array(None, pts).is_dense is True
    assert create_cloud_from_array(None, pts, is_dense=True).is_dense is True
    d = np.ones((2, 2), np.float32)
    d[0, 0] = bad
    assert create_cloud_from_depth(None, d, K9).is_dense is False


def test_is_dense_ignores_nan_outside_xyz_and_integer_xyz():
    pts = np.zeros(3, [('x', '<f4'), ('y', '<f4'), ('z', '<f4'), ('confidence', '<f4')])
    pts['confidence'] = np.nan
    assert create_cloud_from_array(None, pts).is_dense is True
    ints = np.zeros(2, [('x', '<i4'), ('y', '<i4'), ('z', '<i4')])
    assert create_cloud_from_array(None, ints).is_dense is True


# ---------------------------------------------- plain N×k reads (sensor_msgs_py read_points_numpy)
def test_read_points_numpy_subset_of_one_datatype():
    from depth3dseg_ros.ros.pointcloud2 import read_points_numpy

    xyz = np.arange(18, dtype=np.float32).reshape(2, 3, 3)
    xyz[0, 0, 2] = np.inf
    rgb = np.full((2, 3, 3), 7, np.uint8)
    lab = np.arange(6, dtype=np.uint8).reshape(2, 3)
    msg = create_cloud(None, xyz, rgb=rgb, labels=lab, confidence=np.full((2, 3), 0.5, np.float32))
    got = read_points_numpy(msg, ['x', 'y', 'z'])
    assert got.shape == (6, 3) and got.dtype == np.float32
    assert got[1:].tolist() == xyz.reshape(-1, 3)[1:].tolist() and np.isnan(got[0]).all()
    assert read_points_numpy(msg, ['z', 'x'], organized=True).shape == (2, 3, 2)
    assert (
        read_points_numpy(msg, ['x', 'y', 'z'], skip_nans=True).tolist()
        == xyz.reshape(-1, 3)[1:].tolist()
    )
    assert read_points_numpy(msg, ['x', 'confidence'])[:, 1].tolist() == [0.5] * 6
    assert read_points_numpy(msg, ['label']).tolist() == [[0], [1], [2], [3], [4], [5]]
    assert read_points_numpy(msg, ['label']).dtype == np.uint32
    with pytest.raises(ValueError, match=r'different datatypes.*x FLOAT32, label UINT32'):
        read_points_numpy(msg, ['x', 'label'])
    with pytest.raises(ValueError, match=r'different datatypes.*label UINT32'):
        read_points_numpy(msg)  # all fields: x, y, z, rgb, confidence FLOAT32 + label UINT32


def test_read_points_numpy_big_endian_padding_and_rosbags():
    from depth3dseg_ros.ros.pointcloud2 import read_points_numpy

    fields = [
        field('x', 0, FLOAT32),
        field('y', 4, FLOAT32),
        field('z', 8, FLOAT32),
        field('i', 12, UINT16),
    ]
    row = struct.pack('>3fH2x', 1, 2, 3, 9) + struct.pack('>3fH2x', 4, 5, 6, 10) + bytes(4)
    got = read_points_numpy(
        raw_cloud(fields, 16, 2, 1, row, row_step=36, is_bigendian=True), ['x', 'y', 'z']
    )
    assert got.dtype == np.dtype('=f4') and got.tolist() == [[1, 2, 3], [4, 5, 6]]
    rb = create_cloud(
        None, np.ones((2, 2, 3), np.float32), labels=np.ones((2, 2), np.uint8), msg_cls=RB_CLOUD
    )
    assert read_points_numpy(rb, ['x', 'y', 'z']).shape == (4, 3)
