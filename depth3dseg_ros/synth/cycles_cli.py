"""``depth3dseg-synth-cycles``: the synthetic rooms rendered with Blender Cycles (path-traced
light, textured PBR materials) and recorded as a labelled RGB-D rosbag2, like
``depth3dseg-synth``.

Example (docs/synthetic.md; the renderer's environment comes first: ``make render-venv``)::

    depth3dseg-synth-cycles --out data/cycles_train --scenes 20 --frames-per-scene 12 \\
        --seed 11 --noise

Three steps, each resumable: (1) every room and camera path is drawn exactly as
``depth3dseg-synth`` draws them (same generator, same seeds) and written as a JSON plan
(:mod:`depth3dseg_ros.synth.render_plan`) into ``--work``; (2) Blender's Python
(``--render-python``, default ``.venv-render/bin/python`` beside the package, or
``DEPTH3DSEG_RENDER_PYTHON``) renders each plan into one ``.npz`` per frame, skipping frames
already there, so an interrupted run continues where it stopped; (3) the frames are written to
the bag (with ``--noise``, the Kinect-like depth noise of ``depth3dseg-synth``, drawn from the
same seeds). The camera has square pixels and its principal point at the image centre; its
vertical field of view is the room's (45–58°).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import numpy as np
from tqdm import tqdm

from depth3dseg_ros.core.depth import meters_to_16uc1
from depth3dseg_ros.synth.bagwrite import RgbdBagWriter, stamp_ns
from depth3dseg_ros.synth.camera import camera_path, centred_K
from depth3dseg_ros.synth.noise import kinect_noise
from depth3dseg_ros.synth.render_plan import make_plan, write_plan
from depth3dseg_ros.synth.room import make_scene

PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class WorkFolderMismatch(ValueError):
    """``--work`` holds frames rendered for other arguments (bad input: exit 2)."""


class RenderPythonUnusable(RuntimeError):
    """The render Python has no renderer module (not Blender's: bad input, exit 2)."""


def default_render_python() -> str:
    """Blender's Python: ``DEPTH3DSEG_RENDER_PYTHON`` or ``.venv-render/bin/python`` in the
    checkout."""
    return os.environ.get(
        'DEPTH3DSEG_RENDER_PYTHON', str(PACKAGE_ROOT / '.venv-render' / 'bin' / 'python')
    )


def plan_scenes(
    work: Path,
    scenes: int,
    frames_per_scene: int,
    width: int,
    height: int,
    seed: int,
    samples: int = 16,
) -> List[Path]:
    """Write one plan per room into ``work/scene_<s>/plan.json``; returns the scene folders.

    The plans record the render's ``samples``. A folder that already holds a different plan
    (other arguments: seed, size, frame count, samples) is refused, so that frames rendered for one
    plan are never reused for another.

    Raises:
        ValueError: ``work`` holds a plan of other arguments.
    """
    import pybullet_data

    folders = []
    for s in range(scenes):
        rng = np.random.default_rng([seed, s, 0])
        scene = make_scene(rng)
        poses = camera_path(rng, scene.free_zone, frames_per_scene)
        K = centred_K(width, height, scene.fov_y_deg)
        folder = work / f'scene_{s:04d}'
        folder.mkdir(parents=True, exist_ok=True)
        plan = make_plan(
            scene,
            poses,
            K,
            width,
            height,
            seed=int(np.random.default_rng([seed, s, 2]).integers(2**31)),
            urdf_root=pybullet_data.getDataPath(),
            first_index=s * frames_per_scene,
            samples=samples,
        )
        old = folder / 'plan.json'
        if old.exists() and json.loads(old.read_text()) != json.loads(json.dumps(plan)):
            raise WorkFolderMismatch(
                f'--work {work} holds frames rendered for other arguments ({old} differs): '
                'use another --work folder, or delete this one to render again'
            )
        write_plan(plan, old)
        folders.append(folder)
    return folders


def render_scenes(folders: List[Path], python: str, threads: int, progress: bool = True) -> None:
    """Run the Cycles renderer on every plan (frames already rendered are skipped by it; the plan
    sets the samples per pixel).

    Raises:
        FileNotFoundError: ``python`` does not exist (run ``make render-venv``).
        RenderPythonUnusable (a RuntimeError): ``python`` has no renderer module (bpy).
        RuntimeError: the renderer failed on a plan (its exit status and the plan are named).
    """
    if not Path(python).exists():
        raise FileNotFoundError(
            f'render python {python} not found: run `make render-venv` or set '
            'DEPTH3DSEG_RENDER_PYTHON / --render-python'
        )
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT))
    for folder in tqdm(folders, unit='room', desc='cycles', disable=not progress):
        cmd = [python, '-m', 'depth3dseg_ros.synth.cycles_render', str(folder / 'plan.json')]
        cmd += [str(folder), '--threads', str(threads)]
        r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode != 0:
            tail = r.stderr.decode(errors='replace')[-2000:]
            if 'ModuleNotFoundError' in tail:
                missing = tail.strip().splitlines()[-1]
                raise RenderPythonUnusable(
                    f'render python {python} lacks a renderer module ({missing}): '
                    'run `make render-venv` and use .venv-render/bin/python'
                )
            raise RuntimeError(f'renderer exit {r.returncode} on {folder}/plan.json:\n{tail}')


