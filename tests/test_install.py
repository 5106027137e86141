"""The documented install is complete: CI runs the README's own test command, every optional dependency the
requirements files name imports, and `pip check` finds nothing missing."""

import os
import re
import subprocess
import sys

import pytest

from tests.helpers import REPO

sys.path.insert(0, os.path.join(REPO, ".ci"))
from readme_command import readme_command  # noqa: E402  (.ci/ is not a package)

# What `pip install --no-deps -r requirements-beam.txt` knowingly leaves: apache-beam's caps, overridden to keep the
# core's protobuf 7 and pillow 13 (requirements-beam.txt says why).
ACCEPTED_CONFLICTS = ("apache-beam 2.77.0 has requirement pillow<13", "apache-beam 2.77.0 has requirement protobuf")


def _readme():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        return f.read()


def test_ci_runs_the_readme_test_command_in_a_fresh_venv():
    command = readme_command(_readme(), "tests")
    assert command.endswith("python3 -m pytest -q -n 2 tests")
    for requirements in ("requirements-test.txt", "requirements-hf.txt", "requirements-beam.txt"):
        assert requirements in command
    with open(os.path.join(REPO, ".ci", "run"), encoding="utf-8") as f:
        ci = f.read()
    assert "python3 -m venv" in ci and "--system-site-packages" not in ci
    assert "readme_command.py tests" in ci


def test_the_readme_command_reader_joins_continuations():
    text = "x\n```bash\n# Install it\na && \\\n  b\n\n# Run the tests (more\n# words)\nc \\\n  && d\ne\n```\n"
    assert readme_command(text, "main") == "a && b"
    assert readme_command(text, "tests") == "c && d"


def _requirement_names(path):
    names = []
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        for line in f:
            line = line.split("#")[0].strip()
            if line and not line.startswith("-"):
                names.append(re.split(r"[=<>\[ ]", line)[0])
    return names


@pytest.mark.slow
@pytest.mark.parametrize("module", ["apache_beam", "torch", "transformers", "scipy.stats", "pysbd"])
def test_every_optional_dependency_imports(module):
    """Each in a fresh interpreter, as a user's first import would be (Beam needs dateutil, cryptography, ...)."""
    imported = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True,
                              check=False, timeout=300)
    assert imported.returncode == 0, imported.stderr[-2000:]


def test_pip_check_finds_nothing_missing():
    ours = {name.lower().replace("_", "-") for path in ("requirements.txt", "requirements-test.txt",
                                                       "requirements-hf.txt", "requirements-beam.txt")
            for name in _requirement_names(path)}
    checked = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, check=False,
                             timeout=300)
    problems = [line for line in checked.stdout.splitlines()
                if line.split(" ")[0].lower().replace("_", "-") in ours and not line.startswith(ACCEPTED_CONFLICTS)]
    assert not problems, "\n".join(problems)

