"""depth3dseg-replay's BAG argument, checked before anything starts (issue 54: an empty path, the
README's ``"$(python -m depth3dseg_ros.samples bag)"`` offline, was searched as the current
directory: "bag directory '.' has no metadata.yaml, and bag file 'Makefile': unknown format")."""

import pytest

from depth3dseg_ros.bags.replay import bag_argument_problem


@pytest.mark.parametrize('bag', ['', ' ', '\n'])
def test_empty_bag_argument_refused_naming_the_argument(bag):
    problem = bag_argument_problem(bag)
    assert problem.startswith(f'argument BAG is empty ({bag!r})') and '\n' not in problem
    assert 'Makefile' not in problem and "'.'" not in problem


def test_missing_bag_refused_and_an_existing_one_accepted(tmp_path):
    assert bag_argument_problem(str(tmp_path / 'none')) == (
        f"argument BAG: bag '{tmp_path / 'none'}' not found"
    )
    assert bag_argument_problem(str(tmp_path)) is None  # exists: the reader decides what it is
