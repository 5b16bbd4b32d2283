"""Benchmark depth3dseg-extract against a plain rosbags read of the same bag, in the same run.

Builds a bag from the real NYU 0001 / TUM frames (test/bagutil.py) at 640x480: rgb8 Image, 16UC1
depth, mono8 labels (NYU frames), CameraInfo. Then measures, best of --repeat:

* plain read: AnyReader, iterate every message and deserialize it (what any bag consumer pays);
* extraction (bags.extract.extract) into a fresh directory, at each PNG level given (0 = stored
  PNGs by bags.png_stored, the default; 1..9 = cv2 with the zlib strategy given; the strategy does
  not matter at level 0); the timed call also removes the previous repeat's dataset first
  (``shutil.rmtree`` of ~98 MB in 140 files at level 0, ~0.02 s on the 2-core development machine);
* PNG encoding alone (what the writer does at that level, on the same rgb/depth/label arrays), to
  show where time goes.

Prints frames/s and MB/s (bag bytes / s) and the ratio extraction / plain read (goal >= 0.5).

    python bench/bench_extract.py [--frames 60] [--storage sqlite3|mcap] [--compression none|...]
        [--levels 0 1] [--strategies rle] [--workers 1 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import cv2

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'test'))

from bagutil import make_frames, write_bag  # noqa: E402
from depth3dseg_ros.bags.dataset_writer import PNG_STRATEGIES  # noqa: E402
from depth3dseg_ros.bags.extract import ExtractConfig, extract  # noqa: E402
from depth3dseg_ros.bags.png_stored import png_stored_parts  # noqa: E402
from rosbags.highlevel import AnyReader  # noqa: E402
from rosbags.typesys import Stores, get_typestore  # noqa: E402


def bag_bytes(path: Path) -> int:
    """Size on disk of a bag (a file, or every file under a rosbag2 directory), bytes."""
    return (
        sum(p.stat().st_size for p in path.rglob('*') if p.is_file())
        if path.is_dir()
        else path.stat().st_size
    )


def plain_read(path: Path) -> int:
    """Iterate and deserialize every message with rosbags' AnyReader directly (the reference)."""
    n = 0
    with AnyReader([path], default_typestore=get_typestore(Stores.ROS2_KILTED)) as r:
        for conn, _t, raw in r.messages(connections=r.connections):
            r.deserialize(raw, conn.msgtype)
            n += 1
    return n


def best(fn, repeat: int) -> float:
    """Best (smallest) wall time of ``repeat`` calls of ``fn``, seconds."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    """Run the extraction benchmark (CLI): build the bag, then time plain read and extract."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--frames', type=int, default=60)
    ap.add_argument('--storage', default='sqlite3', choices=['sqlite3', 'mcap', 'ros1'])
    ap.add_argument('--compression', default='none')
    ap.add_argument('--levels', type=int, nargs='+', default=[0, 1])
    ap.add_argument('--repeat', type=int, default=3)
    ap.add_argument(
        '--workers', type=int, nargs='+', default=sorted({1, min(4, os.cpu_count() or 1)})
    )
    ap.add_argument('--strategies', nargs='+', default=['rle'])
    ap.add_argument(
        '--real',
        default=None,
        help='real sample files (default: depth3dseg_ros.samples: the '
        'cache, $DEPTH3DSEG_SAMPLE_DATA or a download)',
    )
    args = ap.parse_args()
    if args.real is None:
        from depth3dseg_ros.samples import fetch_all

        args.real = str(fetch_all())

    tmp = Path(tempfile.mkdtemp(prefix='bench_extract_'))
    try:
        frames = make_frames(args.real, args.frames, size=(640, 480))
        name = 'bench' + ('.bag' if args.storage == 'ros1' else '')  # AnyReader needs the suffix
        bag = write_bag(tmp / name, frames, storage=args.storage, compression=args.compression)
        size_mb = bag_bytes(bag) / 1e6
        n_msgs = plain_read(bag)
        t_read = best(lambda: plain_read(bag), args.repeat)
        print(
            f'bag: {args.frames} frames 640x480, {n_msgs} messages, '
            f'{args.storage}/{args.compression}, '
            f'{size_mb:.1f} MB'
        )
        print(f'{"what":<28} {"s":>7} {"frames/s":>9} {"MB/s":>8} {"ratio":>6}')
        fps_read = args.frames / t_read
        print(
            f'{"plain read (deserialize)":<28} {t_read:7.3f} {fps_read:9.1f} '
            f'{size_mb / t_read:8.1f} {1.0:6.2f}'
        )
        for level, strategy in [(lv, st) for lv in args.levels for st in args.strategies]:
            for workers in args.workers:

                def run() -> None:
                    out = tmp / f'ds_{level}'
                    shutil.rmtree(out, ignore_errors=True)
                    extract(
                        [bag],
                        out,
                        ExtractConfig(png_level=level, workers=workers, png_strategy=strategy),
                    )

                t_ext = best(run, args.repeat)
                out_mb = sum(p.stat().st_size for p in (tmp / f'ds_{level}').rglob('*.png')) / 1e6
                print(
                    f'{f"extract L{level} {strategy}, {workers} thr":<28} {t_ext:7.3f} '
                    f'{args.frames / t_ext:9.1f} {size_mb / t_ext:8.1f} '
                    f'{(args.frames / t_ext) / fps_read:6.2f}   (dataset {out_mb:.1f} MB)'
                )

            def encode() -> None:
                p = [
                    cv2.IMWRITE_PNG_COMPRESSION,
                    level,
                    cv2.IMWRITE_PNG_STRATEGY,
                    PNG_STRATEGIES[strategy],
                ]
                for f in frames:
                    for img in (f.rgb, f.depth_mm, f.labels):
                        if img is None:
                            continue
                        if level == 0:  # what the writer does at level 0 (bags.png_stored)
                            png_stored_parts(img)
                        else:
                            cv2.imencode(
                                '.png',
                                cv2.cvtColor(img, cv2.COLOR_RGB2BGR) if img.ndim == 3 else img,
                                p,
                            )

            t_enc = best(encode, args.repeat)
            print(
                f'{f"  png encode only L{level} {strategy}":<28} {t_enc:7.3f} '
                f'{args.frames / t_enc:9.1f} '
                f'{"":>8} {(args.frames / t_enc) / fps_read:6.2f}'
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main()
