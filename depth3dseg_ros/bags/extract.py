"""``depth3dseg-extract``: ROS bags (rosbag2 sqlite3/MCAP, compressed, ROS 1) -> training dataset
directory.

Usage::

    depth3dseg-extract BAG [BAG ...] -o DATASET_DIR [--config extract.yaml] [--preset realsense]
        [--rgb-topic T] [--depth-topic T] [--camera-info-topic T]
        [--labels-topic T]   ('' disables)
        [--tolerance-ms 20] [--typestore ros2_kilted] [--every N] [--max-frames N] [--png-level 0]
        [--png-strategy rle] [--workers N] [--max-image-pixels N]
        [--classes classes.yaml] [--depth-scale 0.001] [--use-rectified] [--out-of-range-labels
        void|refuse] [--allow-missing depth,labels] [-q] [--no-progress]

RGB frames are paired with depth, labels and CameraInfo by header stamp (nearest within the
tolerance, bags.pairing); each frame is written as PNGs plus one index.jsonl line
(bags.dataset_writer, format in docs/ARCHITECTURE.md). A per-topic table (read / used / skipped
with reasons) is printed at the end and stored in manifest.json. Every bag is opened and checked
(format, compression) before any frame is written, so an unsupported variant fails up front (C29).
Label ids outside the class set (e.g. 255 = ignore) are mapped to void and counted, or the frame is
refused (``--out-of-range-labels``, C43). A requested depth/labels/camera_info topic a bag lacks is
an error before anything is written (exit 2, naming the topics of the right type the bag has)
unless allowed with ``--allow-missing`` (issue 15, bags.topic_check). Cut-off recordings (no
metadata.yaml, MCAP not closed) are read as far as they are intact (C38, bags.sniff /
bags.mcap_salvage); a run that fails before its first frame leaves no output directory behind. See
docs/extraction.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from depth3dseg_ros.bags.dataset_writer import PNG_STRATEGIES, DatasetWriter
from depth3dseg_ros.bags.extract_bag import BagJob, extract_bag
from depth3dseg_ros.bags.frames import (
    COMPRESSED,
    IMAGE,
    NOT_SELECTED,
    ROLES,
)
from depth3dseg_ros.bags.label_policy import LABEL_POLICIES
from depth3dseg_ros.bags.extract_config import (
    PRESETS,
    ExtractConfig,
    config_error_line,
    flag_problem,
    load_extract_config,
)
from depth3dseg_ros.bags.progress import show_progress
from depth3dseg_ros.bags.report import format_report, refused_image_lines  # noqa: F401 - API
from depth3dseg_ros.bags.reader import DEFAULT_TYPESTORE, detect_format
from depth3dseg_ros.bags.topic_check import ALLOWABLE, check_topics
from depth3dseg_ros.core.classes import NYU13, ClassSet
from depth3dseg_ros.dataset_format import complete_index_bytes


class OutputDirError(ValueError):
    """The output path cannot be the dataset directory: it is a file, or it cannot be created
    (the CLI exits 2 naming ``-o/--output``)."""


def output_dir_problem(out_dir: Path | str) -> Optional[str]:
    """Why ``out_dir`` cannot be (created as) the dataset directory, e.g. ``'x.md' is a file,
    not a directory``, or None when it can; nothing is created."""
    p = Path(out_dir)
    if p.is_symlink() and not p.exists():
        return f'{str(p)!r} is a dangling symbolic link'
    if p.exists():
        if not p.is_dir():
            what = 'a file, not a directory' if p.is_file() else 'not a directory'
            return f'{str(p)!r} is {what}'
        if not os.access(p, os.W_OK | os.X_OK):
            return f'{str(p)!r} is a directory this user cannot write to'
        return None
    above = next(a for a in Path(os.path.abspath(p)).parents if os.path.lexists(a))
    if not above.is_dir():
        return f'{str(p)!r} cannot be created: {str(above)!r} is a file, not a directory'
    if not os.access(above, os.W_OK | os.X_OK):
        return f'{str(p)!r} cannot be created: no write permission in {str(above)!r}'
    return None


def bag_names(paths: Sequence[Path]) -> List[str]:
    """Frame-id prefixes: the bag's name without storage suffixes, [A-Za-z0-9_-] only, made
    unique."""
    out: List[str] = []
    for p in paths:
        base = re.sub(r'(\.(db3|mcap|bag|zstd|lz4))+$', '', p.name) or 'bag'
        base = re.sub(r'[^A-Za-z0-9_-]', '_', base)
        name, k = base, 2
        while name in out:
            name, k = f'{base}_{k}', k + 1
        out.append(name)
    return out


def extract(
    bags: Sequence[Path | str], out_dir: Path | str, cfg: ExtractConfig, progress: bool = False
) -> Dict[str, Any]:
    """Extract every bag into ``out_dir``; return the report (also stored in manifest.json).
    ``progress``: a tqdm bar per bag over the messages read, on stderr (bags.progress; the CLI
    shows it when stderr is a terminal, issue 14).

    Raises:
        FileNotFoundError, ValueError, UnsupportedCompression: a bag cannot be read (format,
            compression, ROS 1 bag without index: C29, C38); raised for all bags before any frame
            is written.
        MissingTopics: a requested depth/labels/camera_info topic is missing from a bag and not in
            ``cfg.allow_missing`` (issue 15); raised before any frame is written.
        ValueError: a bag has no RGB topic ``cfg.rgb_topic`` (the message lists its image topics).
        OutputDirError: ``out_dir`` is a file or cannot be created (checked before the bags are
            opened; nothing is written).
        When any error ends a run that created ``out_dir`` before a frame was indexed, ``out_dir``
        is removed (no half-made output directory, C38).
    """
    cfg.validate()
    problem = output_dir_problem(out_dir)
    if problem:
        raise OutputDirError(f'out_dir {problem}')
    paths = [Path(os.path.abspath(b)) for b in bags]
    formats = [detect_format(p) for p in paths]  # fail up front (C29, C38)
    if cfg.allow_missing is not None:
        check_topics(paths, formats, cfg.topics(), cfg.allow_missing, cfg.typestore)  # issue 15
    out_dir = Path(out_dir)
    created = not out_dir.exists()
    try:
        return _extract(paths, formats, out_dir, cfg, progress)
    except BaseException:
        if created and out_dir.is_dir() and not complete_index_bytes(out_dir)[0]:
            shutil.rmtree(out_dir, ignore_errors=True)
        raise


def _extract(
    paths: Sequence[Path],
    formats: Sequence[Any],
    out_dir: Path,
    cfg: ExtractConfig,
    progress: bool = False,
) -> Dict[str, Any]:
    """:func:`extract` once the bags are checked: write the frames, the manifest, return the
    report."""
    classes = ClassSet.from_yaml(cfg.classes) if cfg.classes else NYU13
    names = bag_names(paths)
    report: Dict[str, Any] = {}
    sources: List[Dict[str, Any]] = []
    budget = None if cfg.max_frames is None else int(cfg.max_frames)
    with DatasetWriter(
        out_dir, classes, cfg.png_level, int(cfg.workers), cfg.png_strategy
    ) as writer:
        for path, name, fmt in zip(paths, names, formats):
            job = BagJob(path, name, fmt, cfg, classes, writer, budget, progress)
            rep, src, budget = extract_bag(job)
            report[name] = rep
            sources.append(src)
        writer.write_manifest(sources, report)
        report_all = dict(report)
    return report_all


def build_parser() -> argparse.ArgumentParser:
    """The ``depth3dseg-extract`` argument parser (its help names each option's default)."""
    d = ExtractConfig()
    p = argparse.ArgumentParser(
        prog='depth3dseg-extract', description=' '.join(__doc__.split('\n\n')[0].split())
    )
    p.add_argument(
        'bags', nargs='+', help='rosbag2 directories, .db3/.mcap files or ROS 1 .bag files'
    )
    p.add_argument(
        '-o',
        '--output',
        '--out',
        required=True,
        help='dataset directory (created or appended to; --out as in depth3dseg-eval/-train)',
    )
    p.add_argument(
        '--config',
        help='YAML with ExtractConfig keys (e.g. rgb_topic, tolerance_ms); flags '
        'given here override it (default: none)',
    )
    p.add_argument(
        '--preset',
        choices=sorted(PRESETS),
        help='topic names of a camera driver (default: depth3dseg, the layout of the package\'s '
        'own bags and of the sample bag; docs/extraction.md lists them)',
    )
    for role in ROLES:
        off = '' if role == 'rgb' else "; '' disables"
        p.add_argument(
            f'--{role.replace("_", "-")}-topic',
            dest=f'{role}_topic',
            metavar='TOPIC',
            help=f'{role} topic (default: the preset\'s, {PRESETS["depth3dseg"][role]}{off})',
        )
    p.add_argument(
        '--tolerance-ms', type=float, help=f'pairing tolerance (default {d.tolerance_ms:g} ms)'
    )
    p.add_argument(
        '--typestore',
        help=f'built-in types for bags without definitions (default {DEFAULT_TYPESTORE})',
    )
    p.add_argument(
        '--every', type=int, metavar='N', help=f'keep every N-th RGB frame (default {d.every})'
    )
    p.add_argument(
        '--max-frames', type=int, help='stop after this many frames, all bags (default: no limit)'
    )
    p.add_argument(
        '--png-level',
        type=int,
        help=f'PNG compression level 0..9 (default {d.png_level} = stored, fastest; '
        '1 = about a third of the size)',
    )
    p.add_argument(
        '--png-strategy',
        choices=sorted(PNG_STRATEGIES),
        help=f'zlib strategy (default {d.png_strategy})',
    )
    p.add_argument('--workers', type=int, help='PNG encoding threads (default min(4, CPUs))')
    p.add_argument(
        '--max-image-pixels',
        type=int,
        metavar='N',
        help='image messages declaring more pixels are refused before decoding and counted as '
        f'skipped (default {d.max_image_pixels} = 8192x8192, the node\'s max_image_pixels)',
    )
    p.add_argument('--classes', help='class set YAML (default NYU13)')
    p.add_argument(
        '--depth-scale', type=float, help='metres per unit of 16UC1 depth (default 0.001)'
    )
    p.add_argument(
        '--use-rectified',
        action='store_true',
        default=None,
        help='K from CameraInfo.P (default: from CameraInfo.K)',
    )
    p.add_argument(
        '--out-of-range-labels',
        choices=LABEL_POLICIES,
        help='label ids outside the class set (e.g. 255 = ignore): void = map to the void id and '
        f'count them, refuse = skip the frame (default {d.out_of_range_labels}; C43)',
    )
    p.add_argument(
        '--allow-missing',
        metavar='ROLES',
        help=f'comma list of roles ({",".join(ALLOWABLE)}) a bag may lack although a topic is '
        'set for them; otherwise a missing one is an error naming the topics of that type in the '
        'bag, exit 2 (default: none)',
    )
    p.add_argument('-q', '--quiet', action='store_true', help='no report on stdout')
    p.add_argument(
        '--no-progress',
        action='store_true',
        help='no progress bar (it is shown only when stderr is a terminal anyway)',
    )
    return p


def _storage_errors() -> tuple:
    """SQLite's errors (sqlite3 and apsw, which rosbags reads .db3 with) for damage that only
    shows while reading (bags.sqlite_salvage catches what it can before)."""
    import sqlite3

    try:
        import apsw
    except ImportError:  # pragma: no cover - rosbags installs it
        return (sqlite3.Error,)
    return (sqlite3.Error, apsw.Error)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Console entry point; returns 0 on success, 2 on bad input, 1 when the run fails for
    another reason (a failed write, a fault of the extractor); one error line either way
    (docs/extraction.md, "Exit codes").

    Bad input: bad arguments (a flag's value out of range, named as typed:
    bags.extract_config.flag_problem), an output path that is a file or cannot be created, a
    ``--config`` or ``--classes`` file that is missing, does not parse (file, line, column:
    core.yamlfile) or holds a bad value, and a bag that does not exist, is an empty directory,
    is not a bag, cannot be opened or read (unsupported, cut off, damaged) or lacks a requested
    topic (:class:`MissingTopics`). Flags, the output path and the YAML files are checked before
    any bag is read or anything written."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format='%(levelname)s %(name)s: %(message)s')
    flags = {a.dest: a.option_strings[-1] for a in parser._actions if a.option_strings}
    problem = flag_problem(vars(args), flags)
    if problem is None:
        out_problem = output_dir_problem(args.output)
        problem = f'-o/--output {out_problem}' if out_problem else None
    if problem is not None:
        print(f'depth3dseg-extract: error: {problem}', file=sys.stderr)
        return 2
    overrides = {
        k: v
        for k, v in vars(args).items()
        if k not in ('bags', 'output', 'config', 'preset', 'quiet', 'no_progress')
    }
    try:
        cfg = load_extract_config(args.config, args.preset, overrides)
    except (ValueError, OSError) as err:  # the YAML file (core.yamlfile) or one of its values
        line = config_error_line(err, '--config', args.config)
        print(f'depth3dseg-extract: error: {line}', file=sys.stderr)
        return 2
    try:  # read before any bag: a bad classes file is one line naming it
        if cfg.classes:
            ClassSet.from_yaml(cfg.classes)
    except (ValueError, OSError) as err:
        option = '--classes' if args.classes else f'classes (in --config {args.config})'
        print(f'depth3dseg-extract: error: {option} {" ".join(str(err).split())}', file=sys.stderr)
        return 2
    if cfg.allow_missing is None:  # the CLI always checks the requested topics (issue 15)
        cfg.allow_missing = []
    try:
        report = extract(args.bags, args.output, cfg, progress=show_progress(args.no_progress))
    except (ValueError, FileNotFoundError, *_storage_errors()) as err:  # the bags: bad input
        print(f'depth3dseg-extract: error: {" ".join(str(err).split())}', file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as err:  # a failed write, or a fault of the extractor
        print(f'depth3dseg-extract: error: {" ".join(str(err).split())}', file=sys.stderr)
        return 1
    if not args.quiet:
        print(format_report(report))
        print(f'config: {asdict(cfg)}')
    for line in refused_image_lines(report, 'depth3dseg-extract'):  # frames lost: even with -q
        print(line, file=sys.stderr)
    for (
        name,
        rep,
    ) in report.items():  # an allowed missing topic (--allow-missing): say so, even with -q
        for role in rep['missing_roles']:
            print(
                f"depth3dseg-extract: warning: bag {rep['bag']!r} has no {role} topic "
                f"{rep['topics_requested'][role]!r}: its frames were written without {role} "
                f"(--allow-missing {role}; image topics in this bag: {rep['image_topics']})",
                file=sys.stderr,
            )
        unused = [
            f"{t['topic']} ({t['type']})"
            for t in rep['topics']
            if t['type'] in (IMAGE, COMPRESSED)
            and t['role'] is None
            and NOT_SELECTED in t['reasons']
        ]
        if unused:  # recorded images that end in no role (issue 15): say so even with --quiet
            print(
                f"depth3dseg-extract: warning: bag {rep['bag']!r}: image topics not extracted: "
                f'{unused} (select them with --depth-topic / --labels-topic)',
                file=sys.stderr,
            )
        oor = rep.get('labels_out_of_range') or {}
        if oor.get('frames'):  # data changed or dropped (C43): say so even with --quiet
            what = (
                f"{oor['pixels']} pixels mapped to void {oor['void_id']}"
                if oor['policy'] == 'void'
                else 'those frames refused (not written)'
            )
            print(
                f"depth3dseg-extract: warning: bag {rep['bag']!r}: {oor['frames']} label images "
                "hold ids "
                f"{oor['ids']} outside the class set 0..{oor['num_classes'] - 1}: {what} "
                f"(--out-of-range-labels {oor['policy']})",
                file=sys.stderr,
            )
    return 0


if __name__ == '__main__':
    sys.exit(main())
