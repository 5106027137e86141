r"""Every way TensorFlow 2.21 lets XLA compile the model on this CPU, against graph mode: base_v2, float32.

    python bench/bench_xla.py                                   # every variant, 3 rounds (~15 min on 2 cores)
    python bench/bench_xla.py --variants=graph,auto_clustering  # XLA's auto-clustering of the elementwise ops
    python bench/bench_xla.py --variants=graph,xla,xla_ynnpack --train_batch_size=32 --rounds=2

Flags:
  --variants           which of the variants below to measure (all); `graph` is the reference of every ratio.
  --train_batch_size   training batch (8); --seq_length (128).
  --rounds             rounds (3); each runs every variant, in a rotating order, each in a fresh process.
  --train_steps        timed training steps per process (4), after the first (tracing, compiling) one.
  --latency_calls      timed batch-1 calls per process (40).

The variants:
  graph             `tf.function`: TensorFlow's own kernels (oneDNN), what the scripts run by default.
  auto_clustering   graph mode with `TF_XLA_FLAGS="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit
                    --tf_xla_ops_to_cluster=FUSIBLE"`: XLA compiles the pointwise ops and reductions (LayerNorm,
                    softmax, GELU, the adds; forward and backward) into clusters, oneDNN keeps the matmuls.
  xla               `tf.function(jit_compile=True)` (the scripts' `--jit_compile`): XLA compiles everything, its
                    dots run as XLA's own (Eigen) matmuls.
  xla_onednn        xla with `XLA_FLAGS="--xla_cpu_use_onednn=true --xla_cpu_experimental_onednn_fusion_type=dot"`,
                    XLA's switches for running its dots (and their fused ops) as oneDNN calls.
  xla_xnnpack       xla with `XLA_FLAGS="--xla_cpu_experimental_xnn_fusion_type=dot,eltwise,reduce"`: XNNPACK.
  xla_ynnpack_dot   xla with `XLA_FLAGS="--xla_cpu_experimental_ynn_fusion_type=dot"`: YNNPACK for the dots.
  xla_ynnpack       xla with `XLA_FLAGS="--xla_cpu_experimental_ynn_fusion_type=dot,eltwise,reduce"`.

TensorFlow and XLA read these flags once per process, so every measurement is a fresh process with its own
environment, the same seeded model and batch in each (bench_model.py's pretraining step: MLM + SOP, LAMB,
global-norm clipping; and the encoder's batch-1 forward). Every process also has XLA dump the HLO it compiled
(`--xla_dump_to`, a temporary directory), which tells whether a flag took effect: the count of XLA modules
compiled, and of the library fusions in them by library (`kind=kCustom` fusions: YNNPACK, XNNPACK or oneDNN calls),
with how many of them hold a dot. A variant whose process fails (a flag XLA cannot compile the model with) is
reported as failed, with the line saying why, and not run again.

Prints each round, then per variant the median training step and batch-1 call over the rounds and their ratio
to graph mode, the first step's time (tracing and compiling included), those counts, and the largest difference
from graph mode's loss and batch-1 output.
"""

import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from absl import app, flags  # noqa: E402

AUTO_CLUSTERING = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_ops_to_cluster=FUSIBLE"
# name: (jit_compile, TF_XLA_FLAGS, XLA_FLAGS)
VARIANTS = {
    "graph": (False, "", ""),
    "auto_clustering": (False, AUTO_CLUSTERING, ""),
    "xla": (True, "", ""),
    "xla_onednn": (True, "", "--xla_cpu_use_onednn=true --xla_cpu_experimental_onednn_fusion_type=dot"),
    "xla_xnnpack": (True, "", "--xla_cpu_experimental_xnn_fusion_type=dot,eltwise,reduce"),
    "xla_ynnpack_dot": (True, "", "--xla_cpu_experimental_ynn_fusion_type=dot"),
    "xla_ynnpack": (True, "", "--xla_cpu_experimental_ynn_fusion_type=dot,eltwise,reduce"),
}

