r"""The model's training step and batch-1 inference: speed, stored runs, and memory with `--remat`.

    python -m bench.bench_model [speed] [flags]          # speed against the matmul peak and keras-hub (below)
    python -m bench.bench_model runs [--runs_json=...]   # the tables of stored speed runs
    python -m bench.bench_model remat [flags]            # peak memory and step time with and without --remat

`speed` (the default) was `python bench/bench_model.py`, `runs` was `python bench/bench_model_runs.py` and `remat`
was `python bench/bench_remat.py`, with the same flags; `python -m bench.bench_model <subcommand> --help` lists a
subcommand's flags.

speed: model speed against the machine's own float32 matmul peak, and against keras-hub's `AlbertBackbone`, in one
run.

    python -m bench.bench_model                                   # base_v2, batch 8 and 32, seq 128: ~25 min
    python -m bench.bench_model --sides=albert_tf,albert_tf-full,keras-hub   # and the full last layer too
    python -m bench.bench_model --sides=albert_tf,albert_tf-bf16 --modes=graph   # mixed_bfloat16 against float32
    python -m bench.bench_model --batch_sizes=8 --rounds=3 --modes=xla
    python -m bench.bench_model --batch_sizes=2 --rounds=1 --sides=albert_tf --modes=graph --output_json=/tmp/b.json

Flags:
  --preset            AlbertConfig preset whose shape is measured (base_v2).
  --batch_sizes       training batch sizes, comma-separated (8,32).
  --seq_length        sequence length of every example (128).
  --num_predictions   masked-LM positions per example (20).
  --modes             how the steps run: `graph` (tf.function) and/or `xla` (tf.function(jit_compile=True)).
  --sides             `albert_tf` (as run_pretraining.py trains: the last layer at the heads' positions only),
                      `albert_tf-full` (every position of every layer; training only), `albert_tf-bf16`
                      (albert_tf under the mixed_bfloat16 policy, as --mixed_precision=bf16), `keras-hub`
                      (AlbertBackbone + MaskedLMHead + Dense(2), the same math) and/or `keras-hub-bf16` (it under
                      mixed_bfloat16). A -bf16 side is compared with the other -bf16 side and with its float32 one.
  --rounds            rounds; every figure is the MEDIAN over the rounds (5).
  --train_steps       timed training steps per round and configuration (2).
  --latency_calls     timed batch-1 inference calls per round and configuration (20).
  --savedmodel        also time batch-1 inference through the exported SavedModel (serving.encoder.export_encoder,
                      loaded with tf.saved_model.load, its serving_default signature), of albert_tf and of
                      albert_tf-bf16 (as export_model.py --mixed_precision=bf16 exports it) (true).
  --output_json       where the medians go, with the command and machine (bench/results/bench_model.json).

What is measured, all in one process and one window (rounds go over every configuration in turn, so load from
other processes hits all alike; the training rounds first, then the batch-1 rounds, so that a latency is never
timed just after a long training step; the load average is printed before and after):
  * the float32 matmul peak AT THE MODEL'S OWN SHAPES: every matmul of a training step (forward: [B*T, H] x
    [H, H] for the four attention projections, [B*T, H] x [H, 4H] and back, the batched attention products, the
    embedding projection, the MLM transform and the tied [B*P, E] x [E, V] logits; backward: the same with
    transposed operands, dX = dY W^T and dW = X^T dY), as many times as the step computes it, alone in one graph
    (each on its own operands, none depending on another, so TensorFlow may run them concurrently as it runs
    a backward pass's independent products), under tf.function and under XLA; likewise for a batch-1 forward,
    whose matmuls are also timed in their dependency order, one layer's products after the other's and
    nothing else (`ForwardChain`: what a forward's chain of matmuls takes on its own);
    "Peak time" = the faster of the two; a step's fraction of peak is peak time / step time (= achieved
    GFLOP/s / peak GFLOP/s at those shapes). These are the model's matmuls, every position of every layer;
    albert_tf's step computes fewer (its last layer only where the heads read it), so it is also given as a
    fraction of its own matmuls' time ("of own"). A square 2048 x 2048 matmul is timed too, for scale, in float32
    and in bfloat16 (what AVX512_BF16 / AMX give a mixed_bfloat16 model at best);
  * the training step of the pretraining model (MLM + SOP loss, the project's LAMB and global-norm clipping, as
    run_pretraining.py trains; dropout 0 as base_v2) at each batch size, graph and XLA, for every side;
  * batch-1 inference of the encoder (graph, XLA, and the exported SavedModel), for every side but albert_tf-full.

The machine's CPU model and its SIMD flags (AVX-512, AVX512_BF16, AMX) are printed with the figures: the peak
and every ratio depend on them. Figures are medians over --rounds, never the best round.

runs: the tables of `speed` runs (docs/benchmarks.md), printed from the medians those runs wrote.

    python -m bench.bench_model runs                                  # bench/figures/bench_model.json
    python -m bench.bench_model runs --runs_json=bench/results/bench_model.json   # the latest run alone

Flags:
  --runs_json   a JSON file {"command": ..., "runs": [<what `speed` wrote>, ...]}, or one file that
                `speed` wrote (one run).

Prints two Markdown tables, one row per run and configuration: the training step (seconds, fraction of the
float32 matmul peak at the model's shapes, against keras-hub in the same precision where the run has it, and
the bfloat16 sides against their float32 step) and batch-1 inference (milliseconds and multiple of the matmul-only time). Nothing is
measured here: every figure is one `speed` printed and stored.

remat: activation recomputation (`--remat`): peak memory and step time with and without it, in fresh processes.

    python -m bench.bench_model remat                          # large_v2, batch 8, seq 512: ~6-10 min on 2 cores
    python -m bench.bench_model remat --preset=base_v2 --batch_size=8 --seq_length=128 --steps=2
    python -m bench.bench_model remat --preset=base_v2 --batch_size=1 --seq_length=32 --output_json=/tmp/remat.json  # smoke

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
import math
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time

from bench.support import common  # first: the environment every benchmark needs

import keras
import keras_hub
import numpy as np
import tensorflow as tf
from absl import app, flags
from absl import logging as absl_logging

from albert_tf.config import AlbertConfig
from albert_tf.model import AlbertForPretraining, AlbertModel, dummy_inputs, set_heads_only, set_remat
from albert_tf.model.layers import gelu_tanh
from albert_tf.model.pretraining import MLM_EPSILON, pretraining_losses
from albert_tf.tasks.pretraining import TrainablePretraining
from albert_tf.train.optimization import create_optimizer
from albert_tf.train.runner import dtype_policy_scope
from albert_tf.train.steps import clip_gradients_across_replicas

FLAGS = flags.FLAGS


def define_speed_flags():
    """The flags of `speed`."""
    flags.DEFINE_string("preset", "base_v2", "AlbertConfig preset whose shape is measured.")
    flags.DEFINE_list("batch_sizes", ["8", "32"], "Training batch sizes.")
    flags.DEFINE_integer("seq_length", 128, "Sequence length.")
    flags.DEFINE_integer("num_predictions", 20, "Masked-LM positions per example.")
    flags.DEFINE_list("modes", ["graph", "xla"], "graph (tf.function) and/or xla (jit_compile=True).")
    flags.DEFINE_list("sides", ["albert_tf", "keras-hub"], "Implementations to measure.")
    flags.DEFINE_integer("rounds", 5, "Rounds; every figure is the median over them.")
    flags.DEFINE_integer("train_steps", 2, "Timed training steps per round and configuration.")
    flags.DEFINE_integer("latency_calls", 20, "Timed batch-1 calls per round and configuration.")
    flags.DEFINE_bool("savedmodel", True, "Also time batch-1 inference through the exported SavedModel.")
    common.define_output_json("bench_model")


# ------------------------------------------------------------------------------------------------ inputs
def random_features(config, batch_size, seq_length, num_predictions, seed=0):
    """One batch of pretraining features, as the records give them, with random ids and labels (numpy)."""
    rng = np.random.RandomState(seed)
    ids = rng.randint(5, config.vocab_size, (batch_size, seq_length)).astype("int32")
    segments = np.zeros_like(ids)
    segments[:, seq_length // 2:] = 1
    positions = np.stack([np.sort(rng.choice(np.arange(1, seq_length), num_predictions, replace=False))
                          for _ in range(batch_size)]).astype("int32")
    return {
        "input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": segments, "masked_lm_positions": positions,
        "masked_lm_ids": rng.randint(0, config.vocab_size, (batch_size, num_predictions)).astype("int32"),
        "masked_lm_weights": np.ones((batch_size, num_predictions), "float32"),
        "next_sentence_labels": rng.randint(0, 2, (batch_size, 1)).astype("int32"),
    }


def make_batch(config, batch_size, seq_length, num_predictions, seed=0):
    """`random_features` as tensors."""
    features = random_features(config, batch_size, seq_length, num_predictions, seed)
    return {k: tf.constant(v) for k, v in features.items()}


def pretraining_loss(outputs, batch):
    """The original's loss: weighted MLM mean (sum / (weights + 1e-5)) + mean SOP cross-entropy."""
    mlm_loss, _, sop_loss, _ = pretraining_losses(outputs, batch)
    weights = batch["masked_lm_weights"]
    return tf.reduce_sum(mlm_loss * weights) / (tf.reduce_sum(weights) + MLM_EPSILON) + tf.reduce_mean(sop_loss)


