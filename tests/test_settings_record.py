"""A run's settings record (albert_tf/settings_record.py): what it holds and how it reads back; where the guard
writes it is tests/test_guard.py's, and each script's, tests/text/test_vocab.py's chain."""

import importlib.metadata
import json
import math
import sys
import types

import pytest

from albert_tf import settings_record
from albert_tf.errors import RunError


def test_values_become_what_json_holds():
    assert settings_record.plain((1, [2.5, (3,)])) == [1, [2.5, [3]]]
    assert settings_record.plain(math.nan) is None and settings_record.plain([math.nan]) == [None]
    assert settings_record.plain("x") == "x" and settings_record.plain(None) is None


def test_versions_are_those_running_else_those_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", types.SimpleNamespace(__version__="9.9.9"))
    assert settings_record.versions()["tensorflow"] == "9.9.9"  # the module this process runs
    installed = {"tensorflow-cpu": "2.0.1", "keras": "3.0.2"}

    def version(name):
        if name not in installed:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(importlib.metadata, "version", version)
    monkeypatch.delitem(sys.modules, "tensorflow")
    monkeypatch.delitem(sys.modules, "keras", raising=False)
    got = settings_record.versions()  # not imported: the first distribution installed of each
    assert got["tensorflow"] == "2.0.1" and got["keras"] == "3.0.2" and got["albert_tf"]
    installed.clear()
    assert settings_record.versions()["tensorflow"] is None


def test_a_record_reads_back_and_a_damaged_one_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["run.py", "--rate=0.5"])
    path = tmp_path / "out.settings.json"
    assert settings_record.read_settings(str(path), "--output_file out") is None
    settings_record.write_record(str(path), {"rate": 0.5, "shape": (2, 3)})
    assert settings_record.read_settings(str(path), "--output_file out") == {"rate": 0.5, "shape": [2, 3]}
    assert json.loads(path.read_text())["command"] == ["run.py", "--rate=0.5"]
    settings_record.write_record(str(path), {}, command=["other.py"])
    assert json.loads(path.read_text())["command"] == ["other.py"]
    path.write_text("{not json")
    with pytest.raises(RunError, match=r"^--output_file out: out.settings.json cannot be read \(.*\); move it away"):
        settings_record.read_settings(str(path), "--output_file out")
