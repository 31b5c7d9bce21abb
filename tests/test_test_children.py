"""What the suite's own machinery promises its tests: a child that says something else than ``ready`` fails its
test at once instead of hanging it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from storage.helpers import wait_until_ready


def test_a_child_that_is_not_ready_fails_its_test_at_once_with_what_it_wrote():
    child = subprocess.Popen([sys.executable, "-c", "import sys, time; print('why', file=sys.stderr, flush=True); "
                              "print('oops', flush=True); time.sleep(600)"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with pytest.raises(AssertionError, match=r"(?s)'oops\\n' instead of 'ready'.*why"):
        wait_until_ready(child)
    assert child.poll() is not None  # killed, not left waiting

