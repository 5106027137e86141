r"""What preparing the shared block's weights once per forward saves at batch 1, against once per layer.

    python bench/bench_inference_weights.py                      # float32 and mixed_bfloat16, 300 calls each

Flags:
  --policies   Keras dtype policies to measure (float32,mixed_bfloat16).
  --calls      timed calls of each variant (300).
  --batch_size, --seq_length   the forward's input (1, 128).

At inference `AlbertEncoder` computes each block's `matmul_weights()` (kernels cast to the compute dtype, the
attention kernels reshaped to [H, H]) once and hands them to every layer; in training each layer computes its
own. With dropout 0 (base_v2) the training-mode forward computes the same values, so it is the per-layer variant
here: the same model, the same weights, one `tf.function` each, called alternately (A B, B A, ...) so that load
from other processes hits both alike. Prints the median milliseconds of each and their ratio, and checks that
both give the same output.
"""

import os
import statistics
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_model
import numpy as np
import tensorflow as tf
from absl import app, flags

from albert_tf.config import AlbertConfig

FLAGS = flags.FLAGS
flags.DEFINE_list("policies", ["float32", "mixed_bfloat16"], "Keras dtype policies to measure.")
flags.DEFINE_integer("calls", 300, "Timed calls of each variant.")
flags.DEFINE_integer("batch_size", 1, "Examples per call.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")


def forward(side, training):
    """The encoder's forward as one tf.function; `training=True` is the per-layer-weights path."""
    @tf.function
    def run(batch):
        inputs = {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}
        return side.encoder(inputs, training=training)["sequence_output"]

    return run


def main(argv):
    del argv
    config = AlbertConfig.preset("base_v2")
    assert config.hidden_dropout_prob == 0 and config.attention_probs_dropout_prob == 0
    model, have, _ = bench_model.cpu_description()
    print(f"{model} ({' '.join(have)}); load average before: {bench_model.load_average()}")
    batch = bench_model.make_batch(config, FLAGS.batch_size, FLAGS.seq_length, 20)
    for policy in FLAGS.policies:
        side = bench_model.Ours(config, policy=policy)
        once, per_layer = forward(side, False), forward(side, True)
        a, b = np.asarray(once(batch)), np.asarray(per_layer(batch))
        if not np.array_equal(a, b):
            raise SystemExit(f"{policy}: the two variants' outputs differ (max {np.abs(a - b).max():.3g})")
        times = {once: [], per_layer: []}
        for call in range(FLAGS.calls):
            for fn in ((once, per_layer) if call % 2 else (per_layer, once)):
                start = time.perf_counter()
                np.asarray(fn(batch))
                times[fn].append(time.perf_counter() - start)
        t_once, t_layer = statistics.median(times[once]), statistics.median(times[per_layer])
        print(f"{policy}: batch {FLAGS.batch_size}, seq {FLAGS.seq_length}, medians of {FLAGS.calls} alternating "
              f"calls: weights once per forward {1000 * t_once:.1f} ms, once per layer {1000 * t_layer:.1f} ms: "
              f"x{t_layer / t_once:.3f} faster; outputs identical")
    print(f"load average after: {bench_model.load_average()}")


if __name__ == "__main__":
    app.run(main)
