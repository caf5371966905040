"""The bracket-depth scan that the limits middleware runs on every JSON body before auth (issue 40, HIGH 1).

It runs on the event loop, so its cost must be linear in the body whatever the body holds: the regex it used
before restarted at every quote of an unterminated string of escaped quotes, and 31 KiB held one core (and
every other request) for 2.6 s."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelbench.service.ingest import json_depth

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.sampled_from('ab"\\[]{}\n\u00e9')),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_the_depth_is_the_nesting_of_the_value_whatever_its_strings_hold(value):
    text = json.dumps(value)
    assert json_depth(text) == _depth(value)
    assert json_depth(text.encode()) == _depth(value)


def test_escaped_backslashes_and_quotes_next_to_brackets():
    assert json_depth(r'["\\", ["\\\"]"]]') == 2
    assert json_depth(r'{"a\\\\": [[["\"[[["]]]}') == 4
    assert json_depth(r'"\\\\\\\"{{{"') == 0


def test_an_unterminated_string_of_escaped_quotes_is_scanned_in_linear_time():
    # 2 MiB of the body that took 2.6 s at 31 KiB: quadratic, that is hours; linear, milliseconds. The
    # bound (20 s, including a Python start) is far above what the linear scan needs, so a loaded machine
    # cannot fail it. A child process, because a regex holds the GIL: a thread could not time it out.
    code = (
        "from accelbench.service.ingest import json_depth; print(json_depth(b'[\"' + b'\\\\\"' * (1 << 20)))"
    )
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("json_depth is not linear on an unterminated string of escaped quotes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1"]
