"""The RViz config of ``depth3dseg_node`` for a namespace, and the launch file's choices that are
plain logic (issue 14), kept here so they are tested without ROS's ``launch`` packages.

``config/depth3dseg.rviz`` names the topics of a node ``depth3dseg`` in no namespace
(``/depth3dseg/points``, ...); RViz has no namespace of its own for display topics, so the launch
file writes a copy with ``/<namespace>/depth3dseg/...`` and starts ``rviz2 -d <copy>``. Without the
launch file::

    python -m depth3dseg_ros.node.rviz_config --namespace front > /tmp/front.rviz
    rviz2 -d /tmp/front.rviz
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import tempfile
from typing import Any
from pathlib import Path

NODE_NAME = 'depth3dseg'
#: a ROS name token (rcl's rules: letters, digits, underscores, not starting with a digit)
_TOKEN = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
_TRUE = ('true', '1', 'yes', 'on')
_FALSE = ('false', '0', 'no', 'off', '')


def normalize_namespace(namespace: str) -> str:
    """A launch namespace as an absolute prefix: ``''``/``'/'`` -> ``''``; ``'front'``,
    ``'/front/'`` -> ``'/front'``; ``'a/b'`` -> ``'/a/b'``.

    Raises:
        ValueError: a token that is not a valid ROS name (``namespace='front cam'``).
    """
    parts = [t for t in str(namespace).strip().split('/') if t]
    for t in parts:
        if not _TOKEN.fullmatch(t):
            raise ValueError(
                f'namespace={namespace!r}: {t!r} is not a valid ROS name token '
                '(letters, digits, _; not starting with a digit)'
            )
    return ''.join('/' + t for t in parts)


def namespaced_rviz_config(text: str, namespace: str, node_name: str = NODE_NAME) -> str:
    """``text`` (an RViz config) with every topic ``/depth3dseg/...`` renamed to
    ``/<namespace>/<node_name>/...``; everything else byte for byte the same.

    Only YAML lines ``Value: /depth3dseg/...`` (a display's ``Topic: Value``) change, and, in a
    namespace, the header comment that says which node's topics the file names.

    Raises:
        ValueError: a bad namespace or node name (named).
    """
    ns = normalize_namespace(namespace)
    if not _TOKEN.fullmatch(node_name):
        raise ValueError(f'node_name={node_name!r} is not a valid ROS node name')
    pattern = re.compile(rf'^(\s*Value:\s*)/{NODE_NAME}(/\S*)\s*$', re.MULTILINE)
    out = pattern.sub(lambda m: f'{m.group(1)}{ns}/{node_name}{m.group(2)}', text)
    if ns or node_name != NODE_NAME:
        out = out.replace(
            f"topics of the node '{NODE_NAME}' in no namespace.",
            f"topics of the node '{node_name}' in namespace '{ns}' ({ns}/{node_name}/...).",
            1,
        )
    return out


def write_namespaced_rviz(
    src: str | Path, namespace: str, out_dir: str | Path | None = None
) -> str:
    """Write :func:`namespaced_rviz_config` of file ``src`` to ``out_dir`` (default: the system's
    temporary directory) and return its path; no namespace returns ``src`` unchanged. The name
    depends on the namespace and the content, so launches for several cameras do not collide.

    Raises:
        ValueError: a bad namespace. OSError: ``src`` unreadable or ``out_dir`` not writable.
    """
    ns = normalize_namespace(namespace)
    if not ns:
        return str(src)
    text = namespaced_rviz_config(Path(src).read_text(encoding='utf-8'), ns)
    digest = hashlib.sha1(text.encode()).hexdigest()[:10]
    out = Path(out_dir or tempfile.gettempdir()) / (
        f'depth3dseg{ns.replace("/", "_")}_{digest}.rviz'
    )
    out.write_text(text, encoding='utf-8')
    return str(out)


def launch_flag(value: str, name: str) -> bool:
    """A launch argument as a bool (true/false, 1/0, yes/no, on/off; '' = false).

    Raises:
        ValueError: anything else, naming the launch argument.
    """
    v = str(value).strip().lower()
    if v in _TRUE or v in _FALSE:
        return v in _TRUE
    raise ValueError(f'launch argument {name}:={value!r} must be true or false')


def node_overrides(
    rviz: str, cloud_rgb: str, rgbd: str = 'false', geometry_model: str = ''
) -> dict[str, Any]:
    """Node parameters the launch arguments set beyond the params file: ``cloud_rgb`` when given
    (camera|class), else ``class`` when RViz is started (its "Labelled cloud" display shows the
    ``rgb`` field); ``use_measured_depth: true`` with ``rgbd`` true (an RGB-D camera: the node
    subscribes ``depth``); ``geometry_model`` when given (the RGB-D late fusion). Nothing else: the
    params file's values stand.

    Raises:
        ValueError: ``rviz`` or ``rgbd`` not a bool, or ``cloud_rgb`` not '', camera or class
            (named).
    """
    with_rviz = launch_flag(rviz, 'rviz')
    choice = str(cloud_rgb).strip()
    if choice not in ('', 'camera', 'class'):
        raise ValueError(f"launch argument cloud_rgb:={cloud_rgb!r} must be camera, class or ''")
    out: dict[str, Any] = {}
    if choice or with_rviz:
        out['cloud_rgb'] = choice or 'class'
    if launch_flag(rgbd, 'rgbd'):
        out['use_measured_depth'] = True
    if str(geometry_model).strip():  # used with use_measured_depth (rgbd or the params file)
        out['geometry_model'] = str(geometry_model).strip()
    return out


def node_executable(managed: str) -> str:
    """The node executable for the launch argument ``managed``: ``depth3dseg_lifecycle_node``
    (the managed node, node/lifecycle.py: starts unconfigured) when true, else
    ``depth3dseg_node``.

    Raises:
        ValueError: ``managed`` not a bool (named).
    """
    return 'depth3dseg_lifecycle_node' if launch_flag(managed, 'managed') else 'depth3dseg_node'


def main(argv: list[str] | None = None) -> int:
    """``python -m depth3dseg_ros.node.rviz_config --namespace NS [--config FILE]``: print the
    namespaced RViz config (default: the shipped config/depth3dseg.rviz). Exit 2 on a bad name."""
    ap = argparse.ArgumentParser(prog='python -m depth3dseg_ros.node.rviz_config')
    ap.add_argument('--namespace', default='', help='the node namespace (launch namespace:=)')
    ap.add_argument('--node-name', default=NODE_NAME, help='the node name (default depth3dseg)')
    ap.add_argument('--config', default=None, help='RViz file (default: the shipped one)')
    args = ap.parse_args(argv)
    if args.config is None:
        from depth3dseg_ros.paths import share_file

        args.config = share_file('config', 'depth3dseg.rviz')
    try:
        text = Path(args.config).read_text(encoding='utf-8')
        sys.stdout.write(namespaced_rviz_config(text, args.namespace, args.node_name))
    except (ValueError, OSError) as err:
        print(f'{ap.prog}: error: {err}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
