"""pytest plugin of tools/mutate.py, loaded in its work folder as `-p mutate_plugin`; it changes no outcome.

With MUTATE_TARGET (the mutated module's absolute path) and MUTATE_COVER_OUT set, it records which lines of that
module each test ran, in pytest's own process and threads (subprocesses and AutoGraph's converted code are not
seen), and each test's duration; lines run outside any test (imports, collection) are recorded under "". With
MUTATE_FIRST (a JSON list of node ids) it runs those tests first, in that order, and the rest after in their
usual order: with `-x`, a mutant that a test running its line fails stops there instead of after every test
before it.
"""

import json
import os
import sys
import threading

import pytest

_TARGET = os.environ.get("MUTATE_TARGET")
_COVER_OUT = os.environ.get("MUTATE_COVER_OUT")
_FIRST = os.environ.get("MUTATE_FIRST")
_current = [""]
_lines = {}
_seconds = {}


def _trace(frame, event, arg):  # pylint: disable=unused-argument
    if frame.f_code.co_filename != _TARGET:
        return None
    _lines.setdefault(_current[0], set()).add(frame.f_lineno)
    return _trace_lines


def _trace_lines(frame, event, arg):  # pylint: disable=unused-argument
    if event == "line":
        _lines.setdefault(_current[0], set()).add(frame.f_lineno)
    return _trace_lines


def pytest_configure(config):  # pylint: disable=unused-argument
    if _COVER_OUT:
        threading.settrace(_trace)
        sys.settrace(_trace)


def pytest_collection_modifyitems(session, config, items):  # pylint: disable=unused-argument
    if _FIRST:
        with open(_FIRST, encoding="utf-8") as f:
            rank = {node: i for i, node in enumerate(json.load(f))}
        items.sort(key=lambda item: rank.get(item.nodeid, len(rank)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # pylint: disable=unused-argument
    _current[0] = item.nodeid
    yield
    _current[0] = ""


def pytest_runtest_logreport(report):
    _seconds[report.nodeid] = _seconds.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):  # pylint: disable=unused-argument
    if _COVER_OUT:
        sys.settrace(None)
        threading.settrace(None)
        with open(_COVER_OUT, "w", encoding="utf-8") as f:
            json.dump({"lines": {test: sorted(lines) for test, lines in _lines.items()}, "seconds": _seconds}, f)
