r"""What computing every LayerNorm as one op (`albert_tf.model.normalization`) gains against Keras 3's
`LayerNormalization` ops, in the same model with the same weights.

    python bench/bench_layer_norm.py                    # batch-1 forward (3 ways) and the batch-8 training step

Flags:
  --calls         timed calls of each variant per batch-1 measure (200).
  --train_steps   timed training steps of each variant (6; 0 skips the training step).
  --train_batch_size, --seq_length   (8, 128).

The "keras" variant is the same model traced while `normalization.layer_norm` is replaced by
`keras.ops.layer_normalization` (what `keras.layers.LayerNormalization` computes); everything else is shared.
Measured, base_v2, each variant one `tf.function`, called alternately (A B, B A, ...) so that load from other
processes hits both alike, medians:
  * batch-1 encoder forward, graph mode, traced at the input's static shape (as `bench_model.py` times it);
  * the same through a `[None, None]` input signature, as an exported SavedModel traces it;
  * the same with XLA (`jit_compile=True`);
  * the pretraining training step (forward, backward, clipping, LAMB) of `bench_model.py`.
Checks that the variants' outputs and losses agree to float32 rounding, and prints how many fused LayerNorm
kernels (`_MklLayerNorm`) TensorFlow ran in one batch-1 forward of each (from a profile), since that fusion is
what the one-op form is for.
"""

import contextlib
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_model
import keras
import numpy as np
import tensorflow as tf
from absl import app, flags

from albert_tf.config import AlbertConfig
from albert_tf.model import normalization

FLAGS = flags.FLAGS
flags.DEFINE_integer("calls", 200, "Timed calls of each variant per batch-1 measure.")
flags.DEFINE_integer("train_steps", 6, "Timed training steps of each variant (0: no training step).")
flags.DEFINE_integer("train_batch_size", 8, "Examples per training step.")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")


def keras_layer_norm(inputs, gamma, beta, epsilon):
    """What `keras.layers.LayerNormalization` computes (float32)."""
    return keras.ops.layer_normalization(tf.cast(inputs, tf.float32), gamma, beta, epsilon=epsilon)


@contextlib.contextmanager
def layer_norm_as(fn):
    """Traces inside this block use `fn` for every LayerNorm of the model."""
    saved = normalization.layer_norm
    normalization.layer_norm = fn
    try:
        yield
    finally:
        normalization.layer_norm = saved


def traced(make, batch, fn):
    """`make()` -> a tf.function, traced (and run once) with LayerNorm computed by `fn`."""
    step = make()
    with layer_norm_as(fn):
        result = step(batch)
    return step, result


def fused_kernels(fn, batch):
    """How many fused LayerNorm kernels (`_MklLayerNorm`) one call of `fn(batch)` ran (TensorFlow's profiler)."""
    _, events = bench_model.op_events(fn, batch, 1)
    return sum(name.endswith(":_MklLayerNorm") for name, _ in events)


def main(argv):
    del argv
    config = AlbertConfig.preset("base_v2")
    model, have, _ = bench_model.cpu_description()
    print(f"{model} ({' '.join(have)}); load average before: {bench_model.load_average()}")
    side = bench_model.Ours(config)
    batch = bench_model.make_batch(config, 1, FLAGS.seq_length, 20)
    inputs = {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}
    spec = {k: tf.TensorSpec([None, None], v.dtype) for k, v in inputs.items()}
    forwards = {
        "batch 1, graph": lambda: tf.function(side.encode),
        "batch 1, [None, None] signature": lambda: tf.function(side.encode, input_signature=[spec]),
        "batch 1, XLA": lambda: tf.function(side.encode, jit_compile=True),
    }
    for label, make in forwards.items():
        arg = inputs if "signature" in label else batch
        fused, out_fused = traced(make, arg, normalization.layer_norm)
        plain, out_plain = traced(make, arg, keras_layer_norm)
        diff = float(np.abs(np.asarray(out_fused) - np.asarray(out_plain)).max())
        t_fused, t_plain = bench_model.alternate(fused, plain, arg, FLAGS.calls)
        kernels = "" if "XLA" in label else (f"; fused LayerNorm kernels per forward: {fused_kernels(fused, arg)} "
                                             f"against {fused_kernels(plain, arg)}")
        print(f"{label}: one-op LayerNorm {1000 * t_fused:.1f} ms, Keras' {1000 * t_plain:.1f} ms: "
              f"x{t_plain / t_fused:.3f}; outputs within {diff:.2g}{kernels}")
    if FLAGS.train_steps:
        train = bench_model.make_batch(config, FLAGS.train_batch_size, FLAGS.seq_length, 20)
        loss = lambda: tf.function(lambda b: bench_model.pretraining_loss(side.logits(b, training=True), b))
        _, loss_fused = traced(loss, train, normalization.layer_norm)
        _, loss_plain = traced(loss, train, keras_layer_norm)
        fused, _ = traced(lambda: bench_model.make_train_step(side, False), train, normalization.layer_norm)
        plain, _ = traced(lambda: bench_model.make_train_step(side, False), train, keras_layer_norm)
        t_fused, t_plain = bench_model.alternate(fused, plain, train, FLAGS.train_steps)
        print(f"training step, batch {FLAGS.train_batch_size}, graph: one-op LayerNorm {t_fused:.3f} s, Keras' "
              f"{t_plain:.3f} s: x{t_plain / t_fused:.3f}; losses before training {float(loss_fused):.7f} and "
              f"{float(loss_plain):.7f}")
    print(f"load average after: {bench_model.load_average()}")


if __name__ == "__main__":
    app.run(main)
