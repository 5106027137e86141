r"""Where the attention's 1/sqrt(head_size) scale is cheapest: folded into the query kernel, or applied to the
query-key products (then fused by oneDNN with the mask into the product at inference).

    python bench/bench_attention_scale.py            # batch-1 forward and the batch-8 training step, both ways

Flags:
  --calls         timed calls of each variant per batch-1 measure (200).
  --train_steps   timed training steps of each variant (6; 0 skips the training step).
  --train_batch_size, --seq_length   (8, 128).

The model folds the scale into the query kernel in training (each layer prepares its own weights,
`AlbertTransformerBlock.matmul_weights(fold_scale=True)`) and scales the scores at inference (`scale_scores`, with
the weights `AlbertEncoder` prepares once per forward). Here both traces of each measure are forced to one place
or the other, the weights prepared where the model prepares them: the same model and weights, base_v2,
float32, each variant one `tf.function`, called alternately (A B, B A, ...) so that load from other processes hits
both alike, medians. Measures the batch-1 encoder forward (graph mode, as `bench_model.py` times it) and the
pretraining training step of `bench_model.py`, and checks that the two places agree to float32 rounding.
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
flags.DEFINE_integer("calls", 200, "Timed calls of each variant per batch-1 measure.")
flags.DEFINE_integer("train_steps", 6, "Timed training steps of each variant (0: no training step).")
flags.DEFINE_integer("train_batch_size", 8, "Examples per training step.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")

PLACES = {"query kernel": True, "scores": False}


@contextlib.contextmanager
def scale_folded(fold):
    """Traces inside this block put the scale in the query kernel (`fold`) or on the scores, in training and at
    inference alike; the weights are prepared where the model prepares them."""
    saved_weights, saved_forward = AlbertTransformerBlock.matmul_weights, AlbertTransformerBlock.forward
    AlbertTransformerBlock.matmul_weights = lambda self, fold_scale=True: saved_weights(self, fold_scale=fold)
    AlbertTransformerBlock.forward = lambda self, *args, scale_scores=False: saved_forward(
        self, *args[:5], scale_scores=not fold)
    try:
        yield
    finally:
        AlbertTransformerBlock.matmul_weights, AlbertTransformerBlock.forward = saved_weights, saved_forward


def traced(make, batch):
    """{place: (a tf.function from `make()` traced with the scale there, its first result)}."""
    out = {}
    for place, fold in PLACES.items():
        fn = make()
        with scale_folded(fold):
            out[place] = fn, fn(batch)
    return out


def report(label, variants, batch, calls, unit):
    (fold, out_fold), (scores, out_scores) = variants["query kernel"], variants["scores"]
    diff = float(np.abs(np.asarray(tf.nest.flatten(out_fold)[0]) - np.asarray(tf.nest.flatten(out_scores)[0])).max())
    t_fold, t_scores = bench_model.alternate(fold, scores, batch, calls)
    scale, digits = (1000.0, 1) if unit == "ms" else (1.0, 3)
    print(f"{label}: scale in the query kernel {scale * t_fold:.{digits}f} {unit}, on the scores "
          f"{scale * t_scores:.{digits}f} {unit}: scores / kernel x{t_scores / t_fold:.3f}; results within {diff:.2g}")


def main(argv):
    del argv
    config = AlbertConfig.preset("base_v2")
    model, have, _ = bench_model.cpu_description()
    print(f"{model} ({' '.join(have)}); load average before: {bench_model.load_average()}")
    side = bench_model.Ours(config)
    batch = bench_model.make_batch(config, 1, FLAGS.seq_length, 20)
    report("batch 1, graph", traced(lambda: tf.function(side.encode), batch), batch, FLAGS.calls, "ms")
    if FLAGS.train_steps:
        train = bench_model.make_batch(config, FLAGS.train_batch_size, FLAGS.seq_length, 20)
        losses = traced(lambda: tf.function(lambda b: bench_model.pretraining_loss(side.logits(b, training=True), b)),
                        train)
        print(f"losses before training: {float(losses['query kernel'][1]):.7f} (kernel), "
              f"{float(losses['scores'][1]):.7f} (scores)")
        report(f"training step, batch {FLAGS.train_batch_size}, graph",
               traced(lambda: bench_model.make_train_step(side, False), train), train, FLAGS.train_steps, "s")
    print(f"load average after: {bench_model.load_average()}")


if __name__ == "__main__":
    app.run(main)
