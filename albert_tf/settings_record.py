"""A run's settings record: one readable JSON file holding every setting of the run by flag name (defaults
included), the versions of TensorFlow, Keras and albert_tf, and the command line, so that what made an output can
be read back from it (as Model Garden's params.yaml).

Where it lies is one rule, by the role of the output it belongs to: `settings.json` inside a folder the run writes
into (a training run's `--output_dir`, the record shards' `--output_dir`), else `<output>.settings.json` beside the
file, prefix or folder written whole (`vocab.model` -> `vocab.settings.json` for a `--model_prefix` `vocab`,
`predictions.jsonl.settings.json`, `export.settings.json` beside the export folder `export`). Which output of a
script holds it is declared (`setting(records=True)`); `albert_tf.guard` writes it when the run has succeeded, so
a failed run leaves none. A training run records its own at its start (`albert_tf.train.run_settings`), because
its resume is checked against it. An input glob never reads a record (`fileio.expand_globs`).
"""

import importlib.metadata
import json
import math
import os
import sys

from albert_tf import fileio
from albert_tf.errors import RunError

SETTINGS_JSON = fileio.SETTINGS_RECORD


def record_path(role, value):
    """The record's path for an output of `role` (an `albert_tf.settings.OUTPUT_ROLES` name) named `value`; for a
    list of files (`output_files`), beside the first."""
    if role == "output_files":
        value = (value if isinstance(value, (list, tuple)) else str(value).split(","))[0]
    value = str(value) if fileio.is_remote(value) else os.path.abspath(value)  # a local "." or "out/" named
    if role == "output_dir":
        return os.path.join(value, SETTINGS_JSON)
    return value.rstrip("/") + fileio.SETTINGS_RECORD_SUFFIX


def plain(value):
    """`value` as JSON holds it: a tuple as a list, NaN as null."""
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _version(module, distributions):
    loaded = sys.modules.get(module)  # the version running, where it is imported; else the installed one's
    if loaded is not None and getattr(loaded, "__version__", None):
        return loaded.__version__
    for distribution in distributions:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def versions():
    """{"albert_tf", "tensorflow", "keras": version}, without importing TensorFlow where a run did not."""
    from albert_tf import __version__  # pylint: disable=import-outside-toplevel

    return {"albert_tf": __version__,
            "tensorflow": _version("tensorflow", ("tensorflow", "tensorflow-cpu", "tf-nightly")),
            "keras": _version("keras", ("keras", "keras-nightly"))}


def write_record(path, settings, command=None):
    """Writes the record of a run with `settings` ({flag name: value}) to `path`, atomically; `command`: its
    command line (default `sys.argv`)."""
    record = {"settings": {name: plain(value) for name, value in settings.items()}, "versions": versions(),
              "command": list(sys.argv if command is None else command)}
    fileio.write_text(path, json.dumps(record, indent=2) + "\n")


def read_settings(path, what):
    """The settings ({flag name: value}) of the record at `path`, or None where there is none; `RunError` naming
    `what` (the flag and value of its output) when it cannot be read."""
    if not fileio.exists(path):
        return None
    try:
        return json.loads(fileio.read_text(path))["settings"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise RunError(f"{what}: {os.path.basename(path)} cannot be read ({err}); move it away to resume without "
                       "the check") from None
