"""One bag of ``depth3dseg-extract`` (bags.extract): open it, plan its frames, write them.

Split out of bags/extract.py so that a bag can be read a second time: an MCAP bag in which rosbags
meets a damaged chunk (:class:`bags.reader.BagDamaged`, C38) is read again in file order with the
damaged chunks skipped; frames the first attempt wrote are then "already present".
"""

from __future__ import annotations

import logging
from contextlib import ExitStack, closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from depth3dseg_ros.bags.dataset_writer import DatasetWriter
from depth3dseg_ros.bags.extract_config import ExtractConfig
from depth3dseg_ros.bags.frames import (
    NO_PARTNER,
    NOT_EXTRACTED,
    ROLES,
    BagFrames,
    TopicStats,
)
from depth3dseg_ros.bags.label_policy import LabelRange, _refuse, refused_reason
from depth3dseg_ros.bags.pairing import match_nearest
from depth3dseg_ros.bags.prefetch import prefetch
from depth3dseg_ros.bags.progress import BagBar, bar_total
from depth3dseg_ros.bags.reader import BagDamaged, BagReader
from depth3dseg_ros.core.classes import ClassSet

LOG = logging.getLogger('depth3dseg-extract')

#: frames decoded ahead of the writer by the reader thread (bags.prefetch); 0 = no thread
PREFETCH = 2


@dataclass
class BagJob:
    """One bag of an extraction: ``path``, ``name`` (its frame-id prefix), ``fmt`` (its
    ``BagFormat`` as checked before), the run's ``cfg`` / ``classes`` / ``writer`` /
    ``progress`` flag (a bar per attempt), and ``budget`` (frames left, None: all)."""

    path: Path
    name: str
    fmt: Any
    cfg: ExtractConfig
    classes: ClassSet
    writer: DatasetWriter
    budget: Optional[int]
    progress: bool


def extract_bag(job: BagJob) -> Tuple[Dict[str, Any], Dict[str, Any], Optional[int]]:
    """Write the frames of one bag; returns (its report entry, its manifest source entry, the
    frame budget left). When rosbags meets a damaged MCAP chunk the bag is read once more in file
    order with the damaged chunks skipped (a warning names the bag and the error; C38).

    Raises:
        ValueError: the bag has no RGB topic ``cfg.rgb_topic`` (the message lists its image
            topics); :class:`BagDamaged` for damage met while reading a bag that is not MCAP (one
            error line in the CLI).
    """
    try:
        with ExitStack() as bars:  # an error closes the attempt's bar before it is printed
            return _read_bag(job, bars, file_order=False)
    except BagDamaged as err:
        if not err.retryable:
            raise
        LOG.warning('%s; reading it again in file order, skipping the damaged chunks', err)
    with ExitStack() as bars:
        return _read_bag(job, bars, file_order=True)


def mark_info_not_extracted(bf: BagFrames) -> None:
    """After :meth:`BagFrames.plan`: a CameraInfo message paired with an RGB frame (its nearest
    within tolerance) is ``frame not extracted`` until a written frame uses it, like depth and
    labels, so the report keeps ``no partner within tolerance`` for CameraInfo no RGB frame
    paired with, not for the frames ``--every`` / ``--max-frames`` left out (or whose rgb
    failed). Other reasons (undecodable, already in dataset) are kept."""
    if 'rgb' not in bf.stamps or 'camera_info' not in bf.stamps:
        return
    anchors = [s for s in bf.stamps['rgb'] if s is not None]
    stamped = [j for j, s in enumerate(bf.stamps['camera_info']) if s is not None]
    stamps = [bf.stamps['camera_info'][j] for j in stamped]
    status = bf.status['camera_info']
    for k in match_nearest(anchors, stamps, bf.tolerance_ns, unique=False):  # as plan() pairs
        if k is not None and status[stamped[k]] == NO_PARTNER:
            status[stamped[k]] = NOT_EXTRACTED


