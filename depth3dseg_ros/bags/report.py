"""depth3dseg-extract's report in words: the per-bag, per-topic table of read / used / skipped
messages with their reasons (stdout), and the warning lines for image messages refused before
decoding (stderr; depth3dseg-eval --bag prints them too)."""

from __future__ import annotations

from typing import Any, Dict, List

from depth3dseg_ros.bags.frames import OVER_LIMIT


def refused_image_lines(report: Dict[str, Any], prog: str) -> List[str]:
    """One warning line per bag and topic whose image messages were refused before decoding
    (over ``max_image_pixels``, issue 55): how many, and the first one's size and the limit.
    Printed by depth3dseg-extract and depth3dseg-eval --bag even when quiet (frames lost)."""
    lines = []
    for rep in report.values():
        for t in rep['topics']:
            n = t['reasons'].get(OVER_LIMIT, 0)
            first = (rep.get('refused_images') or {}).get(t['topic'])
            if n and first:
                lines.append(
                    f"{prog}: warning: bag {rep['bag']!r} topic {t['topic']}: {n} image "
                    f'message(s) skipped, {OVER_LIMIT} (first: {first}; raise it with '
                    '--max-image-pixels or the max_image_pixels key of the extract config)'
                )
    return lines


def format_report(report: Dict[str, Any]) -> str:
    """Human-readable per-bag, per-topic table of read / used / skipped (reasons)."""
    lines = []
    for bag, rec in report.items():
        lines.append(
            f'bag {bag} [{rec["format"]}]: {rec["frames_written"]} frames written, '
            f'{rec["frames_present"]} already present'
        )
        lines.append(
            f'  {"topic":<42} {"type":<32} {"role":<11} {"read":>6} {"used":>6} '
            f'{"skipped":>7}  reasons'
        )
        for t in rec['topics']:
            reasons = ', '.join(f'{k}: {v}' for k, v in t['reasons'].items())
            lines.append(
                f'  {t["topic"]:<42} {t["type"]:<32} {t["role"] or "-":<11} {t["read"]:>6} '
                f'{t["used"]:>6} {t["skipped"]:>7}  {reasons}'
            )
        for role in rec.get('missing_roles', []):
            lines.append(f'  (no {role} topic {rec["topics_requested"][role]!r} in this bag)')
        oor = rec.get('labels_out_of_range') or {}
        if oor.get('frames'):
            what = (
                f'mapped to void {oor["void_id"]}' if oor['policy'] == 'void' else 'frames refused'
            )
            lines.append(
                f'  label ids outside the class set 0..{oor["num_classes"] - 1}: ids '
                f'{oor["ids"]}, '
                f'{oor["pixels"]} px in {oor["frames"]} frames, {what} (--out-of-range-labels '
                f'{oor["policy"]})'
            )
    return '\n'.join(lines)
