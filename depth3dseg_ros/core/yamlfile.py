"""The one loader of YAML files a user names (issue 55): every command-line option and parameter
that takes a YAML file reads it here (depth3dseg-train --config and ``--set data.classes=FILE``,
depth3dseg-extract --config and --classes, depth3dseg-eval / depth3dseg-calibrate
--extract-config, the node's ``--params-file`` and ``class_palette_file``), and a bag directory's
``metadata.yaml`` (bags.sniff reads it first, for every command that opens a bag).

A file that does not parse is one line: the file, the line and column (1-based, as editors count)
and the parser's short reason, e.g. ``bad.yaml:3:1: not valid YAML: expected ',' or ']', but got
'<stream end>' (while parsing a flow sequence started at line 1, column 4)``. The CLIs print it
after their ``<prog>: error: <option>`` and exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class YamlFileError(ValueError):
    """A YAML file that cannot be read or does not parse; its text is one line naming the file
    (and, for a parse error, the line and column).

    Attributes: path (str), line and column (1-based; None when the error has no position).
    """

    def __init__(
        self, text: str, path: str, line: int | None = None, column: int | None = None
    ) -> None:
        super().__init__(text)
        self.path, self.line, self.column = path, line, column


def _one_line(text: Any) -> str:
    return ' '.join(str(text).split())


def yaml_error_text(err: yaml.YAMLError) -> tuple[str, int | None, int | None]:
    """(the parser's short reason, line, column) of a PyYAML error, positions 1-based (None when
    the error has none). The reason is the ``problem`` text, with its ``context`` and where that
    started when it names another place: ``expected ',' or ']', but got '<stream end>' (while
    parsing a flow sequence started at line 1, column 4)``."""
    problem = getattr(err, 'problem', None)
    context = getattr(err, 'context', None)
    mark = getattr(err, 'problem_mark', None) or getattr(err, 'context_mark', None)
    reason = _one_line(problem or context or type(err).__name__)
    cmark = getattr(err, 'context_mark', None)
    if problem and context:
        where = ''
        if cmark is not None and (
            mark is None or (cmark.line, cmark.column) != (mark.line, mark.column)
        ):
            where = f' started at line {cmark.line + 1}, column {cmark.column + 1}'
        reason += f' ({_one_line(context)}{where})'
    if mark is None:
        return reason, None, None
    return reason, mark.line + 1, mark.column + 1


def load_yaml_file(path: str | Path, loader: Any = None) -> Any:
    """The data of the YAML file at ``path`` (``yaml.safe_load``: plain data only; an empty file
    is None). ``loader``: another safe loader class (e.g. the C ``CSafeLoader``), default
    ``yaml.SafeLoader``.

    Raises:
        FileNotFoundError: no file at ``path`` (``<path>: no such file``).
        YamlFileError (a ValueError): a directory, an unreadable or non-UTF-8 file, or a parse
            error: one line, ``<path>:<line>:<column>: not valid YAML: <reason>``.
    """
    p = Path(path)
    name = str(path)
    if not p.exists():
        raise FileNotFoundError(f'{name}: no such file')
    if p.is_dir():
        raise YamlFileError(f'{name}: is a directory, not a YAML file', name)
    try:
        text = p.read_text(encoding='utf-8')
    except UnicodeDecodeError as err:
        raise YamlFileError(
            f'{name}: not a YAML file (byte {err.start} is not UTF-8 text)', name
        ) from None
    except OSError as err:
        raise YamlFileError(f'{name}: cannot be read ({err.strerror or err})', name) from None
    try:
        return yaml.load(text, Loader=loader or yaml.SafeLoader)
    except yaml.YAMLError as err:
        reason, line, column = yaml_error_text(err)
        where = '' if line is None else f':{line}:{column}'
        raise YamlFileError(
            f'{name}{where}: not valid YAML: {reason}', name, line, column
        ) from None