# ------------------------------------------------------------------------------------------- the two sides
class Ours:
    """The pretraining model as run_pretraining.py trains it (`heads_only`: the last layer computed where the
    heads read it); `heads_only=False` (the side `albert_tf-full`) computes every position of every layer.
    `policy="mixed_bfloat16"` (the side `albert_tf-bf16`) builds both models under that Keras dtype policy,
    as `--mixed_precision=bf16` does."""

    def __init__(self, config, heads_only=True, policy="float32"):
        self.name = ("albert_tf" if heads_only else "albert_tf-full") + ("" if policy == "float32" else "-bf16")
        self.heads_only = heads_only
        with dtype_policy_scope(policy):
            self.pretraining = set_heads_only(AlbertForPretraining(config), heads_only)
            self.pretraining(dummy_inputs(num_predictions=1), training=False)
            self.encoder = AlbertModel(config)
            self.encoder(dummy_inputs(), training=False)
        self.variables = self.pretraining.trainable_variables

    def logits(self, batch, training):
        out = self.pretraining(batch, training=training)
        return {"mlm_logits": out["mlm_logits"], "sop_logits": out["sop_logits"]}

    def encode(self, batch):
        return self.encoder({k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")},
                            training=False)["sequence_output"]


class KerasHub:
    """keras-hub's AlbertBackbone with equivalent heads; `policy="mixed_bfloat16"` (the side `keras-hub-bf16`)
    builds it under that Keras dtype policy."""

    def __init__(self, config, policy="float32"):
        self.name = "keras-hub" if policy == "float32" else "keras-hub-bf16"
        with dtype_policy_scope(policy):
            self._build(config)

    def _build(self, config):
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
        self.logits(make_batch(config, 1, 2, 1), training=False)
        seen, self.variables = set(), []
        for variable in (self.backbone.trainable_variables + self.mlm_head.trainable_variables
                         + self.sop_head.trainable_variables):
            if id(variable) not in seen:  # the head's output embedding is the backbone's table (tied)
                seen.add(id(variable))
                self.variables.append(variable)
        self.inference_backbone = backbone()

    @staticmethod
    def _inputs(batch):
        return {"token_ids": batch["input_ids"], "segment_ids": batch["segment_ids"],
                "padding_mask": batch["input_mask"]}

    def logits(self, batch, training):
        out = self.backbone(self._inputs(batch), training=training)
        mlm = self.mlm_head(out["sequence_output"], mask_positions=batch["masked_lm_positions"])
        sop = self.sop_head(out["pooled_output"])  # float32 logits under bf16 too, as albert_tf's heads give
        return {"mlm_logits": keras.ops.cast(mlm, "float32"), "sop_logits": keras.ops.cast(sop, "float32")}

    def encode(self, batch):
        return self.inference_backbone(self._inputs(batch), training=False)["sequence_output"]


def make_train_step(side, jit_compile):
    """forward + backward + global-norm clipping (1.0) + LAMB update, as run_pretraining.py trains."""
    optimizer = create_optimizer("lamb", 1e-4, 1000, 10)
    optimizer.build(side.variables)

    @tf.function(jit_compile=jit_compile)
    def train_step(batch):
        with tf.GradientTape() as tape:
            loss = pretraining_loss(side.logits(batch, training=True), batch)
        grads = clip_gradients_across_replicas(tape.gradient(loss, side.variables), 1.0)
        optimizer.apply(grads, side.variables)
        return loss

    return train_step


def make_infer_step(side, jit_compile):
    return tf.function(side.encode, jit_compile=jit_compile)


class SavedModelSide:
    """Batch-1 inference through `serving.encoder.export_encoder`'s SavedModel, loaded back."""

    def __init__(self, encoder_model, directory):
        from albert_tf.serving.encoder import export_encoder  # pylint: disable=import-outside-toplevel

        export_encoder(encoder_model, directory)
        self.serve = tf.saved_model.load(directory).signatures["serving_default"]

    def __call__(self, batch):
        return self.serve(input_ids=batch["input_ids"], input_mask=batch["input_mask"],
                          segment_ids=batch["segment_ids"])["sequence_output"]


def seconds_per_call(fn, batch, calls):
    """Mean seconds of `fn(batch)` over `calls` calls, each call's first output read back."""
    return statistics.mean(common.time_calls(lambda: np.asarray(tf.nest.flatten(fn(batch))[0]), calls))


# ------------------------------------------------------------------------------------ matmul peak at shapes
def seconds_per_run(fn, min_seconds):
    """Seconds of one call of `fn()` (calls repeated for at least `min_seconds`, each call's outputs computed)."""
    start, calls = time.perf_counter(), 0
    while True:
        np.asarray(tf.nest.flatten(fn())[-1])
        calls += 1
        if time.perf_counter() - start >= min_seconds:
            return (time.perf_counter() - start) / calls


def step_matmuls(config, batch, seq, preds, train, heads_only=False):
    """Every matmul of a step as (name, batch_dims, m, k, n, transpose_a, transpose_b, count per step).

    Forward y = x W with x [m, k]: backward adds dX = dY W^T ([m, n] x [k, n]^T) and dW = X^T dY
    ([m, k]^T x [m, n]); batched attention products likewise. With `heads_only` the last block computes
    its queries, attention output and feed-forward network at 1 + `preds` positions per example only (as
    `AlbertForPretraining.heads_only`, which run_pretraining.py sets); its keys and values stay full.
    """
    h, e, v, i = config.hidden_size, config.embedding_size, config.vocab_size, config.intermediate_size
    n_heads, layers = config.num_attention_heads, config.num_hidden_layers * config.inner_group_num
    d, bt, bp = h // n_heads, batch * seq, batch * preds
    bn = batch * n_heads
    narrow = 1 if heads_only else 0  # blocks computed at the heads' rows only
    rows = 1 + preds  # position 0 (the pooler) and the masked positions
    forward = [("kv x W[H,H]", 1, bt, h, h, 2 * layers), ("qo x W[H,H]", 1, bt, h, h, 2 * (layers - narrow)),
               ("ffn_in x W[H,4H]", 1, bt, h, i, layers - narrow),
               ("ffn_out x W[4H,H]", 1, bt, i, h, layers - narrow), ("embedding_projection", 1, bt, e, h, 1),
               ("pooler", 1, batch, h, h, 1)]
    batched = [("scores q k^T", bn, seq, d, seq, False, True, layers - narrow),
               ("context p v", bn, seq, seq, d, False, False, layers - narrow)]
    if narrow:
        br = batch * rows
        forward += [("last qo x W[H,H]", 1, br, h, h, 2), ("last ffn_in", 1, br, h, i, 1),
                    ("last ffn_out", 1, br, i, h, 1)]
        batched += [("last scores", bn, rows, d, seq, False, True, 1),
                    ("last context", bn, rows, seq, d, False, False, 1)]
    if train:
        forward += [("mlm_transform", 1, bp, h, e, 1), ("mlm_logits x E^T", 1, bp, e, v, 1)]
    forward = [f for f in forward if f[-1] > 0]
    batched = [b for b in batched if b[-1] > 0]
    shapes = []
    for name, nb, m, k, n, count in forward:
        tb = name.startswith("mlm_logits")  # the tied table is [V, E]
        shapes.append((name, nb, m, k, n, False, tb, count))
        if train:
            shapes.append((name + " dX", nb, m, n, k, False, not tb, count))
            shapes.append((name + " dW", nb, k, m, n, True, False, count) if not tb else
                          (name + " dW", nb, n, m, k, True, False, count))
    for name, nb, m, k, n, ta, tb, count in batched:
        shapes.append((name, nb, m, k, n, ta, tb, count))
        if train:
            shapes.append((name + " dA", nb, m, n, k, False, True, count))
            shapes.append((name + " dB", nb, k, m, n, True, False, count))
    return shapes


class StepMatmuls:
    """Every matmul of a step, alone, in one graph: what the step would take if it were its matmuls only.

    Each occurrence of every shape (`count` of `step_matmuls`) runs on its own operand pair, so that graph
    optimisers cannot merge repeated products, and none depends on another, so TensorFlow may run them
    concurrently as it runs the independent products of a backward pass (dX and dW). The function is traced
    twice, as a tf.function and under XLA; `seconds(jit)` times one call, and the peak is the faster.
    """

    def __init__(self, shapes):
        rng = np.random.RandomState(0)
        self.products = []
        for _, nb, m, k, n, ta, tb, count in shapes:
            a_copies = math.ceil(math.sqrt(count))
            b_copies = math.ceil(count / a_copies)
            lead = (nb,) if nb > 1 else ()
            a_list = [tf.constant(rng.normal(size=lead + ((k, m) if ta else (m, k))).astype("float32"))
                      for _ in range(a_copies)]
            b_list = [tf.constant(rng.normal(size=lead + ((n, k) if tb else (k, n))).astype("float32"))
                      for _ in range(b_copies)]
            pairs = [(a, b) for a in a_list for b in b_list][:count]
            self.products.extend((a, b, ta, tb) for a, b in pairs)

        def run():
            return [tf.matmul(a, b, transpose_a=ta, transpose_b=tb) for a, b, ta, tb in self.products]

        self.fns = {jit: tf.function(run, jit_compile=jit) for jit in (False, True)}
        for fn in self.fns.values():
            np.asarray(fn()[-1])

    def seconds(self, jit, min_seconds=0.3):
        return seconds_per_run(self.fns[jit], min_seconds)


class ForwardChain:
    """A batch-1 forward's matmuls in their dependency order, and nothing else: layer after layer, the query, key
    and value projections of the previous layer's output, the two attention products (with the transposes
    between the [T, H] and [heads, T, D] layouts they need), the output projection and the two feed-forward
    products, each consuming the product before it. No bias, activation, residual, softmax or LayerNorm; each
    layer's output projection is scaled (computed once with numpy) so that every layer's output has standard
    deviation 1. Where `StepMatmuls` lets independent products overlap, this is what a forward's own chain of
    matmuls takes: the part of a batch-1 latency no change to the elementwise work can remove."""

    def __init__(self, config, seq):
        rng = np.random.RandomState(0)
        h, i, heads = config.hidden_size, config.intermediate_size, config.num_attention_heads
        d = h // heads

        def weight(k, n):
            return (rng.normal(size=(k, n)) / math.sqrt(k)).astype("float32")

        def split(y):  # [T, H] -> [heads, T, D]
            return y.reshape(seq, heads, d).transpose(1, 0, 2)

        x0 = x = rng.normal(size=(seq, h)).astype("float32")
        w_q, w_k, w_v, w_in, w_out = weight(h, h), weight(h, h), weight(h, h), weight(h, i), weight(i, h)
        w_o = []
        for _ in range(config.num_hidden_layers * config.inner_group_num):
            scores = split(x @ w_q) @ split(x @ w_k).transpose(0, 2, 1)
            context = (scores @ split(x @ w_v)).transpose(1, 0, 2).reshape(seq, h)
            w = weight(h, h)
            y = ((context @ w) @ w_in) @ w_out
            w_o.append(w / y.std())
            x = y / y.std()
        x0, w_q, w_k, w_v, w_in, w_out = (tf.constant(a) for a in (x0, w_q, w_k, w_v, w_in, w_out))
        w_o = [tf.constant(w) for w in w_o]

        def heads_of(y):
            return tf.transpose(tf.reshape(y, (seq, heads, d)), (1, 0, 2))

        def run():
            x = x0
            for w in w_o:
                scores = tf.matmul(heads_of(x @ w_q), heads_of(x @ w_k), transpose_b=True)
                context = tf.reshape(tf.transpose(tf.matmul(scores, heads_of(x @ w_v)), (1, 0, 2)), (seq, h))
                x = ((context @ w) @ w_in) @ w_out
            return x

        self.fns = {jit: tf.function(run, jit_compile=jit) for jit in (False, True)}
        for fn in self.fns.values():
            np.asarray(fn())

    def seconds(self, jit, min_seconds=0.3):
        return seconds_per_run(self.fns[jit], min_seconds)


class MatmulPeak:
    """The matmul-only time of each measured step (`StepMatmuls`), sampled once per round; `seconds(name)` is
    the median of the faster mode, `seconds(name, jit)` of one mode."""

    def __init__(self):
        self.steps, self.samples = {}, {}

    def add(self, name, shapes):
        self.steps[name] = StepMatmuls(shapes)

    def measure(self, prefix=""):
        """One sample of each step whose name starts with `prefix`, in both modes."""
        for name, step in self.steps.items():
            if not name.startswith(prefix):
                continue
            for jit in (False, True):
                self.samples.setdefault((name, jit), []).append(step.seconds(jit))

    def seconds(self, name, jit=None):
        if jit is None:
            return min(self.seconds(name, False), self.seconds(name, True))
        return statistics.median(self.samples[(name, jit)])

    @staticmethod
    def flops(shapes):
        return sum(2.0 * nb * m * k * n * count for _, nb, m, k, n, _, _, count in shapes)


_SQUARE = {}


def square_peak(size=2048, repeats=8, dtype="float32"):
    """GFLOP/s of `repeats` size^2 matmuls in one tf.function (float32, or bfloat16 for comparison)."""
    if dtype not in _SQUARE:
        a = tf.cast(tf.random.normal((size, size)), dtype)
        bs = [tf.cast(tf.random.normal((size, size)), dtype) for _ in range(repeats)]
        _SQUARE[dtype] = tf.function(lambda: [tf.matmul(a, b) for b in bs])
        np.asarray(tf.cast(_SQUARE[dtype]()[0], tf.float32))
    start = time.perf_counter()
    np.asarray(tf.cast(_SQUARE[dtype]()[-1], tf.float32))
    return 2.0 * size ** 3 * repeats / (time.perf_counter() - start)


# ------------------------------------------------------------------------------------------- speed
def speed_main(argv):
    del argv
    absl_logging.set_verbosity(absl_logging.ERROR)
    config = AlbertConfig.preset(FLAGS.preset)
    t, p = FLAGS.seq_length, FLAGS.num_predictions
    batch_sizes = [int(b) for b in FLAGS.batch_sizes]
    model, have = common.cpu_description()
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, keras-hub {keras_hub.__version__}; "
          f"{os.cpu_count()} CPU cores: {model}")
    print(f"CPU flags: {' '.join(have) or '-'}")
    print(f"Shape: {FLAGS.preset} (H={config.hidden_size}, L={config.num_hidden_layers}, E={config.embedding_size}, "
          f"V={config.vocab_size}), seq {t}, {p} MLM positions; batches {batch_sizes}; medians of {FLAGS.rounds} "
          f"rounds")
    load_before = common.load_average()
    print(f"Load average before: {load_before}")

    makers = {"albert_tf": lambda: Ours(config), "albert_tf-full": lambda: Ours(config, heads_only=False),
              "albert_tf-bf16": lambda: Ours(config, policy="mixed_bfloat16"), "keras-hub": lambda: KerasHub(config),
              "keras-hub-bf16": lambda: KerasHub(config, policy="mixed_bfloat16")}
    unknown = [name for name in FLAGS.sides if name not in makers]
    if unknown:
        raise app.UsageError(f"--sides: unknown {', '.join(unknown)}; known: {', '.join(makers)}")
    sides = [makers[name]() for name in makers if name in FLAGS.sides]
    configs = {}  # (kind, side, mode, batch) -> (fn, batch, calls)
    for side in sides:
        for mode in FLAGS.modes:
            jit = mode == "xla"
            for b in batch_sizes:
                step = make_train_step(side, jit)
                batch = make_batch(config, b, t, p)
                start = time.perf_counter()
                np.asarray(step(batch))
                print(f"  {side.name} train b={b} {mode}: trace + compile + first step "
                      f"{time.perf_counter() - start:.1f} s")
                configs[("train", side.name, mode, b)] = (step, batch, FLAGS.train_steps)
            if side.name == "albert_tf-full":
                continue  # the same encoder as albert_tf's at inference
            infer = make_infer_step(side, jit)
            single = make_batch(config, 1, t, p)
            np.asarray(infer(single))
            configs[("infer", side.name, mode, 1)] = (infer, single, FLAGS.latency_calls)
    work_dir = None
    exported = [side for side in sides if side.name in ("albert_tf", "albert_tf-bf16")] if FLAGS.savedmodel else []
    for side in exported:
        work_dir = work_dir or tempfile.mkdtemp(prefix="bench_model_")
        saved = SavedModelSide(side.encoder, os.path.join(work_dir, side.name))
        single = make_batch(config, 1, t, p)
        np.asarray(saved(single))
        configs[("infer", side.name, "savedmodel", 1)] = (saved, single, FLAGS.latency_calls)

    peak = MatmulPeak()
    train_shapes = {b: step_matmuls(config, b, t, p, train=True) for b in batch_sizes}
    infer_shapes = step_matmuls(config, 1, t, p, train=False)
    narrow_shapes = {b: step_matmuls(config, b, t, p, train=True, heads_only=True) for b in batch_sizes}
    for b in batch_sizes:
        peak.add(f"train/b{b}", train_shapes[b])
        if any(getattr(side, "heads_only", False) for side in sides):
            peak.add(f"train/heads_only/b{b}", narrow_shapes[b])
    peak.add("infer/b1", infer_shapes)
    peak.steps["infer/chain/b1"] = ForwardChain(config, t)
    squares, bf16_squares, samples = [], [], {key: [] for key in configs}
    for kind in ("train", "infer"):  # batch-1 calls are timed apart from the long training steps
        for _ in range(FLAGS.rounds):
            squares.append(square_peak())
            bf16_squares.append(square_peak(dtype="bfloat16"))
            peak.measure(kind)
            for key, (fn, batch, calls) in configs.items():
                if key[0] == kind:
                    samples[key].append(seconds_per_call(fn, batch, calls))
    if work_dir:
        shutil.rmtree(work_dir, ignore_errors=True)
    median = {key: statistics.median(v) for key, v in samples.items()}
    square = statistics.median(squares)

    print(f"Load average after: {common.load_average()}")
    print(f"float32 matmul, 2048^2 square (tf.function): {square / 1e9:.0f} GFLOP/s; the same in bfloat16: "
          f"{statistics.median(bf16_squares) / 1e9:.0f} GFLOP/s")
    results = {"load_average_before": load_before, "square_peak_gflops": square / 1e9,
               "square_bf16_gflops": statistics.median(bf16_squares) / 1e9, "figures": {}}
    print()
    print("Training step (forward + backward + clipping + LAMB), medians. 'of peak': the model's matmul-only time")
    print("(every position of every layer) / step time; 'of own': the same for the matmuls the side computes")
    print("(albert_tf's last layer at the heads' positions only). The -bf16 sides' fractions are of the float32")
    print("matmuls' time; their last column compares albert_tf-bf16 with keras-hub-bf16, and each with its own")
    print("float32 side ('f32'):")
    print(f"{'batch':>5s} {'side':14s} {'mode':6s} {'s/step':>8s} {'ex/s':>7s} {'model GFLOP/s':>13s} "
          f"{'of peak':>8s} {'of own':>7s} {'of 2048^2':>9s} {'vs keras-hub':>18s}")
    for b in batch_sizes:
        flops = MatmulPeak.flops(train_shapes[b])
        peak_seconds = peak.seconds(f"train/b{b}")
        for side in sides:
            own = f"train/heads_only/b{b}" if getattr(side, "heads_only", False) else f"train/b{b}"
            own_seconds = peak.seconds(own)
            for mode in FLAGS.modes:
                s = median[("train", side.name, mode, b)]
                bf16 = side.name.endswith("-bf16")
                other = median.get(("train", "keras-hub-bf16" if bf16 else "keras-hub", mode, b))
                ratio = f"x{other / s:.3f}" if other and not side.name.startswith("keras-hub") else ""
                float32 = median.get(("train", side.name.removesuffix("-bf16"), mode, b)) if bf16 else None
                if float32:
                    ratio = (ratio + " " if ratio else "") + f"x{float32 / s:.3f} f32"
                print(f"{b:5d} {side.name:14s} {mode:6s} {s:8.3f} {b / s:7.2f} {flops / s / 1e9:13.0f} "
                      f"{peak_seconds / s:8.3f} {own_seconds / s:7.3f} {flops / square / s:9.3f} {ratio:>18s}")
                results["figures"][f"train/{side.name}/{mode}/b{b}"] = {
                    "seconds": s, "examples_per_second": b / s, "fraction_of_peak": peak_seconds / s,
                    "fraction_of_own_peak": own_seconds / s, "fraction_of_square_peak": flops / square / s,
                    "keras_hub_ratio": (other / s) if other else None,
                    "float32_ratio": (float32 / s) if float32 else None}
        print(f"      the model's matmuls alone: {flops / 1e9:.0f} GFLOP in {peak_seconds:.3f} s "
              f"(tf.function: {peak.seconds(f'train/b{b}', False):.3f} s, XLA: {peak.seconds(f'train/b{b}', True):.3f} s; "
              f"{flops / square:.3f} s at the 2048^2 rate)")
        if f"train/heads_only/b{b}" in peak.steps:
            narrow = MatmulPeak.flops(narrow_shapes[b])
            print(f"      with the last layer at the heads' {1 + p} positions: {narrow / 1e9:.0f} GFLOP "
                  f"({narrow / flops:.3f} of the model's) in {peak.seconds(f'train/heads_only/b{b}'):.3f} s")
    print()
    flops = MatmulPeak.flops(infer_shapes)
    peak_seconds = peak.seconds("infer/b1")
    print(f"Batch-1 inference, seq {t} (encoder forward, {flops / 1e9:.1f} GFLOP): its matmuls alone "
          f"take {1000 * peak_seconds:.1f} ms ({1000 * flops / square:.1f} ms at the 2048^2 rate)")
    chain_seconds = peak.seconds("infer/chain/b1")
    print(f"  the same matmuls in their dependency order (ForwardChain; tf.function "
          f"{1000 * peak.seconds('infer/chain/b1', False):.1f} ms, XLA {1000 * peak.seconds('infer/chain/b1', True):.1f}"
          f" ms): {1000 * chain_seconds:.1f} ms = {chain_seconds / peak_seconds:.3f}x the peak time")
    results["infer_peak_seconds"] = peak_seconds
    results["infer_chain_seconds"] = chain_seconds
    print(f"{'side':14s} {'mode':10s} {'ms':>7s} {'x peak time':>11s} {'x chain':>8s} {'x 2048^2 time':>13s} "
          f"{'relative':>13s}")
    for key in sorted(k for k in median if k[0] == "infer"):
        _, name, mode, _ = key
        ms = 1000 * median[key]
        rel = ""
        if mode == "savedmodel":
            rel = f"x{median[key] / median[('infer', name, 'graph', 1)]:.3f} graph"
        elif name.endswith("-bf16") and ("infer", name.removesuffix("-bf16"), mode, 1) in median:
            rel = f"x{median[('infer', name.removesuffix('-bf16'), mode, 1)] / median[key]:.3f} f32"
        print(f"{name:14s} {mode:10s} {ms:7.1f} {median[key] / peak_seconds:11.3f} "
              f"{median[key] / chain_seconds:8.3f} {median[key] / (flops / square):13.3f} {rel:>13s}")
        results["figures"][f"infer/{name}/{mode}/b1"] = {"seconds": median[key],
                                                         "of_peak_time": median[key] / peak_seconds,
                                                         "of_chain_time": median[key] / chain_seconds}
    common.write_result(results, FLAGS.output_json)


