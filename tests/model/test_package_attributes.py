"""`import albert_tf` alone gives the subpackages as attributes (the README's `albert_tf.model.set_remat`),
imported on first use: checked in a fresh interpreter, where no earlier import has set them."""

import json
import subprocess
import sys

import pytest

from tests.helpers import REPO, subprocess_env

SCRIPT = r"""
import json, sys
import albert_tf
out = {"keras_at_import": "keras" in sys.modules}
out["set_remat"] = callable(albert_tf.model.set_remat)
out["config"] = albert_tf.config.AlbertConfig.__name__
try:
    albert_tf.no_such_module
except AttributeError as err:
    out["missing"] = str(err)
print(json.dumps(out))
"""


@pytest.mark.slow
def test_subpackages_are_attributes_right_after_import():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=subprocess_env(), capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {"keras_at_import": False, "set_remat": True, "config": "AlbertConfig",
                   "missing": "module 'albert_tf' has no attribute 'no_such_module'"}
