"""``python -m depth3dseg_ros.samples {fetch,bag,build}``: get the real camera sample data.

``fetch``  fetch every registry file into the cache; print the cache root.
``bag``    print the real-camera bag's path (built into the cache on first use).
``build --out DIR [--scale S]``  write the real-camera bag to DIR.
Exit 2 with one line saying how to get the files when they cannot be had.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from depth3dseg_ros.samples.fetcher import SampleDataUnavailable, fetch_all


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    ap = argparse.ArgumentParser(
        prog='python -m depth3dseg_ros.samples', description=__doc__.split('\n')[0]
    )
    sub = ap.add_subparsers(dest='cmd', required=True)
    sub.add_parser('fetch', help='fetch every sample file; print the cache root')
    p_bag = sub.add_parser('bag', help="print the real-camera bag's path (built on first use)")
    p_bag.add_argument('--scale', type=float, default=0.5)
    p_build = sub.add_parser('build', help='write the real-camera bag to --out')
    p_build.add_argument('--out', type=Path, required=True)
    p_build.add_argument('--scale', type=float, default=0.5, help='resize factor (1 = native)')
    args = ap.parse_args(argv)
    try:
        if args.cmd == 'fetch':
            print(fetch_all())
        elif args.cmd == 'bag':
            from depth3dseg_ros.samples.realbag import real_camera_bag

            print(real_camera_bag(args.scale))
        else:
            from depth3dseg_ros.samples.realbag import build

            frames = build(args.out, args.scale)
            size = sum(p.stat().st_size for p in args.out.iterdir())
            print(f'wrote {len(frames)} frames to {args.out} ({size / 1e6:.2f} MB)')
    except SampleDataUnavailable as err:
        print(f'depth3dseg samples: {err}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