# -------------------------------------------------------------------------------------------- runs
def define_runs_flags():
    """The flags of `runs`."""
    flags.DEFINE_string("runs_json", os.path.join(common.FIGURES_DIR, "bench_model.json"),
                        "The stored `speed` runs.")

TRAIN_SIDES = ("albert_tf", "albert_tf-full", "albert_tf-bf16", "keras-hub", "keras-hub-bf16")
INFER_COLUMNS = (("albert_tf", "graph"), ("albert_tf", "xla"), ("albert_tf", "savedmodel"), ("keras-hub", "graph"),
                 ("keras-hub", "xla"), ("albert_tf-bf16", "graph"), ("albert_tf-bf16", "savedmodel"),
                 ("keras-hub-bf16", "graph"))


def _batch_sizes(figures):
    return sorted({int(key.rsplit("/b", 1)[1]) for key in figures if key.startswith("train/")})


def _cell(value, fmt):
    return "–" if value is None else format(value, fmt)


def training_table(runs):
    """Markdown lines: one row per run, batch size and side that has a training figure."""
    lines = ["| run | batch | side | graph s/step | of peak | × keras-hub | XLA s/step | of peak | × keras-hub "
             "| × float32 (graph) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for number, run in enumerate(runs, 1):
        figures = run["figures"]
        for batch in _batch_sizes(figures):
            for side in TRAIN_SIDES:
                graph, xla = (figures.get(f"train/{side}/{mode}/b{batch}") for mode in ("graph", "xla"))
                if graph is None and xla is None:
                    continue
                baseline = "keras-hub-bf16" if side.endswith("-bf16") else "keras-hub"
                cells = []
                for mode, figure in (("graph", graph), ("xla", xla)):
                    figure = figure or {}
                    compared = not side.startswith("keras-hub") and f"train/{baseline}/{mode}/b{batch}" in figures
                    cells += [_cell(figure.get("seconds"), ".3f"), _cell(figure.get("fraction_of_peak"), ".3f"),
                              _cell(figure.get("keras_hub_ratio") if compared else None, ".3f")]
                ratio = (graph or {}).get("float32_ratio") if side.endswith("-bf16") else None
                lines.append(f"| {number} | {batch} | {side} | " + " | ".join(cells) + f" | {_cell(ratio, '.3f')} |")
    return lines


def _infer_peak_ms(run):
    if run.get("infer_peak_seconds"):
        return 1000 * run["infer_peak_seconds"]
    for key, figure in run["figures"].items():
        if key.startswith("infer/") and figure.get("of_peak_time"):
            return 1000 * figure["seconds"] / figure["of_peak_time"]
    return None


def inference_table(runs):
    """Markdown lines: one row per run with batch-1 figures, each cell `ms (x matmul-only time)`."""
    heads = [f"{side} {mode}" for side, mode in INFER_COLUMNS]
    lines = ["| run | matmuls alone ms | chained ms | " + " | ".join(heads) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in heads) + " |"]
    for number, run in enumerate(runs, 1):
        figures = run["figures"]
        if not any(key.startswith("infer/") for key in figures):
            continue
        peak = _infer_peak_ms(run)
        chain = run.get("infer_chain_seconds")
        cells = [_cell(peak, ".1f"), "–" if chain is None else f"{1000 * chain:.1f} ({1000 * chain / peak:.3f}×)"]
        for side, mode in INFER_COLUMNS:
            figure = figures.get(f"infer/{side}/{mode}/b1")
            if figure is None or figure.get("seconds") is None:
                cells.append("–")
            else:
                cells.append(f"{1000 * figure['seconds']:.1f} ({1000 * figure['seconds'] / peak:.3f}×)")
        lines.append(f"| {number} | " + " | ".join(cells) + " |")
    return lines


