r"""Activation recomputation (`--remat`): peak memory and step time with and without it, in fresh processes.

    python bench/bench_remat.py                          # large_v2, batch 8, seq 512: ~6-10 min on 2 cores
    python bench/bench_remat.py --preset=base_v2 --batch_size=8 --seq_length=128 --steps=2
    python bench/bench_remat.py --preset=base_v2 --batch_size=1 --seq_length=16 --output_json=/tmp/remat.json  # smoke

Flags:
  --preset           AlbertConfig preset (large_v2).
  --batch_size       examples per step (8).
  --seq_length       sequence length (512).
  --num_predictions  masked-LM positions per example (20).
  --steps            timed training steps after one warm-up step (1); the median is reported.
  --jit_compile      compile the step with XLA (false: the scripts' default).
  --output_json      where the figures go, with the command and machine (bench/results/bench_remat.json).

Each setting (remat off, then on) runs in its own fresh Python process, so one's memory cannot hide in the
other's; a process builds the model run_pretraining.py trains (`TrainablePretraining`, its last layer where the heads
read it), compiled as the runner compiles it with LAMB, runs its training step (forward, backward, global-norm
clipping, LAMB: `train_on_batch` on random MLM + SOP features) once to warm up and --steps more timed, and
reports its peak resident set size (`resource.getrusage`, the kernel's high-water mark of the whole process:
TensorFlow itself, weights, optimizer slots, activations) and the RSS just before the first step (everything but
the step's own memory). The peak minus that baseline is the memory the step itself needs, mostly activations kept
for the backward pass.
"""

import json
import os
import resource
import statistics
import subprocess
import sys
import time

import common  # first: the environment and sys.path every bench script needs

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "large_v2", "AlbertConfig preset.")
flags.DEFINE_integer("batch_size", 8, "Examples per step.")
flags.DEFINE_integer("seq_length", 512, "Sequence length.")
flags.DEFINE_integer("num_predictions", 20, "Masked-LM positions per example.")
flags.DEFINE_integer("steps", 1, "Timed steps after the warm-up step.")
flags.DEFINE_bool("jit_compile", False, "Compile the step with XLA.")
flags.DEFINE_string("output_json", None, "Where the figures go (default: bench/results/bench_remat.json).")
flags.DEFINE_bool("child_remat", None, "(internal) run one setting in this process and print its JSON.")


def _rss_mb():
    with open("/proc/self/statm", encoding="utf-8") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def random_features(config, batch_size, seq_length, num_predictions, seed=0):
    """One batch of pretraining features, as the records give them, with random ids and labels."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    rng = np.random.RandomState(seed)
    positions = np.stack([np.sort(rng.choice(np.arange(1, seq_length), num_predictions, replace=False))
                          for _ in range(batch_size)])
    segments = np.zeros((batch_size, seq_length), "int32")
    segments[:, seq_length // 2:] = 1
    return {"input_ids": rng.randint(5, config.vocab_size, (batch_size, seq_length)).astype("int32"),
            "input_mask": np.ones((batch_size, seq_length), "int32"), "segment_ids": segments,
            "masked_lm_positions": positions.astype("int32"),
            "masked_lm_ids": rng.randint(0, config.vocab_size, (batch_size, num_predictions)).astype("int32"),
            "masked_lm_weights": np.ones((batch_size, num_predictions), "float32"),
            "next_sentence_labels": rng.randint(0, 2, (batch_size, 1)).astype("int32")}


def run_one(remat):
    """One setting in this process: {"remat", "baseline_mb", "peak_mb", "step_seconds", "first_step_seconds"}."""
    # pylint: disable=import-outside-toplevel
    from albert_tf.config import AlbertConfig
    from albert_tf.model import dummy_inputs, set_heads_only, set_remat
    from albert_tf.tasks.pretraining import TrainablePretraining
    from albert_tf.train.optimization import create_optimizer

    config = AlbertConfig.preset(FLAGS.preset)
    model = set_heads_only(TrainablePretraining(config))  # as the runner builds and compiles it
    model(dummy_inputs(num_predictions=1), training=False)
    set_remat(model, remat)
    model.compile(optimizer=create_optimizer("lamb", 1e-4, 1000, 10), jit_compile=FLAGS.jit_compile)
    model.optimizer.build(model.trainable_variables)
    batch = random_features(config, FLAGS.batch_size, FLAGS.seq_length, FLAGS.num_predictions)
    baseline = _rss_mb()
    start = time.perf_counter()
    model.train_on_batch(batch)
    first = time.perf_counter() - start
    times = common.time_calls(lambda: model.train_on_batch(batch), FLAGS.steps)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"remat": remat, "baseline_mb": baseline, "peak_mb": peak, "step_seconds": statistics.median(times),
            "first_step_seconds": first}


def main(argv):
    del argv
    if FLAGS.child_remat is not None:
        print("RESULT " + json.dumps(run_one(FLAGS.child_remat)))
        return
    model, have = common.cpu_description()
    print(f"{os.cpu_count()} CPU cores: {model}; flags {' '.join(have)}")
    print(f"{FLAGS.preset}, batch {FLAGS.batch_size}, seq {FLAGS.seq_length}, {FLAGS.num_predictions} MLM positions, "
          f"jit_compile={FLAGS.jit_compile}; one warm-up step, then {FLAGS.steps} timed")
    load_before = common.load_average()
    print(f"load average before: {load_before}")
    results = {}
    for remat in (False, True):
        args = [sys.executable, os.path.abspath(__file__), f"--child_remat={remat}", f"--preset={FLAGS.preset}",
                f"--batch_size={FLAGS.batch_size}", f"--seq_length={FLAGS.seq_length}",
                f"--num_predictions={FLAGS.num_predictions}", f"--steps={FLAGS.steps}",
                f"--jit_compile={FLAGS.jit_compile}"]
        proc = subprocess.run(args, capture_output=True, text=True, check=False)
        lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
        if proc.returncode or not lines:
            print(f"remat={remat}: the process failed (exit {proc.returncode}; -9 is the kernel's OOM killer)")
            print(proc.stderr[-2000:])
            results[remat] = None
            continue
        results[remat] = json.loads(lines[0][len("RESULT "):])
    print(f"load average after: {common.load_average()}")
    print()
    print(f"{'remat':6s} {'peak RSS MB':>12s} {'before step MB':>15s} {'step MB':>9s} {'s/step':>8s} {'first step s':>13s}")
    for remat, r in results.items():
        if r:
            print(f"{remat!s:6s} {r['peak_mb']:12.0f} {r['baseline_mb']:15.0f} {r['peak_mb'] - r['baseline_mb']:9.0f} "
                  f"{r['step_seconds']:8.2f} {r['first_step_seconds']:13.1f}")
    off, on = results.get(False), results.get(True)
    if off and on:
        print()
        print(f"with --remat: peak RSS /{off['peak_mb'] / on['peak_mb']:.2f}, step memory (peak - before) "
              f"/{(off['peak_mb'] - off['baseline_mb']) / (on['peak_mb'] - on['baseline_mb']):.2f}, step time "
              f"x{on['step_seconds'] / off['step_seconds']:.3f}")
    common.write_result({"load_average_before": load_before, "remat_off": off, "remat_on": on}, FLAGS.output_json)


if __name__ == "__main__":
    app.run(main)
