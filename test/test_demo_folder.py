"""depth3dseg-demo's output folder (issue 54): a fresh folder per run. What an earlier run wrote
is cleared (before: 19 overlays of two runs beside a report of 10 frames); a non-empty folder the
demo did not make, or one holding other files, is refused with one line and nothing deleted."""

from depth3dseg_ros.node.demo_out import MARKER, prepare_out


def _tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob('*'))


def test_new_folder_is_made_with_the_marker(tmp_path):
    out = tmp_path / 'a' / 'demo_out'
    assert prepare_out(out) is None
    assert _tree(out) == [MARKER]


def test_empty_folder_is_taken(tmp_path):
    assert prepare_out(tmp_path) is None and _tree(tmp_path) == [MARKER]


def test_a_demo_folder_is_cleared_of_the_last_run(tmp_path):
    out = tmp_path / 'demo_out'
    assert prepare_out(out) is None
    for rel in ('overlay/1.png', 'overlay/2.png', 'panels/1.png', 'synthetic_bag/x.db3'):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(b'old')
    for name in ('report.md', 'report.json', 'figures.json', 'index.html', 'node.log'):
        (out / name).write_text('old')
    assert prepare_out(out) is None
    assert _tree(out) == [MARKER]


def test_a_folder_the_demo_did_not_make_is_refused_untouched(tmp_path):
    out = tmp_path / 'mine'
    out.mkdir()
    (out / 'thesis.tex').write_text('keep')
    (out / 'overlay').mkdir()
    why = prepare_out(out)
    assert why.startswith(f'--out {out} is not empty and was not made by depth3dseg-demo')
    assert MARKER in why and 'overlay' in why and '\n' not in why
    assert _tree(out) == ['overlay', 'thesis.tex']


def test_other_files_in_a_demo_folder_are_refused_untouched(tmp_path):
    out = tmp_path / 'demo_out'
    assert prepare_out(out) is None
    (out / 'report.md').write_text('old')
    (out / 'notes.txt').write_text('keep')
    why = prepare_out(out)
    assert 'notes.txt' in why and 'did not write' in why and '\n' not in why
    assert _tree(out) == [MARKER, 'notes.txt', 'report.md']


def test_a_file_is_refused(tmp_path):
    f = tmp_path / 'out'
    f.write_text('x')
    assert prepare_out(f) == f'--out {f} is a file, not a folder' and f.read_text() == 'x'
