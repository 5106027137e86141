"""Runs a script of the original google-research/albert release under this project's TensorFlow (2.x).

    python -m bench.support.original_compat ORIGINAL_DIR/create_pretraining_data.py --input_file=... [flags]

The original's files are never part of this repository: pass the path of a checkout (the benchmark's
`--original_dir`). They were written for TF 1.15 and `tensorflow.compat.v1`; what they need that TF 2.x lacks is
provided here, for this process only, and nothing of theirs is changed:

* `tensorflow_hub`, imported at the top of the original's `tokenization.py` but used only by
  `FullTokenizer.from_hub_module` (which `create_pretraining_data.py` never calls), gets an empty stand-in module
  when it is not installed;
* a plain `import tensorflow` inside a file of the original's directory (the first releases' style, using
  `tf.gfile`, `tf.logging`, `tf.python_io`, `tf.flags`, `tf.app`) yields `tensorflow.compat.v1`; every other
  module imports TensorFlow unchanged. The newest release already imports `tensorflow.compat.v1` itself.

The script then runs as `__main__`, its top-level imports looked up in the original's directory first (for its
`import tokenization`), and the remaining arguments as its command line, exactly as `python
create_pretraining_data.py ...` would run it there.
"""

import builtins
import importlib.abc
import importlib.machinery
import importlib.util
import os
import runpy
import sys
import types


def _install_hub_stand_in():
    if importlib.util.find_spec("tensorflow_hub") is None:
        sys.modules["tensorflow_hub"] = types.ModuleType("tensorflow_hub")


def _install_v1_import(original_dir):
    """Makes `import tensorflow [as tf]` in the original's own files give `tensorflow.compat.v1`."""
    prefix = os.path.join(os.path.realpath(original_dir), "")
    plain_import = builtins.__import__

    def import_(name, globals=None, locals=None, fromlist=(), level=0):  # pylint: disable=redefined-builtin
        if name == "tensorflow" and not fromlist and level == 0 and globals:
            caller = globals.get("__file__") or ""
            if caller and os.path.realpath(caller).startswith(prefix):
                plain_import("tensorflow.compat.v1", globals, locals, ("v1",), 0)
                return sys.modules["tensorflow.compat.v1"]
        return plain_import(name, globals, locals, fromlist, level)

    builtins.__import__ = import_


class _OriginalFirst(importlib.abc.MetaPathFinder):
    """Finds top-level modules in the original's directory before anywhere else, as Python does for a script's
    own directory."""

    def __init__(self, directory):
        self.directory = directory

    def find_spec(self, name, path=None, target=None):  # pylint: disable=unused-argument
        return importlib.machinery.PathFinder.find_spec(name, [self.directory]) if path is None else None


def main(argv):
    if len(argv) < 2:
        raise SystemExit("usage: python -m bench.support.original_compat ORIGINAL_SCRIPT [flags...]")
    script = os.path.abspath(argv[1])
    if not os.path.isfile(script):
        raise SystemExit(f"original script not found: {script}")
    original_dir = os.path.dirname(script)
    _install_hub_stand_in()
    _install_v1_import(original_dir)
    sys.meta_path.insert(0, _OriginalFirst(original_dir))
    sys.argv = [script] + argv[2:]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main(sys.argv)
