r"""TensorFlow's XLA auto-clustering of the elementwise ops against plain graph mode: base_v2, float32.

    python bench/bench_auto_clustering.py                       # batch 8 training, batch-1 inference, 3 rounds
    python bench/bench_auto_clustering.py --train_batch_size=32 --rounds=2

Flags:
  --train_batch_size   training batch (8); --seq_length (128).
  --rounds             rounds (3); each runs both variants, in alternating order, each in a fresh process.
  --train_steps        timed training steps per process (4), after the first (compiling) one.
  --latency_calls      timed batch-1 calls per process (40).

With `TF_XLA_FLAGS="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_ops_to_cluster=FUSIBLE"` TensorFlow
lets XLA compile the graph's pointwise ops and reductions (LayerNorm, softmax, GELU, the adds; forward and
backward) into clusters while its own oneDNN kernels keep the matmuls. TensorFlow reads TF_XLA_FLAGS once per
process, so every measurement is a fresh process, one with those settings and one without, the same seeded
model and batch in both (bench_model.py's pretraining step: MLM + SOP, LAMB, clipping). Prints the
median step and call times over the rounds, their ratio, the first step's time (tracing and compiling
included) and the largest difference between the two variants' losses and batch-1 outputs.
"""

import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from absl import app, flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("train_batch_size", 8, "Training batch size.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("rounds", 3, "Rounds, each running both variants in fresh processes.")
flags.DEFINE_integer("train_steps", 4, "Timed training steps per process.")
flags.DEFINE_integer("latency_calls", 40, "Timed batch-1 calls per process.")
flags.DEFINE_enum("worker", None, ["plain", "clustering"], "Internal: measure one variant in this process.")


def measure():
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
    infer = bench_model.make_infer_step(side, False)
    output = np.asarray(infer(single))
    calls = []
    for _ in range(FLAGS.latency_calls):
        start = time.perf_counter()
        np.asarray(infer(single))
        calls.append(time.perf_counter() - start)
    step = bench_model.make_train_step(side, False)
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


CLUSTERING_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_ops_to_cluster=FUSIBLE"


def run_worker(variant):
    env = {k: v for k, v in os.environ.items() if k != "TF_XLA_FLAGS"}
    if variant == "clustering":
        env["TF_XLA_FLAGS"] = CLUSTERING_FLAGS
    args = [sys.executable, os.path.abspath(__file__), f"--worker={variant}",
            f"--train_batch_size={FLAGS.train_batch_size}", f"--seq_length={FLAGS.seq_length}",
            f"--train_steps={FLAGS.train_steps}", f"--latency_calls={FLAGS.latency_calls}"]
    result = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{variant} worker failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv):
    del argv
    if FLAGS.worker:
        print(json.dumps(measure()))
        return
    import bench_model  # pylint: disable=import-outside-toplevel

    model, have, _ = bench_model.cpu_description()
    print(f"{model} ({' '.join(have)}); base_v2, seq {FLAGS.seq_length}, training batch {FLAGS.train_batch_size}; "
          f"{FLAGS.rounds} rounds; load average before: {bench_model.load_average()}")
    results = {"plain": [], "clustering": []}
    for index in range(FLAGS.rounds):
        for variant in (("plain", "clustering") if index % 2 == 0 else ("clustering", "plain")):
            results[variant].append(run_worker(variant))
            figure = results[variant][-1]
            print(f"  round {index + 1} {variant:10s}: step {figure['step']:.3f} s, batch-1 call "
                  f"{1000 * figure['call']:.1f} ms, first step {figure['first_step']:.1f} s", flush=True)
    medians = {v: {k: statistics.median(r[k] for r in rs) for k in ("step", "call", "first_step")}
               for v, rs in results.items()}
    loss_gap = max(abs(a["loss"] - b["loss"]) for a, b in zip(results["plain"], results["clustering"]))
    output_gap = max(max(abs(x - y) for x, y in zip(a["output"], b["output"]))
                     for a, b in zip(results["plain"], results["clustering"]))
    plain, clustering = medians["plain"], medians["clustering"]
    print(f"training step: {plain['step']:.3f} s plain, {clustering['step']:.3f} s with auto-clustering: "
          f"x{plain['step'] / clustering['step']:.3f} faster (first step {plain['first_step']:.1f} against "
          f"{clustering['first_step']:.1f} s)")
    print(f"batch-1 inference: {1000 * plain['call']:.1f} ms plain, {1000 * clustering['call']:.1f} ms with "
          f"auto-clustering: x{plain['call'] / clustering['call']:.3f} faster")
    print(f"largest difference: loss {loss_gap:.2e}, batch-1 output {output_gap:.2e}; load average after: "
          f"{bench_model.load_average()}")


if __name__ == "__main__":
    app.run(main)
