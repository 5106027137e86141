"""`bench/original_compat.py`, which runs the original release's TF 1 scripts for the pretraining-data benchmark:
TF 1 names inside the original's directory only, a stand-in `tensorflow_hub`, the script's own command line."""

import os
import subprocess
import sys

from tests.helpers import REPO

SCRIPT = '''
import sys
import tensorflow as tf          # the first releases' style: TF 1 names expected
import tensorflow_hub as hub     # imported by the original's tokenization.py, never used by its data script
import helper                    # a module next to the script, as the original's `import tokenization`
import outside                   # a module elsewhere on the path

flags = tf.flags
flags.DEFINE_string("name", None, "a flag")
FLAGS = flags.FLAGS


def main(_):
    tf.logging.info("running")
    print("gfile", tf.gfile.Exists(sys.argv[0]), "writer", tf.python_io.TFRecordWriter.__name__)
    print("flag", FLAGS.name, "helper", helper.VALUE, "hub", hub.__name__)
    print("helper sees TF 1:", helper.SEES_TF1, "outside sees TF 1:", outside.SEES_TF1)


if __name__ == "__main__":
    tf.app.run()
'''

HELPER = '''
import tensorflow as tf

VALUE = 7
SEES_TF1 = hasattr(tf, "gfile")
'''

OUTSIDE = '''
import tensorflow as tf

SEES_TF1 = hasattr(tf, "gfile")
'''


def test_runs_a_tf1_script_from_its_directory(tmp_path):
    original = tmp_path / "albert"
    original.mkdir()
    (original / "create_pretraining_data.py").write_text(SCRIPT, encoding="utf-8")
    (original / "helper.py").write_text(HELPER, encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "outside.py").write_text(OUTSIDE, encoding="utf-8")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(elsewhere)}
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "bench", "original_compat.py"),
         str(original / "create_pretraining_data.py"), "--name=x"],
        capture_output=True, text=True, check=False, timeout=300, env=env, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert "gfile True writer TFRecordWriter" in lines
    assert "flag x helper 7 hub tensorflow_hub" in lines
    assert "helper sees TF 1: True outside sees TF 1: False" in lines  # only the original's files
