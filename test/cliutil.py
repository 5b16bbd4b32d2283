"""What the package's command-line tools print for a user error: exactly one
``<prog>: error: <message>`` line on stderr and no traceback (exit 2 is asserted by the caller)."""

from __future__ import annotations


def one_error_line(capsys, prog: str) -> str:
    """The captured stderr, asserted to be one ``<prog>: error: ...`` line; returns it."""
    err = capsys.readouterr().err
    assert err.startswith(f'{prog}: error: ') and err.count('\n') == 1, err
    return err
