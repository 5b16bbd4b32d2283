"""The repository stands on its own: nothing cites files that a clone does not contain.

* No tracked text file names a path outside the repository (the team's workbench beside it) or the
  workbench's case, method and convention files; the in-repo pages are docs/cases.md,
  docs/method.md, docs/ros_conventions.md and docs/pip_ros_stack.md.
* Every case id (C01…C45) cited in test/ or depth3dseg_ros/ has an entry in docs/cases.md.
* Every relative link in README.md and docs/*.md points to an existing file.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Built from parts so that this file does not contain the strings it looks for.
FORBIDDEN = (
    '../' + 'shared',
    '/work/' + 'shared',
    'shared/' + 'docs',
    'shared/' + 'cases',
    'shared/' + 'data',
    'CASES' + '.md',
    'METHOD' + '.md',
    'PIP_ROS' + '_STACK',
    'ROS_CONV' + 'ENTIONS.md',
)

CASE_HEADING = re.compile(r'^###\s+(C\d{2})\b', re.MULTILINE)
CASE_ID = re.compile(r'\b(C\d{2})\b')
CASE_TEST_NAME = re.compile(r'\btest_c(\d{2})', re.IGNORECASE)
MD_LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
FENCE = re.compile(r'^(```|~~~).*?^\1', re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r'`[^`\n]*`')


def _git_files(*args: str) -> list[str]:
    out = subprocess.run(
        ['git', 'ls-files', '-z', *args], cwd=REPO, capture_output=True, check=True, timeout=60
    ).stdout
    return [p for p in out.decode().split('\0') if p]


def _text(path: Path) -> str | None:
    """The file's text, or None for a missing, binary or non-UTF-8 file."""
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return None
    if b'\0' in data[:8192]:
        return None
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError:
        return None


def _case_ids_in_docs() -> set[str]:
    return set(CASE_HEADING.findall((REPO / 'docs' / 'cases.md').read_text(encoding='utf-8')))


def test_no_tracked_file_cites_files_outside_the_repository():
    hits = []
    for rel in _git_files():
        text = _text(REPO / rel)
        if text is None:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            found = [pat for pat in FORBIDDEN if pat in line]
            if found:
                hits.append(f'{rel}:{lineno}: {", ".join(found)}: {line.strip()[:120]}')
    assert not hits, (
        'tracked files cite paths or files that are not in the repository '
        f'(use docs/cases.md, docs/method.md, docs/ros_conventions.md, docs/pip_ros_stack.md); '
        f'{len(hits)} hit(s):\n' + '\n'.join(hits)
    )


def test_every_cited_case_id_has_an_entry_in_docs_cases():
    documented = _case_ids_in_docs()
    assert documented, 'docs/cases.md has no "### Cnn" entries'
    missing: dict[str, list[str]] = {}
    files = _git_files(
        '--cached', '--others', '--exclude-standard', '--', 'test', 'depth3dseg_ros'
    )
    for rel in files:
        text = _text(REPO / rel)
        if text is None:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            ids = set(CASE_ID.findall(line)) | {f'C{n}' for n in CASE_TEST_NAME.findall(line)}
            for cid in ids - documented:
                missing.setdefault(cid, []).append(f'{rel}:{lineno}')
    assert not missing, 'case ids cited without an entry in docs/cases.md:\n' + '\n'.join(
        f'{cid}: {", ".join(where[:5])}{" …" if len(where) > 5 else ""}'
        for cid, where in sorted(missing.items())
    )


def test_relative_markdown_links_point_to_existing_files():
    pages = [REPO / 'README.md', *sorted((REPO / 'docs').glob('*.md'))]
    broken = []
    for page in pages:
        text = page.read_text(encoding='utf-8')
        text = INLINE_CODE.sub('', FENCE.sub('', text))
        for target in MD_LINK.findall(text):
            target = target.strip('<>')
            if re.match(r'^[a-zA-Z][a-zA-Z0-9+.-]*:', target) or target.startswith('#'):
                continue  # URL (http:, mailto:, …) or an anchor in the same page
            path = target.split('#', 1)[0]
            if not (page.parent / path).exists():
                broken.append(f'{page.relative_to(REPO)}: ({target})')
    assert not broken, 'relative links to missing files:\n' + '\n'.join(broken)
