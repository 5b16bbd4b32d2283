"""core/visual.py (issue 54): depth on one fixed metric scale with a colour bar in metres, the
class legend, side-by-side panels."""

import numpy as np
import pytest

from depth3dseg_ros.core import visual
from depth3dseg_ros.core.classes import NYU13


def test_a_known_depth_maps_to_a_known_colour_on_the_fixed_scale():
    # 0..10 m: 5 m is index round(127.5) = 128 of the turbo map, (164, 252, 60) in RGB
    assert visual.lut_index(5.0, 10.0) == 128
    assert visual.depth_colour(5.0, 10.0) == (164, 252, 60)
    assert visual.depth_colour(5.0, 10.0) == tuple(visual.scale_colours()[128])
    assert visual.depth_colour(10.0, 10.0) == visual.depth_colour(25.0, 10.0) == (122, 4, 3)
    assert visual.depth_colour(float('nan'), 10.0) == (0, 0, 0)  # no data: black


def test_the_scale_is_the_same_whatever_the_frame_range():
    """Each picture used to be stretched over its own min..max: 3 m was the far colour of a
    frame reaching 3 m and a middle one of a frame reaching 8 m. On the fixed scale it is one."""
    near = np.array([[1.0, 3.0]], np.float32)
    far = np.array([[1.0, 3.0, 8.0]], np.float32)
    a, b = visual.depth_on_scale(near, 10.0), visual.depth_on_scale(far, 10.0)
    assert (a[0, 1] == b[0, 1]).all() and tuple(a[0, 1]) == visual.depth_colour(3.0, 10.0)
    with pytest.raises(ValueError, match='max_depth=0'):
        visual.depth_on_scale(near, 0)


def test_colour_bar_columns_follow_the_scale():
    bar = visual.colour_bar(300, 10.0)
    # the ramp row: the first non-white row, 12 px margins; its middle column is 5 m
    ramp_rows = [y for y in range(bar.shape[0]) if (bar[y, 12:288] != 255).any(-1).all()]
    row = bar[ramp_rows[0], 12:288]
    assert tuple(row[0]) == tuple(visual.scale_colours()[0])  # the near end
    assert tuple(row[-1]) == visual.depth_colour(10.0, 10.0)
    mid = (len(row) - 1) / 2
    expect = visual.depth_colour(mid / (len(row) - 1) * 10.0, 10.0)
    assert tuple(row[int(mid)]) == expect or tuple(row[int(mid) + 1]) == expect
    assert visual.tick_step(10.0) == 1.0 and visual.tick_step(3.0) == 0.5


def test_legend_names_every_class_in_its_colour():
    entries, height = visual.legend_entries(NYU13.names, NYU13.colors, 640)
    assert [e.name for e in entries] == list(NYU13.names)  # every class, in id order
    img = visual.legend(NYU13.names, NYU13.colors, 640)
    assert img.shape == (height, 640, 3)
    for e, color in zip(entries, NYU13.colors):
        x, y, w, h = e.box
        assert (img[y : y + h, x : x + w] == color).all(), e.name
        assert x + w <= 640
    narrow, h2 = visual.legend_entries(NYU13.names, NYU13.colors, 200)
    assert h2 > height and all(e.box[0] + e.box[2] <= 200 for e in narrow)  # wrapped in rows
    with pytest.raises(ValueError, match='legend'):
        visual.legend(['a', 'b'], NYU13.colors, 200)


def test_panel_puts_tiles_side_by_side_at_one_height_with_bar_and_legend():
    cam = np.full((240, 320, 3), 100, np.uint8)
    small = np.full((48, 64, 3), 200, np.uint8)  # the network-size overlay: scaled to 240 high
    panel = visual.frame_panel(
        [('camera', cam), ('overlay', small)], 10.0, NYU13.names, NYU13.colors, title='frame 1/2'
    )
    row = visual.side_by_side([('camera', cam), ('overlay', small)], 240)
    assert row.shape[1] == 320 + visual.GAP + 320
    assert panel.shape[1] == row.shape[1] and panel.shape[0] > row.shape[0] + 40
    legend = visual.legend(NYU13.names, NYU13.colors, panel.shape[1])
    assert (panel[-legend.shape[0] :] == legend).all()  # the legend closes the panel
