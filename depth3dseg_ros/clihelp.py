"""``--help`` that names each option's default: the argparse formatter of the package's CLIs."""

from __future__ import annotations

import argparse

__all__ = ['DefaultsHelpFormatter']


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """argparse.ArgumentDefaultsHelpFormatter without its noise: ``(default: X)`` is added only to
    options whose default is a value (not None, False or empty: flags and "not given" say nothing)
    and whose help does not already state a default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ''
        default = action.default
        if (
            not action.option_strings
            or 'default' in text.lower()
            or default is None
            or default is False
            or default == []
            or default is argparse.SUPPRESS
        ):
            return text
        return f'{text} (default: %(default)s)'
