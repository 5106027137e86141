r"""What preparing the shared block's weights once per forward saves at batch 1, against once per layer.

    python bench/bench_inference_weights.py                      # float32 and mixed_bfloat16, 300 calls each

Flags:
  --policies   Keras dtype policies to measure (float32,mixed_bfloat16).
  --calls      timed calls of each variant (300).
  --batch_size, --seq_length   the forward's input (1, 128).

At inference `AlbertEncoder` computes each block's `matmul_weights()` (kernels cast to the compute dtype, the
attention kernels reshaped to [H, H]) once and hands them to every layer; in training each layer computes its
own. The per-layer variant here is the same inference forward with every block preparing its own weights (the
weights `AlbertEncoder` hands over are ignored while it is traced), so the two differ in that alone: the same
model, the same weights, one `tf.function` each, called alternately (A B, B A, ...) so that load from other
processes hits both alike. Prints the median milliseconds of each and their ratio, and checks that both give the
same output.
"""

import contextlib
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_model
import numpy as np
import tensorflow as tf
from absl import app, flags

from albert_tf.config import AlbertConfig
from albert_tf.model.layers import AlbertTransformerBlock

FLAGS = flags.FLAGS
flags.DEFINE_list("policies", ["float32", "mixed_bfloat16"], "Keras dtype policies to measure.")
flags.DEFINE_integer("calls", 300, "Timed calls of each variant.")
flags.DEFINE_integer("batch_size", 1, "Examples per call.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")


def forward(side):
    """The encoder's inference forward as one tf.function."""
    @tf.function
    def run(batch):
        inputs = {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}
        return side.encoder(inputs, training=False)["sequence_output"]

    return run


@contextlib.contextmanager
def blocks_prepare_own_weights():
    """Traces inside this block have every block call prepare its own weights, ignoring those handed to it."""
    saved = AlbertTransformerBlock.forward

    def own_weights(self, inputs, bias, seeds=None, positions=None, weights=None, scale_scores=False):
        return saved(self, inputs, bias, seeds, positions, None, scale_scores)

    AlbertTransformerBlock.forward = own_weights
    try:
        yield
    finally:
        AlbertTransformerBlock.forward = saved


def main(argv):
    del argv
    config = AlbertConfig.preset("base_v2")
    model, have, _ = bench_model.cpu_description()
    print(f"{model} ({' '.join(have)}); load average before: {bench_model.load_average()}")
    batch = bench_model.make_batch(config, FLAGS.batch_size, FLAGS.seq_length, 20)
    for policy in FLAGS.policies:
        side = bench_model.Ours(config, policy=policy)
        once, per_layer = forward(side), forward(side)
        with blocks_prepare_own_weights():
            b = np.asarray(per_layer(batch))
        a = np.asarray(once(batch))
        if not np.array_equal(a, b):
            raise SystemExit(f"{policy}: the two variants' outputs differ (max {np.abs(a - b).max():.3g})")
        t_once, t_layer = bench_model.alternate(once, per_layer, batch, FLAGS.calls)
        print(f"{policy}: batch {FLAGS.batch_size}, seq {FLAGS.seq_length}, medians of {FLAGS.calls} alternating "
              f"calls: weights once per forward {1000 * t_once:.1f} ms, once per layer {1000 * t_layer:.1f} ms: "
              f"x{t_layer / t_once:.3f} faster; outputs identical")
    print(f"load average after: {bench_model.load_average()}")


if __name__ == "__main__":
    app.run(main)