def runs_main(argv):
    del argv
    with open(FLAGS.runs_json, encoding="utf-8") as f:
        stored = json.load(f)
    runs = stored.get("runs", [stored])
    print("\n".join(training_table(runs)))
    print()
    print("\n".join(inference_table(runs)))


# ------------------------------------------------------------------------------------------- remat
def define_remat_flags():
    """The flags of `remat`."""
    flags.DEFINE_string("preset", "large_v2", "AlbertConfig preset.")
    flags.DEFINE_integer("batch_size", 8, "Examples per step.")
    flags.DEFINE_integer("seq_length", 512, "Sequence length.")
    flags.DEFINE_integer("num_predictions", 20, "Masked-LM positions per example.")
    flags.DEFINE_integer("steps", 1, "Timed steps after the warm-up step.")
    flags.DEFINE_bool("jit_compile", False, "Compile the step with XLA.")
    common.define_output_json("bench_remat")
    flags.DEFINE_bool("child_remat", None, "(internal) run one setting in this process and print its JSON.")


def _rss_mb():
    with open("/proc/self/statm", encoding="utf-8") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run_one(remat):
    """One setting in this process: {"remat", "baseline_mb", "peak_mb", "step_seconds", "first_step_seconds"}."""
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


def remat_main(argv):
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
        args = common.module_command(
            "bench.bench_model", "remat", f"--child_remat={remat}", f"--preset={FLAGS.preset}",
            f"--batch_size={FLAGS.batch_size}", f"--seq_length={FLAGS.seq_length}",
            f"--num_predictions={FLAGS.num_predictions}", f"--steps={FLAGS.steps}",
            f"--jit_compile={FLAGS.jit_compile}")
        proc = subprocess.run(args, capture_output=True, text=True, check=False, env=common.child_env())
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
    common.write_result({"load_average_before": load_before, "remat_off": off, "remat_on": on}, FLAGS.output_json,
                        "bench_remat")


if __name__ == "__main__":
    common.run_subcommands({"speed": common.absl_subcommand(define_speed_flags, speed_main),
                            "runs": common.absl_subcommand(define_runs_flags, runs_main),
                            "remat": common.absl_subcommand(define_remat_flags, remat_main)}, "speed")
