r"""Benchmarks albert_tf's ALBERT against keras-hub's `AlbertBackbone` of the same shape, in one run.

    python bench/bench_model.py                       # base_v2, batch 32, seq 128, 20 MLM positions
    python bench/bench_model.py --train_steps=10 --jit_compile=false

Measures, for both implementations with identical shapes and work:
  * training throughput: forward + backward + Adam update of the pretraining model (encoder, MLM head
    gathered at --num_predictions positions with tied output embeddings, SOP head; MLM + SOP cross-entropy).
    keras-hub has no ALBERT pretraining model, so its side is `AlbertBackbone` + `keras_hub.layers.MaskedLMHead`
    (tied to the backbone's token embedding) + a Dense(2) SOP head, i.e. the same computation;
  * inference: the encoder alone (`AlbertModel` vs `AlbertBackbone`), latency at batch 1 and throughput at
    --batch_size.
Both run as `tf.function`s (XLA with --jit_compile). Rounds alternate between the two implementations (and a
peak measurement) and the best round of each is kept, which makes the comparison robust to other load on the
machine; the load average is printed before and after.

Achieved GFLOP/s uses `AlbertConfig.flops_per_token` (encoder matmuls and attention) plus the heads; a
training step counts 3x the forward FLOPs. The peak is measured here: a float32 tf.matmul of
--matmul_size squared matrices under tf.function.
"""

import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags  # noqa: E402

from albert_tf.config import AlbertConfig  # noqa: E402
from albert_tf.model.layers import gelu_tanh  # noqa: E402
from albert_tf.model import AlbertForPretraining, AlbertModel, dummy_inputs  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "base_v2", "AlbertConfig preset whose shape is benchmarked.")
flags.DEFINE_integer("batch_size", 32, "Examples per training / inference step (32 keeps the matmuls large enough "
                     "to measure efficiency rather than overhead).")
flags.DEFINE_integer("seq_length", 128, "Sequence length.")
flags.DEFINE_integer("num_predictions", 20, "Masked-LM positions per example (max_predictions_per_seq).")
flags.DEFINE_integer("train_steps", 2, "Timed training steps per round.")
flags.DEFINE_integer("infer_steps", 2, "Timed inference steps (at --batch_size) per round.")
flags.DEFINE_integer("latency_steps", 5, "Timed batch-1 inference calls per round.")
flags.DEFINE_integer("rounds", 2, "Rounds, alternating ours / keras-hub; the best round is reported.")
flags.DEFINE_bool("jit_compile", False, "Compile the steps with XLA (both implementations).")
flags.DEFINE_integer("matmul_size", 2048, "Side of the square float32 matrices timed for the peak.")
flags.DEFINE_integer("matmul_repeats", 8, "Matmuls per timed call when measuring the peak.")


# ------------------------------------------------------------------ inputs
def make_batch(config, batch_size, seq_length, num_predictions, seed=0):
    rng = np.random.RandomState(seed)
    ids = rng.randint(5, config.vocab_size, (batch_size, seq_length)).astype("int32")
    segments = np.zeros_like(ids)
    segments[:, seq_length // 2:] = 1
    positions = np.stack([np.sort(rng.choice(np.arange(1, seq_length), num_predictions, replace=False))
                          for _ in range(batch_size)]).astype("int32")
    return {
        "input_ids": tf.constant(ids), "input_mask": tf.ones_like(ids), "segment_ids": tf.constant(segments),
        "masked_lm_positions": tf.constant(positions),
        "masked_lm_ids": tf.constant(rng.randint(0, config.vocab_size, (batch_size, num_predictions)),
                                     dtype=tf.int32),
        "sentence_order_label": tf.constant(rng.randint(0, 2, (batch_size,)), dtype=tf.int32),
    }


def pretraining_loss(mlm_logits, sop_logits, batch):
    mlm = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=batch["masked_lm_ids"], logits=tf.cast(mlm_logits, tf.float32)))
    sop = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=batch["sentence_order_label"], logits=tf.cast(sop_logits, tf.float32)))
    return mlm + sop