def pack(folders: List[Path], out: Path, seed: int, noise: bool, storage: str) -> int:
    """Write the rendered frames of ``folders`` (in plan order) to the rosbag2 ``out``.

    Raises:
        FileNotFoundError: a frame of a plan has not been rendered.
    """
    n = 0
    with RgbdBagWriter(out, storage=storage) as bag:
        for s, folder in enumerate(folders):
            plan = json.loads((folder / 'plan.json').read_text())
            noise_rng = np.random.default_rng([seed, s, 1])
            meta = dict(scene=s, width=plan['width'], height=plan['height'], seed=seed)
            bag.writer.set_custom_data(f'depth3dseg.cycles.{s}', json.dumps(meta))
            for f in plan['frames']:
                path = folder / f"frame_{f['index']:06d}.npz"
                if not path.exists():
                    raise FileNotFoundError(f'{path} not rendered (re-run to resume the render)')
                with np.load(path) as d:
                    rgb, depth, labels, K = d['rgb'], d['depth'], d['labels'], d['K']
                if noise:
                    depth = kinect_noise(depth, K, noise_rng)
                bag.write_frame(stamp_ns(f['index']), rgb, K, meters_to_16uc1(depth), labels)
                n += 1
    return n


def build_parser() -> argparse.ArgumentParser:
    """Build the depth3dseg-synth-cycles argument parser."""
    ap = argparse.ArgumentParser(
        prog='depth3dseg-synth-cycles',
        description=' '.join(__doc__.split('\n\n')[0].split()),
        epilog='An interrupted run resumes: run the same command again (same --work folder, '
        'by default OUT.frames); frames already rendered are kept. The renderer needs its own '
        'environment: make render-venv (docs/synthetic.md).',
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument('--out', required=True, type=Path, help='rosbag2 directory to create')
    ap.add_argument('--work', type=Path, help='plans and rendered frames (default: OUT.frames)')
    ap.add_argument('--scenes', type=int, default=4, help='number of random rooms')
    ap.add_argument('--frames-per-scene', type=int, default=12, help='frames along each path')
    ap.add_argument('--width', type=int, default=320, help='image width (px)')
    ap.add_argument('--height', type=int, default=240, help='image height (px)')
    ap.add_argument('--seed', type=int, default=0, help='rooms, paths, lights, materials, noise')
    ap.add_argument('--noise', action='store_true', help='Kinect-like noise and holes on depth')
    ap.add_argument('--samples', type=int, default=16, help='Cycles samples per pixel (denoised)')
    ap.add_argument('--threads', type=int, default=0, help='render threads (0: all cores)')
    ap.add_argument(
        '--render-python',
        default=None,
        help="Blender's Python (default: $DEPTH3DSEG_RENDER_PYTHON or .venv-render/bin/python)",
    )
    ap.add_argument('--storage', choices=('mcap', 'sqlite3'), default='mcap', help='bag format')
    ap.add_argument('--no-progress', action='store_true', help='no tqdm bar')
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    """Render and record Cycles rooms (CLI depth3dseg-synth-cycles); returns the exit status."""
    args = build_parser().parse_args(argv)
    for name in ('scenes', 'frames_per_scene', 'width', 'height', 'samples'):
        if getattr(args, name) <= 0:
            print(
                f'depth3dseg-synth-cycles: error: --{name.replace("_", "-")} must be > 0',
                file=sys.stderr,
            )
            return 2
    if args.out.exists():
        print(f'depth3dseg-synth-cycles: error: --out {args.out} exists', file=sys.stderr)
        return 2
    work = args.work or args.out.with_name(args.out.name + '.frames')
    python = args.render_python or default_render_python()
    if not Path(python).exists():  # bad input, before any plan is written
        print(
            f'depth3dseg-synth-cycles: error: render python {python} not found: run `make '
            'render-venv` or set DEPTH3DSEG_RENDER_PYTHON / --render-python',
            file=sys.stderr,
        )
        return 2
    try:
        folders = plan_scenes(
            work,
            args.scenes,
            args.frames_per_scene,
            args.width,
            args.height,
            args.seed,
            args.samples,
        )
        render_scenes(folders, python, args.threads, not args.no_progress)
        n = pack(folders, args.out, args.seed, args.noise, args.storage)
    except (WorkFolderMismatch, RenderPythonUnusable) as exc:  # bad input (docs: "Exit codes")
        print(f'depth3dseg-synth-cycles: error: {exc}', file=sys.stderr)
        return 2
    except (FileNotFoundError, RuntimeError, ValueError) as exc:  # the renderer or packing failed
        print(f'depth3dseg-synth-cycles: error: {" ".join(str(exc).split())}', file=sys.stderr)
        return 1
    print(f'wrote {n} frames to {args.out} (rendered frames kept in {work})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