FLAGS = flags.FLAGS
flags.DEFINE_list("variants", list(VARIANTS), "Variants to measure; graph is always measured, as the reference.")
flags.DEFINE_integer("train_batch_size", 8, "Training batch size.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("rounds", 3, "Rounds, each running every variant in fresh processes.")
flags.DEFINE_integer("train_steps", 4, "Timed training steps per process.")
flags.DEFINE_integer("latency_calls", 40, "Timed batch-1 calls per process.")
flags.DEFINE_enum("worker", None, list(VARIANTS), "Internal: measure one variant in this process.")


def measure(jit_compile):
    """One variant in this process: {first_step, step (median), call (median), loss, output}."""
    import bench_model  # pylint: disable=import-outside-toplevel
    import keras  # pylint: disable=import-outside-toplevel
    import numpy as np  # pylint: disable=import-outside-toplevel

    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel

    keras.utils.set_random_seed(0)
    config = AlbertConfig.preset("base_v2")
    side = bench_model.Ours(config)
    batch = bench_model.make_batch(config, FLAGS.train_batch_size, FLAGS.seq_length, 20)
    single = bench_model.make_batch(config, 1, FLAGS.seq_length, 20)
    infer = bench_model.make_infer_step(side, jit_compile)
    output = np.asarray(infer(single))
    calls = []
    for _ in range(FLAGS.latency_calls):
        start = time.perf_counter()
        np.asarray(infer(single))
        calls.append(time.perf_counter() - start)
    step = bench_model.make_train_step(side, jit_compile)
    start = time.perf_counter()
    loss = float(step(batch))
    first = time.perf_counter() - start
    steps = []
    for _ in range(FLAGS.train_steps):
        start = time.perf_counter()
        float(step(batch))
        steps.append(time.perf_counter() - start)
    return {"first_step": first, "step": statistics.median(steps), "call": statistics.median(calls), "loss": loss,
            "output": output.ravel()[:4096].tolist()}


def compiled_hlo_counts(dump_dir):
    """What XLA compiled, from an `--xla_dump_to` directory: {"modules": how many, "library": {library: [fusions,
    fusions holding a dot]}}, a library fusion being a `kind=kCustom` fusion, named by its `fusion_config` kind
    (`__ynn_fusion`, `__xnn_fusion`, `__onednn_fusion`, ...)."""
    modules = glob.glob(os.path.join(dump_dir, "*after_optimizations.txt"))
    library = {}
    for path in modules:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        bodies = dict(re.findall(r"^%(\S+) \(.*?\n(.*?)^}", text, flags=re.M | re.S))
        for line in re.findall(r"^.*kind=kCustom.*$", text, flags=re.M):
            kind = re.search(r'"fusion_config":\{"kind":"_*([a-z]+)', line)
            callee = re.search(r"calls=%([\w.\-]+)", line)
            counts = library.setdefault(kind.group(1) if kind else "other", [0, 0])
            counts[0] += 1
            counts[1] += bool(callee and " dot(" in bodies.get(callee.group(1), ""))
    return {"modules": len(modules), "library": library}


def describe_library(library):
    """'ynn 48 (0 with a dot)', or 'none'."""
    return ", ".join(f"{name} {n} ({dots} with a dot)" for name, (n, dots) in sorted(library.items())) or "none"


def failure_reason(stderr):
    """The line of a failed worker's stderr that says why (a fatal signal or the exception)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for pattern in (r"Fatal Python error: .*", r"^[\w.]*(Error|Exception): .*"):
        for line in reversed(lines):
            found = re.search(pattern, line)
            if found:
                return found.group(0)
    return lines[-1] if lines else "no output"


def run_worker(variant):
    """Measures `variant` in a fresh process with its flags; adds the counts of what XLA compiled there. A process
    that fails gives {"failed": why}, and the benchmark goes on with the other variants."""
    _, tf_xla_flags, xla_flags = VARIANTS[variant]
    dump_dir = tempfile.mkdtemp(prefix="bench_xla_")
    env = {k: v for k, v in os.environ.items() if k not in ("TF_XLA_FLAGS", "XLA_FLAGS")}
    env["XLA_FLAGS"] = f"{xla_flags} --xla_dump_to={dump_dir}".strip()
    if tf_xla_flags:
        env["TF_XLA_FLAGS"] = tf_xla_flags
    args = [sys.executable, os.path.abspath(__file__), f"--worker={variant}",
            f"--train_batch_size={FLAGS.train_batch_size}", f"--seq_length={FLAGS.seq_length}",
            f"--train_steps={FLAGS.train_steps}", f"--latency_calls={FLAGS.latency_calls}"]
    try:
        result = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            return {"failed": f"exit {result.returncode}: {failure_reason(result.stderr)}"}
        figures = json.loads(result.stdout.strip().splitlines()[-1])
        figures.update(compiled_hlo_counts(dump_dir))
    finally:
        shutil.rmtree(dump_dir, ignore_errors=True)
    return figures


def main(argv):
    del argv
    if FLAGS.worker:
        print(json.dumps(measure(VARIANTS[FLAGS.worker][0])))
        return
    unknown = [v for v in FLAGS.variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: unknown {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    import bench_model  # pylint: disable=import-outside-toplevel

    variants = ["graph"] + [v for v in FLAGS.variants if v != "graph"]
    model, have, _ = bench_model.cpu_description()
    print(f"{model} ({' '.join(have)}); base_v2, seq {FLAGS.seq_length}, training batch {FLAGS.train_batch_size}; "
          f"{FLAGS.rounds} rounds; load average before: {bench_model.load_average()}")
    results, failed = {v: [] for v in variants}, {}
    for index in range(FLAGS.rounds):
        shift = index % len(variants)
        for variant in variants[shift:] + variants[:shift]:
            if variant in failed:
                continue
            figure = run_worker(variant)
            if "failed" in figure:
                if variant == "graph":
                    raise SystemExit(f"graph mode failed: {figure['failed']}")
                failed[variant] = figure["failed"]
                print(f"  round {index + 1} {variant:16s}: failed ({figure['failed']}); not run again", flush=True)
                continue
            results[variant].append(figure)
            print(f"  round {index + 1} {variant:16s}: step {figure['step']:.3f} s, batch-1 call "
                  f"{1000 * figure['call']:.1f} ms, first step {figure['first_step']:.1f} s, "
                  f"{figure['modules']} XLA modules, library fusions: {describe_library(figure['library'])}",
                  flush=True)
    graph = {k: statistics.median(r[k] for r in results["graph"]) for k in ("step", "call")}
    print(f"medians over {FLAGS.rounds} rounds; x graph = graph mode's time over the variant's (above 1: faster); "
          f"differences from graph mode in the same round")
    for variant in variants:
        if variant in failed:
            print(f"{variant:16s}: failed ({failed[variant]})")
            continue
        rows = results[variant]
        median = {k: statistics.median(r[k] for r in rows) for k in ("step", "call", "first_step")}
        loss_gap = max(abs(a["loss"] - b["loss"]) for a, b in zip(rows, results["graph"]))
        output_gap = max(max(abs(x - y) for x, y in zip(a["output"], b["output"]))
                         for a, b in zip(rows, results["graph"]))
        print(f"{variant:16s}: step {median['step']:.3f} s (x{graph['step'] / median['step']:.3f}), batch-1 "
              f"{1000 * median['call']:.1f} ms (x{graph['call'] / median['call']:.3f}), first step "
              f"{median['first_step']:.1f} s, {rows[0]['modules']} XLA modules, library fusions: "
              f"{describe_library(rows[0]['library'])}; loss within {loss_gap:.1e}, "
              f"batch-1 output within {output_gap:.1e}")
    print(f"load average after: {bench_model.load_average()}")


if __name__ == "__main__":
    app.run(main)
