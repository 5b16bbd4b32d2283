"""Sample data fetched, not bundled (depth3dseg_ros.samples): download over HTTP with sha256
checks, a local copy instead of the network, clear errors when neither works.

The download path is proven against a real HTTP server on 127.0.0.1 serving the registry's files at
``<repo>/<commit>/<path>``, the layout of the public raw-file host.
"""

from __future__ import annotations

import http.server
import shutil
import subprocess
import sys
import threading
from functools import partial

import pytest

from depth3dseg_ros.samples import fetcher as fetch_mod
from depth3dseg_ros.samples.fetcher import SampleDataUnavailable, fetch, sha256_of
from depth3dseg_ros.samples.registry import FILES, SOURCES, url_of

NAME = 'slambook_rgbd/ch7/1.png'
LABELS = 'nyuv2_meta_data_13class_labels/test_labels_13/nyuv2_test_class13.tgz'


@pytest.fixture
def server(tmp_path, real_dir):
    """An HTTP server on 127.0.0.1 serving a mirror of two registry files; yields (base URL,
    root)."""
    root = tmp_path / 'www'
    for name in (NAME, LABELS):
        src = SOURCES[name.split('/', 1)[0]]
        dst = root / src.repo / src.commit / name.split('/', 1)[1]
        dst.parent.mkdir(parents=True)
        shutil.copyfile(real_dir / name, dst)
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f'http://127.0.0.1:{httpd.server_address[1]}', root
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def empty_env(tmp_path, monkeypatch):
    """A fresh cache, no local copy, and a download base where nothing listens."""
    monkeypatch.setenv(fetch_mod.ENV_CACHE, str(tmp_path / 'cache'))
    monkeypatch.delenv(fetch_mod.ENV_COPY, raising=False)
    monkeypatch.setenv(fetch_mod.ENV_URL, 'http://127.0.0.1:9')  # discard port: connection refused
    return tmp_path / 'cache'


def test_registry_urls_name_a_pinned_commit():
    assert len(FILES) == 40 and all(len(sha) == 64 for sha in FILES.values())
    url = url_of(NAME)
    assert url == (
        'https://raw.githubusercontent.com/gaoxiang12/slambook/'
        '853abac78495533dfbe3e4e8d4619017111d5842/ch7/1.png'
    )
    with pytest.raises(KeyError, match='not in the registry'):
        url_of('nope/x.png')


def test_download_from_http_server_verified_and_cached(server, empty_env, monkeypatch):
    base, _ = server
    monkeypatch.setenv(fetch_mod.ENV_URL, base)
    path = fetch(NAME)
    assert path == empty_env / 'real' / NAME and sha256_of(path) == FILES[NAME]
    path_labels = fetch(LABELS)
    assert sha256_of(path_labels) == FILES[LABELS]
    monkeypatch.setenv(fetch_mod.ENV_URL, 'http://127.0.0.1:9')  # now offline: the cache serves it
    assert fetch(NAME) == path


def test_download_with_wrong_checksum_is_refused_and_not_kept(server, empty_env, monkeypatch):
    base, root = server
    src = SOURCES['slambook_rgbd']
    served = root / src.repo / src.commit / 'ch7/1.png'
    served.write_bytes(served.read_bytes()[:-10] + b'0123456789')  # same size, other bytes
    monkeypatch.setenv(fetch_mod.ENV_URL, base)
    with pytest.raises(SampleDataUnavailable, match='wrong sha256'):
        fetch(NAME)
    assert not (empty_env / 'real' / NAME).exists()


def test_local_copy_is_used_without_network_and_checked(
    real_dir, empty_env, monkeypatch, tmp_path
):
    copy = tmp_path / 'copy'
    (copy / NAME).parent.mkdir(parents=True)
    shutil.copyfile(real_dir / NAME, copy / NAME)
    monkeypatch.setenv(fetch_mod.ENV_COPY, str(copy))
    assert sha256_of(fetch(NAME)) == FILES[NAME]  # no server runs: copied
    (empty_env / 'real' / NAME).unlink()
    (copy / NAME).write_bytes(b'not the file')  # a corrupt copy is never taken
    with pytest.raises(SampleDataUnavailable, match='download from http://127.0.0.1:9/.*failed'):
        fetch(NAME)


def test_unavailable_says_how_to_get_the_files(empty_env):
    with pytest.raises(SampleDataUnavailable) as err:
        fetch(NAME)
    msg = str(err.value)
    assert NAME in msg and fetch_mod.ENV_COPY in msg and 'internet' in msg
    # one line, the exception's text once (issue 54: urllib3's chain, the URL and the inner
    # exception's repr repeated: 'Max retries exceeded ... (Caused by NewConnectionError(...))')
    assert '\n' not in msg and msg.count('Connection refused') == 1, msg
    assert 'Max retries' not in msg and 'Caused by' not in msg and msg.count('127.0.0.1:9') == 1
    with pytest.raises(KeyError):
        fetch('unknown/file.png')


def test_short_reason_follows_the_wrapped_cause_to_its_root():
    inner = ConnectionRefusedError(111, 'Connection refused')
    mid = OSError("HTTPConnection(host='h', port=9): Failed to establish a new connection")
    mid.__cause__ = inner
    outer = RuntimeError(mid)  # requests: the wrapped exception in args[0]
    want = 'ConnectionRefusedError: [Errno 111] Connection refused'
    assert fetch_mod.short_reason(outer) == want
    long = ValueError('x' * 500)
    assert len(fetch_mod.short_reason(long)) == fetch_mod.REASON_CHARS


def test_cli_exits_2_with_one_line_when_unavailable(empty_env):
    import os

    r = subprocess.run(
        [sys.executable, '-m', 'depth3dseg_ros.samples', 'fetch'],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert r.returncode == 2 and 'Traceback' not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and fetch_mod.ENV_COPY in r.stderr
