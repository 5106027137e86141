"""`bench/bench_xla.py`'s reading of what XLA compiled: the library fusions it counts are those a real XLA dump
holds (a YNNPACK dot fusion appears with the flag that asks for it and not without), a failed variant is reported
by the line that says why, and an unknown variant is refused in one line."""

import subprocess
import sys

import pytest

from tests.helpers import REPO, bench_script, run_script, subprocess_env

JIT_MATMUL = """
import tensorflow as tf

@tf.function(jit_compile=True)
def dense(x, w):
    return tf.nn.relu(tf.matmul(x, w) + 1.0)

print(float(dense(tf.ones((64, 96)), tf.ones((96, 80)))[0, 0]))
"""


@pytest.fixture(scope="module")
def bench_xla():
    return bench_script("bench_xla")


def xla_dump(tmp_path, name, xla_flags):
    dump_dir = tmp_path / name
    result = subprocess.run([sys.executable, "-c", JIT_MATMUL], cwd=REPO, capture_output=True, text=True,
                            env=subprocess_env(XLA_FLAGS=f"{xla_flags} --xla_dump_to={dump_dir}".strip()),
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "97.0"
    return str(dump_dir)


def test_library_dot_fusions_are_counted_from_a_real_dump(bench_xla, tmp_path):
    plain = bench_xla.compiled_hlo_counts(xla_dump(tmp_path, "plain", ""))
    ynn = bench_xla.compiled_hlo_counts(xla_dump(tmp_path, "ynn", bench_xla.VARIANTS["xla_ynnpack_dot"][2]))
    assert plain["modules"] == ynn["modules"] == 1
    assert sum(dots for _, dots in plain["library"].values()) == 0
    assert ynn["library"]["ynn"][1] == 1
    assert bench_xla.describe_library(ynn["library"]).startswith("ynn ")
    assert bench_xla.describe_library({}) == "none"


def test_failure_reason_is_the_line_that_says_why(bench_xla):
    crashed = ("I0000 port.cc:153] oneDNN custom operations are on.\npartition compile failedFatal Python error: "
               "Illegal instruction\n\nThread 0x00007f (most recent call first):\n  File \"bench_xla.py\", line 94\n")
    assert bench_xla.failure_reason(crashed) == "Fatal Python error: Illegal instruction"
    raised = ("Traceback (most recent call last):\n  File \"x.py\", line 1\n"
              "tensorflow.python.framework.errors_impl.InternalError: could not compile\n")
    assert bench_xla.failure_reason(raised) == \
        "tensorflow.python.framework.errors_impl.InternalError: could not compile"
    assert bench_xla.failure_reason("") == "no output"


def test_unknown_variant_is_refused_in_one_line():
    result = run_script("bench/bench_xla.py", ["--variants=graph,xla_fast"], timeout=120)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "--variants: unknown xla_fast; known: graph, auto_clustering, xla, xla_onednn, xla_xnnpack, "
        "xla_ynnpack_dot, xla_ynnpack")