def _read_bag(
    job: BagJob, bars: ExitStack, file_order: bool
) -> Tuple[Dict[str, Any], Dict[str, Any], Optional[int]]:
    """:func:`extract_bag`'s one attempt; its progress bar goes on ``bars`` (``file_order``: see
    :class:`BagReader`)."""
    path, name, fmt, cfg, classes = job.path, job.name, job.fmt, job.cfg, job.classes
    writer, budget, progress = job.writer, job.budget, job.progress
    with BagReader(path, cfg.typestore, file_order=file_order) as reader:
        bf = BagFrames(
            reader,
            cfg.topics(),
            int(round(cfg.tolerance_ms * 1e6)),
            cfg.depth_scale,
            cfg.use_rectified,
            int(cfg.max_image_pixels),
        )
        images = sorted(t for t, e in reader.topics().items() if 'Image' in e.msgtype)
        if 'rgb' not in bf.role_topic:
            raise ValueError(
                f'bag {str(path)!r}: rgb_topic={cfg.rgb_topic!r} is not an image '
                f'topic of this bag; image topics: {images}'
            )
        fmt = reader.format or fmt  # after open: a whole-file compressed bag's inner kind
        counts = {t: e.count for t, e in reader.topics().items()}
        total = bar_total(counts, bf.role_topic, bool(fmt.recovery))
        bar = bars.enter_context(BagBar(name, total, progress))
        bf.tick = bar.tick
        bf.scan()

        def frame_id(i: int, _name: str = name) -> str:
            return f'{_name}_{i:06d}'

        planned, counted = bf.plan(frame_id, int(cfg.every), budget, writer.has)
        mark_info_not_extracted(bf)
        bar.phase('frames', len(planned))
        if budget is not None:
            budget -= counted
        written = 0
        used_topics = {r: bf.role_topic.get(r) for r in ROLES}
        label_range = LabelRange(classes, cfg.out_of_range_labels)
        info_used: set = set()
        # decoded in a reader thread while the frames before are written (issue 15)
        with closing(prefetch(bf.frames(planned), PREFETCH)) as decoded:
            for fr in decoded:
                if label_range.apply(fr) is None:  # refused (C43): counted in the per-topic table
                    _refuse(bf, fr, planned[fr.index], refused_reason(len(classes)), info_used)
                    continue
                info_used.add(planned[fr.index]['camera_info'])
                topics = {
                    r: (
                        used_topics[r]
                        if (r != 'depth' or fr.depth_mm is not None)
                        and (r != 'labels' or fr.labels is not None)
                        else None
                    )
                    for r in ROLES
                }
                writer.write_frame(
                    frame_id(fr.index),
                    fr.rgb,
                    fr.K,
                    fr.stamp_ns,
                    str(path),
                    topics,
                    depth_mm=fr.depth_mm,
                    labels=fr.labels,
                )
                written += 1
        for j in info_used:  # used by a written frame, whatever a refused one marked
            bf.status['camera_info'][j] = None
        bar.close()
        stats: Dict[str, TopicStats] = bf.finish()
    fmt_text = fmt.describe()
    rep = {
        'bag': str(path),
        'format': fmt_text,
        'frames_written': written,
        'frames_present': counted - len(planned),
        'topics_requested': cfg.topics(),
        'missing_roles': [r for r, t in cfg.topics().items() if t and r not in bf.role_topic],
        'image_topics': images,
        'topics': [s.to_dict() for s in stats.values()],
        'labels_out_of_range': label_range.to_dict(),
        'refused_images': dict(bf.refused),  # topic -> the first refusal's text (issue 55)
    }
    src = {
        'bag': str(path),
        'name': name,
        'format': fmt_text,
        'topics': {r: bf.role_topic.get(r) for r in ROLES},
        'typestore': cfg.typestore,
        'tolerance_ms': cfg.tolerance_ms,
    }

    return rep, src, budget
