"""Fetch the real camera sample files into a cache, verified by sha256 (registry in
``samples.registry``).

Where a file comes from, first match wins:

1. the cache (``$DEPTH3DSEG_CACHE``, default the user cache directory ``…/depth3dseg_ros``), if the
   file there has the registry's sha256;
2. a local copy: ``$DEPTH3DSEG_SAMPLE_DATA`` names a folder laid out like the registry
   (``<source>/<path>``); a file there with the right checksum is copied into the cache (nothing is
   downloaded, so offline machines and CI work from a mirror);
3. a download with ``pooch`` from ``$DEPTH3DSEG_SAMPLE_URL`` (default ``registry.RAW_BASE``),
   checked against the sha256 before it is kept.

A file that can be had none of these ways raises :class:`SampleDataUnavailable`, whose message says
how to get it. A wrong checksum is never accepted, whichever way the file came.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from depth3dseg_ros.samples.registry import FILES, RAW_BASE, url_of

ENV_CACHE = 'DEPTH3DSEG_CACHE'
ENV_COPY = 'DEPTH3DSEG_SAMPLE_DATA'
ENV_URL = 'DEPTH3DSEG_SAMPLE_URL'
HOW_TO = (
    f'connect to the internet once (files are cached), or set {ENV_COPY} to a local copy laid out '
    f'as <source>/<path> (docs/sample_data.md)'
)


class SampleDataUnavailable(RuntimeError):
    """A registered sample file could neither be found (cache, local copy) nor downloaded."""


def cache_dir() -> Path:
    """Root of the cache: ``$DEPTH3DSEG_CACHE`` or the platform's user cache dir +
    ``depth3dseg_ros``."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env)
    import pooch

    return Path(pooch.os_cache('depth3dseg_ros'))


def sha256_of(path: Path) -> str:
    """Hex sha256 of the file at ``path``."""
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def _verified(path: Path, sha: str) -> bool:
    return path.is_file() and sha256_of(path) == sha


def _copy_atomic(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix='.' + dst.name)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _download(name: str, dst: Path, sha: str) -> None:
    import pooch

    url = url_of(name, os.environ.get(ENV_URL) or RAW_BASE)
    dst.parent.mkdir(parents=True, exist_ok=True)
    pooch.get_logger().setLevel(
        'WARNING'
    )  # its per-file INFO line would precede our one-line errors
    try:
        pooch.retrieve(
            url, known_hash=f'sha256:{sha}', fname=dst.name, path=dst.parent, progressbar=False
        )
    except ValueError as err:  # pooch: checksum mismatch (the download is deleted)
        raise SampleDataUnavailable(
            f'sample file {name}: download from {url} has the wrong sha256 ({err}); not kept'
        ) from None
    except Exception as err:  # network errors come from requests/urllib3 in many classes
        raise SampleDataUnavailable(
            f'sample file {name} not available: download from {url} failed '
            f'({short_reason(err)}); {HOW_TO}'
        ) from None


#: how long the reason of a failed download may be in the one-line message
REASON_CHARS = 160


def short_reason(err: BaseException) -> str:
    """The root cause of a failed download as ``Type: text``, one line, at most
    :data:`REASON_CHARS` characters, said once (issue 54).

    requests and urllib3 wrap the cause several times over, each wrapper's text repeating the
    URL and the inner exception's (``ConnectionError: HTTPConnectionPool(...): Max retries
    exceeded with url: ... (Caused by NewConnectionError(...))``): the innermost exception is
    followed through ``reason`` (urllib3), an exception in ``args[0]`` (requests),
    ``__cause__`` and ``__context__``, and the connection's repr in front of its text is
    dropped (the URL is in the message already).
    """
    seen = {id(err)}
    while True:
        nxt = getattr(err, 'reason', None)
        if not isinstance(nxt, BaseException):
            first = err.args[0] if err.args else None
            nxt = first if isinstance(first, BaseException) else None
        nxt = nxt or err.__cause__ or err.__context__
        if nxt is None or id(nxt) in seen:
            break
        seen.add(id(nxt))
        err = nxt
    text = ' '.join(str(err).split())
    text = re.sub(r'^<?[\w.]*Connection(Pool)?\b[^:]*?\): ', '', text)  # 'HTTPConnection(...): '
    reason = f'{type(err).__name__}: {text}' if text else type(err).__name__
    return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 1] + '…'


def fetch(name: str) -> Path:
    """Path of registry file ``name`` in the cache, obtained as the module docstring says.

    Raises:
        KeyError: ``name`` is not in the registry.
        SampleDataUnavailable: not in the cache or the local copy and not downloadable.
    """
    if name not in FILES:
        raise KeyError(f'sample file {name!r} is not in the registry')
    sha = FILES[name]
    dst = cache_dir() / 'real' / name
    if _verified(dst, sha):
        return dst
    copy = os.environ.get(ENV_COPY)
    if copy:
        src = Path(copy) / name
        if _verified(src, sha):
            _copy_atomic(src, dst)
            return dst
    _download(name, dst, sha)
    return dst


def fetch_all() -> Path:
    """Fetch every registry file; return the root (``cache_dir()/real``) under which each lies at
    its name.

    Raises:
        SampleDataUnavailable: the first file that cannot be had (its message says how to get it).
    """
    for name in FILES:
        fetch(name)
    return cache_dir() / 'real'
