"""``depth3dseg-synth``: render random labelled rooms with pybullet and record them as a rosbag2.

Example (the training set of the shipped model, see docs/synthetic.md)::

    depth3dseg-synth --out /work/data/synth_train --scenes 60 --frames-per-scene 50 --seed 1
    --noise

Deterministic: the same arguments give byte-identical messages (rooms, camera paths and noise are
drawn from ``numpy.random.default_rng([seed, scene, stream])``; stamps start at a fixed epoch, 30
Hz).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import numpy as np
from tqdm import tqdm

from depth3dseg_ros.core.depth import meters_to_16uc1
from depth3dseg_ros.synth.bagwrite import RgbdBagWriter, stamp_ns
from depth3dseg_ros.synth.camera import camera_path, handheld_poses
from depth3dseg_ros.synth.noise import FAR_END, FAR_START, kinect_noise
from depth3dseg_ros.synth.palette import PALETTES
from depth3dseg_ros.synth.render import Frame, Renderer
from depth3dseg_ros.synth.room import LAYOUTS, make_scene
from depth3dseg_ros.synth.scene import SHAPES


#: camera modes: a robot's smooth path through the free middle (camera.camera_path) or hand-held
#: snapshots across the room (camera.handheld_poses)
CAMERAS = ('robot', 'handheld')


def _check_options(
    layout: str, camera: str, palette: str = 'random', shapes: str = 'basic'
) -> None:
    """Raise ValueError naming ``--layout``/``--camera``/``--palette``/``--shapes`` and the value
    if one is unknown."""
    if shapes not in SHAPES:
        raise ValueError(f'--shapes {shapes!r}: expected one of {list(SHAPES)}')
    if palette not in PALETTES:
        raise ValueError(f'--palette {palette!r}: expected one of {list(PALETTES)}')
    if camera not in CAMERAS:
        raise ValueError(f'--camera {camera!r}: expected one of {list(CAMERAS)}')
    if layout not in LAYOUTS:
        raise ValueError(f'--layout {layout!r}: expected one of {sorted(LAYOUTS)}')


def render_frames(
    scenes: int,
    frames_per_scene: int,
    width: int,
    height: int,
    seed: int,
    noise: bool,
    layout: str = 'sparse',
    camera: str = 'robot',
    palette: str = 'random',
    shapes: str = 'basic',
) -> Iterator[Tuple[int, Frame, np.ndarray]]:
    """Yield (scene index, exact frame, depth to record in m) for every frame, scene after scene.

    The recorded depth is the exact render, or the Kinect-like noisy one with ``noise``. ``layout``
    is one of room.LAYOUTS ('sparse', 'dense', 'cluttered', 'nyu', 'nyu_large'), ``camera`` one of
    :data:`CAMERAS`, ``palette`` one of synth.palette.PALETTES (its colours come from
    ``default_rng([seed, scene, 2])``, so the rooms, cameras, depth and labels are those of
    'random'). ``shapes`` one of synth.scene.SHAPES ('varied' from ``default_rng([seed, scene,
    3])``: the same rooms and cameras, only the chairs' and sofas' geometry differs).
    One pybullet connection is reused; the world is reset per scene.

    Raises:
        ValueError: unknown ``layout``, ``camera``, ``palette`` or ``shapes``.
    """
    _check_options(layout, camera, palette, shapes)
    with Renderer(width, height) as renderer:
        for s in range(scenes):
            rng = np.random.default_rng([seed, s, 0])
            scene = make_scene(
                rng,
                layout,
                palette,
                np.random.default_rng([seed, s, 2]),
                shapes,
                np.random.default_rng([seed, s, 3]),
            )
            renderer.load(scene)
            noise_rng = np.random.default_rng([seed, s, 1])
            if camera == 'robot':
                poses = camera_path(rng, scene.free_zone, frames_per_scene)
            else:
                poses = handheld_poses(rng, scene.size, scene.footprints, frames_per_scene)
            far = LAYOUTS[layout].get('far_holes', (FAR_START, FAR_END))
            for pose in poses:
                frame = renderer.render(pose)
                depth = (
                    kinect_noise(frame.depth, frame.K, noise_rng, far) if noise else frame.depth
                )
                yield s, frame, depth


def generate(
    out: Path,
    scenes: int,
    frames_per_scene: int,
    width: int = 320,
    height: int = 240,
    seed: int = 0,
    noise: bool = False,
    storage: str = 'mcap',
    progress: bool = True,
    layout: str = 'sparse',
    camera: str = 'robot',
    palette: str = 'random',
    shapes: str = 'basic',
) -> int:
    """Render ``scenes`` × ``frames_per_scene`` frames into the rosbag2 directory ``out``; returns
    the count.

    Raises:
        ValueError: a non-positive count/size, an unknown ``layout``/``camera``/``palette``/
            ``shapes``, or ``out`` exists and is not an empty directory.
    """
    _check_options(layout, camera, palette, shapes)  # before the output directory is touched
    for name, v in (
        ('scenes', scenes),
        ('frames_per_scene', frames_per_scene),
        ('width', width),
        ('height', height),
    ):
        if v <= 0:
            raise ValueError(f'{name}={v} must be positive')
    out = Path(out)
    if out.exists():
        if not out.is_dir() or any(out.iterdir()):
            raise ValueError(f'--out {out} exists and is not an empty directory')
        shutil.rmtree(out)
    total = scenes * frames_per_scene
    n = 0
    with RgbdBagWriter(out, storage=storage) as bag:
        bag.writer.set_custom_data(
            'depth3dseg.synth',
            json.dumps(
                dict(
                    scenes=scenes,
                    frames_per_scene=frames_per_scene,
                    width=width,
                    height=height,
                    seed=seed,
                    noise=noise,
                    layout=layout,
                    camera=camera,
                    palette=palette,
                    shapes=shapes,
                    classes='NYU13',
                )
            ),
        )
        frames = render_frames(
            scenes, frames_per_scene, width, height, seed, noise, layout, camera, palette, shapes
        )
        for _, frame, depth in tqdm(
            frames, total=total, disable=not progress, unit='frame', desc='synth'
        ):
            bag.write_frame(stamp_ns(n), frame.rgb, frame.K, meters_to_16uc1(depth), frame.labels)
            n += 1
    return n


def build_parser() -> argparse.ArgumentParser:
    """Build the depth3dseg-synth argument parser."""
    ap = argparse.ArgumentParser(prog='depth3dseg-synth', description=__doc__.split('\n')[0])
    ap.add_argument('--out', required=True, type=Path, help='rosbag2 directory to create')
    ap.add_argument('--scenes', type=int, default=10, help='number of random rooms (default 10)')
    ap.add_argument(
        '--frames-per-scene',
        type=int,
        default=30,
        help='frames along each camera path or hand-held snapshots per room (default 30)',
    )
    ap.add_argument('--width', type=int, default=320, help='image width in pixels (default 320)')
    ap.add_argument('--height', type=int, default=240, help='image height in pixels (default 240)')
    ap.add_argument(
        '--seed',
        type=int,
        default=0,
        help='random seed: the same arguments give byte-identical messages (default 0)',
    )
    ap.add_argument(
        '--noise', action='store_true', help='Kinect-like noise and holes on the depth topic'
    )
    ap.add_argument(
        '--layout',
        choices=sorted(LAYOUTS),
        default='sparse',
        help='rooms: sparse (large, free middle; default), dense (NYU-like: smaller, fuller), '
        'cluttered (dense with more objects and wall cabinets) or nyu (dense, furnished and '
        'labelled by NYU\'s 13-class conventions: doors, curtains, whiteboards, lamps, pillows, '
        'kitchens)',
    )
    ap.add_argument(
        '--camera',
        choices=CAMERAS,
        default='robot',
        help='robot: smooth path at 0.3-1.5 m through the free middle (default); handheld: '
        'snapshots at 1.1-1.7 m from the room edge looking across it',
    )
    ap.add_argument(
        '--palette',
        choices=PALETTES,
        default='random',
        help='colours of chairs, sofas, bed covers, small objects and accent walls: random '
        '(uniform RGB, default), indoor (wood, black or fabric chairs; fabric or leather '
        'sofas; linen bed covers; muted colours otherwise) or furniture (those chairs, sofas '
        'and bed covers, random otherwise); the same seed gives the same rooms every way',
    )
    ap.add_argument(
        '--shapes',
        choices=SHAPES,
        default='basic',
        help='geometry of chairs and sofas: basic (one template each, default) or varied '
        '(slatted, padded and office chairs, armchairs; sofas on legs with separate cushions); '
        'the same seed gives the same rooms and cameras either way',
    )
    ap.add_argument(
        '--storage',
        choices=('mcap', 'sqlite3'),
        default='mcap',
        help='rosbag2 storage plugin (default mcap)',
    )
    ap.add_argument('--no-progress', action='store_true', help='no tqdm bar')
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    """Generate a synthetic labelled RGB-D bag (CLI depth3dseg-synth); returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        n = generate(
            args.out,
            args.scenes,
            args.frames_per_scene,
            args.width,
            args.height,
            args.seed,
            args.noise,
            args.storage,
            progress=not args.no_progress,
            layout=args.layout,
            camera=args.camera,
            palette=args.palette,
            shapes=args.shapes,
        )
    except ValueError as exc:
        print(f'depth3dseg-synth: error: {exc}', file=sys.stderr)
        return 2
    print(f'wrote {n} frames to {args.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