# ---------------------------------------------------------- the two sides
class Ours:
    name = "albert_tf"

    def __init__(self, config):
        self.pretraining = AlbertForPretraining(config)
        self.pretraining(dummy_inputs(num_predictions=1), training=False)
        self.encoder = AlbertModel(config)
        self.encoder(dummy_inputs(), training=False)
        self.variables = self.pretraining.trainable_variables

    def pretraining_logits(self, batch, training):
        out = self.pretraining(batch, training=training)
        return out["mlm_logits"], out["sop_logits"]

    def encode(self, batch):
        return self.encoder({k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")},
                            training=False)["sequence_output"]


class KerasHub:
    name = "keras-hub"

    def __init__(self, config):
        def backbone():
            return keras_hub.models.AlbertBackbone(
                vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
                num_heads=config.num_attention_heads, embedding_dim=config.embedding_size,
                hidden_dim=config.hidden_size, intermediate_dim=config.intermediate_size,
                num_groups=config.num_hidden_groups, num_inner_repetitions=config.inner_group_num,
                dropout=config.hidden_dropout_prob, max_sequence_length=config.max_position_embeddings,
                num_segments=config.type_vocab_size)

        self.backbone = backbone()
        self.mlm_head = keras_hub.layers.MaskedLMHead(
            vocabulary_size=config.vocab_size, token_embedding=self.backbone.token_embedding,
            intermediate_activation=gelu_tanh, layer_norm_epsilon=1e-12)
        self.sop_head = keras.layers.Dense(2)
        batch = make_batch(config, 1, 2, 1)
        self.pretraining_logits(batch, training=False)
        self.variables = (self.backbone.trainable_variables + self.mlm_head.trainable_variables
                          + self.sop_head.trainable_variables)
        # Deduplicate the tied embedding (the head reuses the backbone's table).
        seen, unique = set(), []
        for variable in self.variables:
            if id(variable) not in seen:
                seen.add(id(variable))
                unique.append(variable)
        self.variables = unique
        self.inference_backbone = backbone()

    @staticmethod
    def _inputs(batch):
        return {"token_ids": batch["input_ids"], "segment_ids": batch["segment_ids"],
                "padding_mask": batch["input_mask"]}

    def pretraining_logits(self, batch, training):
        out = self.backbone(self._inputs(batch), training=training)
        mlm = self.mlm_head(out["sequence_output"], mask_positions=batch["masked_lm_positions"])
        return mlm, self.sop_head(out["pooled_output"])

    def encode(self, batch):
        return self.inference_backbone(self._inputs(batch), training=False)["sequence_output"]


def make_steps(side, jit_compile):
    optimizer = keras.optimizers.Adam(1e-4)
    optimizer.build(side.variables)

    @tf.function(jit_compile=jit_compile)
    def train_step(batch):
        with tf.GradientTape() as tape:
            mlm_logits, sop_logits = side.pretraining_logits(batch, training=True)
            loss = pretraining_loss(mlm_logits, sop_logits, batch)
        grads = tape.gradient(loss, side.variables)
        optimizer.apply_gradients(zip(grads, side.variables))
        return loss

    @tf.function(jit_compile=jit_compile)
    def infer_step(batch):
        return side.encode(batch)

    return train_step, infer_step


def timed(fn, batch, steps):
    """Seconds per call (the result is fetched, so the work is really done)."""
    start = time.perf_counter()
    for _ in range(steps):
        result = fn(batch)
    np.asarray(result)
    return (time.perf_counter() - start) / steps


# -------------------------------------------------------------------- peak
def matmul_peak(size, repeats, rounds=3):
    """Best float32 GFLOP/s of a chain of `repeats` independent size x size matmuls under tf.function."""
    key = (size, repeats)
    if key not in _PEAK_FNS:
        _PEAK_FNS[key] = _make_matmul_chain(size, repeats)
    run = _PEAK_FNS[key]
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        np.asarray(run())
        best = min(best, time.perf_counter() - start)
    return 2.0 * size ** 3 * repeats / best / 1e9


_PEAK_FNS = {}


def _make_matmul_chain(size, repeats):
    a = tf.random.normal((size, size))
    bs = [tf.random.normal((size, size)) for _ in range(repeats)]

    @tf.function
    def run():
        total = tf.zeros((size, size))
        for b in bs:
            total += tf.matmul(a, b)
        return total

    np.asarray(run())  # warm up
    return run


def forward_flops_per_example(config, seq_length, num_predictions):
    """Encoder (AlbertConfig.flops_per_token) + pooler + MLM head at the gathered positions + SOP head."""
    h, e, v = config.hidden_size, config.embedding_size, config.vocab_size
    encoder = config.flops_per_token(seq_length) * seq_length
    heads = 2 * h * h + num_predictions * (2 * h * e + 2 * e * v) + 2 * h * 2
    return encoder, encoder + heads


# -------------------------------------------------------------------- main
def main(argv):
    del argv
    config = AlbertConfig.preset(FLAGS.preset)
    b, t, p = FLAGS.batch_size, FLAGS.seq_length, FLAGS.num_predictions
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, keras-hub {keras_hub.__version__}; "
          f"{os.cpu_count()} CPU cores visible; jit_compile={FLAGS.jit_compile}")
    print(f"Shape: {FLAGS.preset} (H={config.hidden_size}, L={config.num_hidden_layers}, E={config.embedding_size}, "
          f"V={config.vocab_size}), batch {b}, seq {t}, {p} MLM positions")

    print(f"Load average before: {'/'.join(f'{x:.1f}' for x in os.getloadavg())} (other processes skew timings)")
    peak = matmul_peak(FLAGS.matmul_size, FLAGS.matmul_repeats)

    batch = make_batch(config, b, t, p)
    single = {k: v[:1] for k, v in batch.items()}
    sides = [Ours(config), KerasHub(config)]
    steps = {}
    for side in sides:
        n_params = sum(int(np.prod(v.shape)) for v in side.variables)
        train_step, infer_step = make_steps(side, FLAGS.jit_compile)
        start = time.perf_counter()
        np.asarray(train_step(batch))
        np.asarray(infer_step(batch))
        np.asarray(infer_step(single))
        print(f"{side.name}: {n_params:,} trainable parameters; compile + first steps {time.perf_counter() - start:.1f} s")
        steps[side.name] = (train_step, infer_step)

    best = {side.name: {"train": float("inf"), "infer": float("inf"), "latency": float("inf")} for side in sides}
    for _ in range(FLAGS.rounds):
        peak = max(peak, matmul_peak(FLAGS.matmul_size, FLAGS.matmul_repeats, rounds=1))
        for side in sides:
            train_step, infer_step = steps[side.name]
            record = best[side.name]
            record["train"] = min(record["train"], timed(train_step, batch, FLAGS.train_steps))
            record["infer"] = min(record["infer"], timed(infer_step, batch, FLAGS.infer_steps))
            record["latency"] = min(record["latency"], timed(infer_step, single, FLAGS.latency_steps))

    peak = max(peak, matmul_peak(FLAGS.matmul_size, FLAGS.matmul_repeats, rounds=1))
    encoder_flops, pretraining_flops = forward_flops_per_example(config, t, p)
    print(f"Measured float32 matmul peak ({FLAGS.matmul_size}^2 tf.matmul under tf.function, best of the run): "
          f"{peak:.1f} GFLOP/s; load average after: {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    print()
    print(f"{'':12s} {'train ex/s':>11s} {'train GFLOP/s':>14s} {'% peak':>7s} {'infer ex/s':>11s} "
          f"{'infer GFLOP/s':>14s} {'% peak':>7s} {'latency b=1':>12s}")
    for side in sides:
        r = best[side.name]
        train_gflops = 3 * pretraining_flops * b / r["train"] / 1e9
        infer_gflops = encoder_flops * b / r["infer"] / 1e9
        print(f"{side.name:12s} {b / r['train']:11.2f} {train_gflops:14.1f} {100 * train_gflops / peak:6.1f}% "
              f"{b / r['infer']:11.2f} {infer_gflops:14.1f} {100 * infer_gflops / peak:6.1f}% "
              f"{1000 * r['latency']:9.1f} ms")
    ours, theirs = best[sides[0].name], best[sides[1].name]
    print()
    print(f"albert_tf / keras-hub: training throughput x{theirs['train'] / ours['train']:.3f}, inference "
          f"throughput x{theirs['infer'] / ours['infer']:.3f}, batch-1 latency x{ours['latency'] / theirs['latency']:.3f} "
          "(throughput ratios > 1 and latency ratio < 1 favour albert_tf)")
    print(f"FLOPs per example: encoder forward {encoder_flops / 1e9:.2f} G, pretraining forward "
          f"{pretraining_flops / 1e9:.2f} G (training step = 3x forward)")


if __name__ == "__main__":
    app.run(main)
