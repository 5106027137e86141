"""`AlbertForSquad`: extractive question answering heads of the original release (SQuAD v1.1 and v2.0).

v1.1 (`version_2=False`), as the original's `create_v1_model`: one dense layer [H -> 2] over every position of the
sequence output gives the start and end logits (TF1 names `cls/squad/output_weights` [2, H], `cls/squad/output_bias`
[2]); the loss is the mean of the start and end cross-entropies against the gold positions.

v2.0 (`version_2=True`), as the original's `create_v2_model` (XLNet's answer verifier):

* start: dense [H -> 1] per position (`start_logits/dense`), positions with `p_mask` = 1 set to -1e30, log-softmax;
* end, conditioned on a start: each position's representation concatenated with the start position's, dense
  [2H -> H] + tanh (`end_logits/dense_0`), LayerNorm (`end_logits/LayerNorm`, epsilon 1e-12), dense [H -> 1]
  (`end_logits/dense_1`), masked, log-softmax. In training the gold start is used; at inference a beam: the
  `start_n_top` best starts, and for each the `end_n_top` best ends;
* answerability: the [CLS] representation and the start-probability-weighted sum of the representations,
  concatenated as [start, cls], dense [2H -> H] + tanh (`answer_class/dense_0`), dropout (`dropout_prob`), dense
  [H -> 1] without bias (`answer_class/dense_1`) -> `cls_logits` (high = unanswerable);
* loss: (start + end cross-entropy) / 2 + 0.5 x the sigmoid cross-entropy of `cls_logits` against `is_impossible`.

The masking and softmaxes run in float32 under mixed precision. Losses are normalised by the global batch (summed
over replicas), so a distributed step equals a single-device step on the same batch; gradients are clipped to global
norm 1.0 across replicas (`training.clip_gradients_across_replicas`), as the original.
"""

import dataclasses
import logging
import os
import time

import keras
import tensorflow as tf
from keras import ops

from albert_tf import checkpoints, distribution, export, optimization, squad, squad_evaluation, training
from albert_tf.layers import truncated_normal
from albert_tf.modeling import _TaskModel, dummy_inputs
from albert_tf.tokenization import FullTokenizer

_NEG = 1e30


def default_p_mask(input_mask, segment_ids):
    """The original's `p_mask` for `[CLS] question [SEP] context [SEP]` inputs: 0 on [CLS] and the context pieces,
    1 on the question, both [SEP]s and padding (the last real token is the final [SEP])."""
    input_mask = tf.cast(input_mask, tf.int32)
    segment_ids = tf.cast(segment_ids, tf.int32)
    length = tf.reduce_sum(input_mask, axis=1, keepdims=True)
    positions = tf.range(tf.shape(input_mask)[1])[None, :]
    context = (segment_ids == 1) & (input_mask == 1) & (positions < length - 1)
    return tf.where(context | (positions == 0), 0, 1)


def _masked(logits, p_mask):
    p_mask = tf.cast(p_mask, tf.float32)
    return logits * (1.0 - p_mask) - _NEG * p_mask


def _mean_of_global(values):
    """Sum of `values` over this replica divided by the global number of values (so summing replicas gives the
    mean over the global batch)."""
    count = training.global_sum(tf.cast(tf.size(values), tf.float32))
    return tf.reduce_sum(values) / count


def _logs(results):
    wrap = getattr(training, "multi_worker_logs", None)
    return wrap(results) if wrap is not None else results


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertForSquad(_TaskModel):
    """ALBERT with the original's SQuAD head (see module docstring).

    Args:
      config: an `AlbertConfig` (or its dict).
      version_2: the v2.0 head (answerability, beam over start/end) instead of v1.1's start/end logits.
      start_n_top, end_n_top: v2.0 beam sizes at inference.
      dropout_prob: v2.0: dropout in the answerability layer (v1.1 has no head dropout, as the original).

    Call args:
      inputs: dict with int `input_ids`, `input_mask`, `segment_ids` [B, T]; v2.0 also `p_mask` [B, T] (derived
        from `input_mask`/`segment_ids` when absent, see `default_p_mask`) and, to get the training outputs,
        `start_positions` [B] (the gold start the end is conditioned on).
    Returns (float32, int32 indices):
      v1.1: `start_logits`, `end_logits` [B, T].
      v2.0 with `start_positions`: `start_log_probs`, `end_log_probs` [B, T], `cls_logits` [B].
      v2.0 otherwise: `start_log_probs` [B, T], `start_top_log_probs`/`start_top_index` [B, start_n_top],
        `end_top_log_probs`/`end_top_index` [B, start_n_top * end_n_top] (ends of start i at i * end_n_top + j),
        `cls_logits` [B].

    `fit` takes batches of feature dicts (no separate labels): the inputs plus `start_positions`,
    `end_positions` and (v2.0) `is_impossible`; it reports `loss`, `start_loss`, `end_loss` (and `cls_loss`).
    """

    def __init__(self, config, version_2=False, start_n_top=5, end_n_top=5, dropout_prob=0.1, **kwargs):
        super().__init__(config, dropout_prob=dropout_prob, **kwargs)
        self.version_2 = bool(version_2)
        self.start_n_top = int(start_n_top)
        self.end_n_top = int(end_n_top)
        c = self.config
        init = truncated_normal(c.initializer_range)
        dtype = self.dtype_policy
        if not self.version_2:
            self.output_layer = keras.layers.Dense(2, kernel_initializer=init, dtype=dtype, name="squad_output")
        else:
            self.start_dense = keras.layers.Dense(1, kernel_initializer=init, dtype=dtype, name="start_dense")
            self.end_dense_0 = keras.layers.Dense(c.hidden_size, activation="tanh", kernel_initializer=init,
                                                  dtype=dtype, name="end_dense_0")
            self.end_layer_norm = keras.layers.LayerNormalization(epsilon=1e-12, dtype=dtype, name="end_LayerNorm")
            self.end_dense_1 = keras.layers.Dense(1, kernel_initializer=init, dtype=dtype, name="end_dense_1")
            self.answer_dense_0 = keras.layers.Dense(c.hidden_size, activation="tanh", kernel_initializer=init,
                                                     dtype=dtype, name="answer_class_dense_0")
            self.answer_dense_1 = keras.layers.Dense(1, use_bias=False, kernel_initializer=init, dtype=dtype,
                                                     name="answer_class_dense_1")
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.start_loss_tracker = keras.metrics.Mean(name="start_loss")
        self.end_loss_tracker = keras.metrics.Mean(name="end_loss")
        self.cls_loss_tracker = keras.metrics.Mean(name="cls_loss") if self.version_2 else None

    def _head_args(self):
        return {"version_2": self.version_2, "start_n_top": self.start_n_top, "end_n_top": self.end_n_top}

    def build(self, inputs_shape):
        self.albert.build(inputs_shape)
        h = self.config.hidden_size
        if not self.version_2:
            self.output_layer.build((None, None, h))
        else:
            self.start_dense.build((None, None, h))
            self.end_dense_0.build((None, None, 2 * h))
            self.end_layer_norm.build((None, None, h))
            self.end_dense_1.build((None, None, h))
            self.answer_dense_0.build((None, 2 * h))
            self.answer_dense_1.build((None, h))
        self.built = True

    # -- forward ----------------------------------------------------------------------------------------------------

    def call(self, inputs, training=None):
        encoder_inputs = {k: inputs[k] for k in ("input_ids", "input_mask", "segment_ids") if k in inputs}
        sequence = self.albert(encoder_inputs, training=training)["sequence_output"]
        if not self.version_2:
            logits = ops.cast(self.output_layer(sequence), "float32")
            return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}
        return self._v2_head(sequence, inputs, training)

    def _end_log_probs(self, sequence, start_features, p_mask):
        """End log-probs [B, K, T] for K start representations [B, K, H] (K = 1 in training)."""
        seq_len = tf.shape(sequence)[1]
        num_starts = tf.shape(start_features)[1]
        tokens = tf.tile(sequence[:, None, :, :], tf.stack([1, num_starts, 1, 1]))
        starts = tf.tile(start_features[:, :, None, :], tf.stack([1, 1, seq_len, 1]))
        hidden = self.end_dense_0(tf.concat([tokens, starts], axis=-1))
        hidden = self.end_layer_norm(hidden)
        logits = tf.cast(tf.squeeze(self.end_dense_1(hidden), -1), tf.float32)
        return tf.nn.log_softmax(_masked(logits, p_mask[:, None, :]), axis=-1)

    def _v2_head(self, sequence, inputs, training):
        p_mask = inputs.get("p_mask")
        if p_mask is None:
            p_mask = default_p_mask(inputs["input_mask"], inputs["segment_ids"])
        p_mask = tf.cast(p_mask, tf.float32)
        start_logits = _masked(tf.cast(tf.squeeze(self.start_dense(sequence), -1), tf.float32), p_mask)
        start_log_probs = tf.nn.log_softmax(start_logits, axis=-1)
        outputs = {"start_log_probs": start_log_probs}

        if "start_positions" in inputs:
            start_positions = tf.reshape(tf.cast(inputs["start_positions"], tf.int32), [-1])
            start_features = tf.gather(sequence, start_positions[:, None], batch_dims=1)  # [B, 1, H]
            outputs["end_log_probs"] = self._end_log_probs(sequence, start_features, p_mask)[:, 0, :]
        else:
            seq_len = tf.shape(sequence)[1]
            k_start = tf.minimum(self.start_n_top, seq_len)
            k_end = tf.minimum(self.end_n_top, seq_len)
            start_top_log_probs, start_top_index = tf.math.top_k(start_log_probs, k=k_start)
            start_features = tf.gather(sequence, start_top_index, batch_dims=1)  # [B, k, H]
            end_log_probs = self._end_log_probs(sequence, start_features, p_mask)  # [B, k, T]
            end_top_log_probs, end_top_index = tf.math.top_k(end_log_probs, k=k_end)
            batch = tf.shape(sequence)[0]
            outputs.update(
                start_top_log_probs=start_top_log_probs, start_top_index=start_top_index,
                end_top_log_probs=tf.reshape(end_top_log_probs, tf.stack([batch, -1])),
                end_top_index=tf.reshape(end_top_index, tf.stack([batch, -1])))

        cls_feature = sequence[:, 0, :]
        start_probs = tf.cast(tf.nn.softmax(start_logits, axis=-1), sequence.dtype)
        start_feature = tf.einsum("bt,bth->bh", start_probs, sequence)
        hidden = self.answer_dense_0(tf.concat([start_feature, cls_feature], axis=-1))
        hidden = self.dropout(hidden, training=training)
        outputs["cls_logits"] = tf.cast(tf.squeeze(self.answer_dense_1(hidden), -1), tf.float32)
        return outputs

    # -- losses and Keras steps -----------------------------------------------------------------------------------

    def compute_losses(self, outputs, features):
        """Per-example (start, end, cls or None) losses [B] of the original's objective."""
        start_positions = tf.reshape(tf.cast(features["start_positions"], tf.int32), [-1])
        end_positions = tf.reshape(tf.cast(features["end_positions"], tf.int32), [-1])
        if not self.version_2:
            start = tf.nn.sparse_softmax_cross_entropy_with_logits(start_positions, outputs["start_logits"])
            end = tf.nn.sparse_softmax_cross_entropy_with_logits(end_positions, outputs["end_logits"])
            return start, end, None
        start = -tf.gather(outputs["start_log_probs"], start_positions[:, None], batch_dims=1)[:, 0]
        end = -tf.gather(outputs["end_log_probs"], end_positions[:, None], batch_dims=1)[:, 0]
        labels = tf.reshape(tf.cast(features["is_impossible"], tf.float32), [-1])
        cls = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=outputs["cls_logits"])
        return start, end, cls

    @staticmethod
    def total_loss(start, end, cls):
        """(start + end) / 2 (+ 0.5 x cls) as a sum over this replica / global batch size."""
        loss = (_mean_of_global(start) + _mean_of_global(end)) / 2.0
        if cls is not None:
            loss += 0.5 * _mean_of_global(cls)
        return loss

    @property
    def metrics(self):
        trackers = [self.loss_tracker, self.start_loss_tracker, self.end_loss_tracker]
        return trackers + ([self.cls_loss_tracker] if self.cls_loss_tracker is not None else [])

    def _update(self, start, end, cls):
        per_example = (start + end) / 2.0 + (0.5 * cls if cls is not None else 0.0)
        self.loss_tracker.update_state(per_example)
        self.start_loss_tracker.update_state(start)
        self.end_loss_tracker.update_state(end)
        if cls is not None:
            self.cls_loss_tracker.update_state(cls)
        return {m.name: m.result() for m in self.metrics}

    def _model_inputs(self, data):
        if isinstance(data, tuple):
            data = data[0]
        keep = ["input_ids", "input_mask", "segment_ids", "p_mask"]
        if self.version_2:
            keep.append("start_positions")
        return data, {k: data[k] for k in keep if k in data}

    def train_step(self, data):
        features, inputs = self._model_inputs(data)
        with tf.GradientTape() as tape:
            outputs = self(inputs, training=True)
            start, end, cls = self.compute_losses(outputs, features)
            loss = self.total_loss(start, end, cls)
            scaled = self.optimizer.scale_loss(loss)
        variables = self.trainable_variables
        grads = tape.gradient(scaled, variables)
        # The pooler is not used by the SQuAD heads: its gradient is None and it is left alone (as TF1 did).
        used = [(g, v) for g, v in zip(grads, variables) if g is not None]
        grads = training.clip_gradients_across_replicas([g for g, _ in used], self.clip_norm,
                                                        training.loss_scale_of(self.optimizer))
        self.optimizer.apply(grads, [v for _, v in used])
        results = self._update(start, end, cls)
        results["learning_rate"] = tf.cast(self.optimizer.learning_rate, tf.float32)
        return _logs(results)

    def test_step(self, data):
        features, inputs = self._model_inputs(data)
        outputs = self(inputs, training=False)
        return _logs(self._update(*self.compute_losses(outputs, features)))

    def predict_step(self, data):
        features, inputs = self._model_inputs(data)
        inputs.pop("start_positions", None)
        outputs = dict(self(inputs, training=False))
        if "unique_ids" in features:
            outputs["unique_ids"] = features["unique_ids"]
        return outputs

    # -- checkpoints --------------------------------------------------------------------------------------------------

    def head_entries(self):
        """The head's weights under the original's TF1 names (see module docstring)."""
        from albert_tf.checkpoints.original import Entry  # pylint: disable=import-outside-toplevel

        h = self.config.hidden_size
        if not self.version_2:
            dense = self.output_layer
            return [Entry("cls/squad/output_weights", dense.kernel, (2, h), transpose=True, required=False),
                    Entry("cls/squad/output_bias", dense.bias, (2,), required=False)]

        def dense(name, layer, in_size, out_size, bias=True):
            entries = [Entry(f"{name}/kernel", layer.kernel, (in_size, out_size), required=False)]
            if bias:
                entries.append(Entry(f"{name}/bias", layer.bias, (out_size,), required=False))
            return entries

        return (dense("start_logits/dense", self.start_dense, h, 1)
                + dense("end_logits/dense_0", self.end_dense_0, 2 * h, h)
                + [Entry("end_logits/LayerNorm/gamma", self.end_layer_norm.gamma, (h,), required=False),
                   Entry("end_logits/LayerNorm/beta", self.end_layer_norm.beta, (h,), required=False)]
                + dense("end_logits/dense_1", self.end_dense_1, h, 1)
                + dense("answer_class/dense_0", self.answer_dense_0, 2 * h, h)
                + dense("answer_class/dense_1", self.answer_dense_1, h, 1, bias=False))


# ------------------------------------------------------------------------------------------------------------------
# Fine-tuning, prediction, evaluation and export runs (what `run_squad.py` drives).

@dataclasses.dataclass
class SquadRunParams(training.RuntimeParams):
    """Everything a SQuAD run needs; the fields follow `run_squad.py`'s flags (the original's names)."""

    albert_config: object
    spm_model_file: str
    output_dir: str
    version_2_with_negative: bool = False
    train_file: str = None
    predict_file: str = None
    train_feature_file: str = None
    predict_feature_file: str = None
    init_checkpoint: str = None
    do_lower_case: bool = True
    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    do_train: bool = False
    do_predict: bool = False
    train_batch_size: int = 32
    predict_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    iterations_per_loop: int = 1000
    n_best_size: int = 20
    max_answer_length: int = 30
    start_n_top: int = 5
    end_n_top: int = 5
    dropout_prob: float = 0.1
    null_score_diff_threshold: float = None
    export_dir: str = None


def check_params(params):
    """Raises ValueError (naming the flag) for settings that cannot work, before any data is read."""
    if not (params.do_train or params.do_predict or params.export_dir):
        raise ValueError("At least one of --do_train, --do_predict or --export_dir must be given.")
    if params.do_train and not params.train_file:
        raise ValueError("--do_train needs --train_file")
    if params.do_predict and not params.predict_file:
        raise ValueError("--do_predict needs --predict_file")
    if params.max_seq_length > params.albert_config.max_position_embeddings:
        raise ValueError(f"--max_seq_length {params.max_seq_length} exceeds max_position_embeddings "
                         f"{params.albert_config.max_position_embeddings} of the albert config")
    squad.check_lengths(params.max_seq_length, params.max_query_length, params.doc_stride)
    if params.version_2_with_negative and (params.start_n_top > params.max_seq_length
                                           or params.end_n_top > params.max_seq_length):
        raise ValueError("--start_n_top and --end_n_top must not exceed --max_seq_length")


def _feature_file(path, output_dir, name):
    return path or os.path.join(output_dir, name)


def _build_model(params, strategy):
    with strategy.scope():
        model = AlbertForSquad(params.albert_config, version_2=params.version_2_with_negative,
                               start_n_top=params.start_n_top, end_n_top=params.end_n_top,
                               dropout_prob=params.dropout_prob)
        model(dummy_inputs(seq_length=4), training=False)
    return model


def _train(params, model, strategy, tokenizer, write_dir, outcome):
    feature_file = _feature_file(params.train_feature_file, params.output_dir, "train.tf_record")
    train = squad.build_or_load_features(params.train_file, feature_file, tokenizer, params.max_seq_length,
                                         params.doc_stride, params.max_query_length, is_training=True,
                                         shuffle_seed=params.seed)
    # As the original: steps from the number of questions (not windows), warmup a proportion of them.
    num_train_steps = int(len(train.examples) / params.train_batch_size * params.num_train_epochs)
    if num_train_steps < 1:
        raise ValueError(f"{len(train.examples)} training questions at --train_batch_size "
                         f"{params.train_batch_size} x --num_train_epochs {params.num_train_epochs} make no step")
    num_warmup_steps = int(num_train_steps * params.warmup_proportion)
    outcome.update(train_examples=len(train.examples), train_features=train.num_features,
                   num_train_steps=num_train_steps, train_read_stats=dataclasses.asdict(train.read_stats),
                   train_conversion=train.conversion)
    logging.info("Training on %d questions (%d windows) for %d steps (%d warmup)", len(train.examples),
                 train.num_features, num_train_steps, num_warmup_steps)
    with strategy.scope():
        optimizer = optimization.create_optimizer("adamw", params.learning_rate, num_train_steps, num_warmup_steps)
        model.compile(optimizer=optimizer, jit_compile=params.jit_compile)
        model.optimizer.build(model.trainable_variables)

        def initialize():
            if params.init_checkpoint:
                logging.info("Initialised from %s", checkpoints.load_checkpoint(model, params.init_checkpoint))

        manager, done = training.restore_or_initialize(model, write_dir, params.keep_checkpoint_max, initialize)
    if done >= num_train_steps:
        outcome["step"] = done
        return
    if params.train_batch_size % strategy.num_replicas_in_sync:
        raise ValueError(f"--train_batch_size {params.train_batch_size} is not divisible by the "
                         f"{strategy.num_replicas_in_sync} replicas")

    def dataset_fn(context):
        batch = context.get_per_replica_batch_size(params.train_batch_size)
        dataset = squad.training_dataset(feature_file, params.max_seq_length, batch, seed=params.seed,
                                         input_context=context)
        return dataset.skip(done) if done else dataset

    dataset = strategy.distribute_datasets_from_function(dataset_fn)
    steps, seconds = training.fit_to_step(model, dataset, manager, num_train_steps, params.save_checkpoints_steps,
                                          params.iterations_per_loop, log_dir=os.path.join(write_dir, "train"),
                                          log_every=params.log_every)
    outcome.update(step=int(model.optimizer.iterations.numpy()), train_seconds=seconds,
                   train_examples_per_second=steps * params.train_batch_size / max(seconds, 1e-9))


def _restore_for_prediction(params, model):
    """Weights for a run without training: the latest checkpoint in output_dir, else --init_checkpoint."""
    if tf.train.latest_checkpoint(params.output_dir):
        result = checkpoints.load_checkpoint(model, params.output_dir)
    elif params.init_checkpoint:
        result = checkpoints.load_checkpoint(model, params.init_checkpoint)
    else:
        raise ValueError(f"nothing to predict with: no checkpoint in --output_dir {params.output_dir} and no "
                         "--init_checkpoint")
    missing_head = [name for name in result.missing if not name.startswith("bert/") and "/albert/" not in name]
    if missing_head:
        logging.warning("The SQuAD head is not in the checkpoint (%s...): its weights are random, predictions will "
                        "be meaningless", missing_head[0])
    logging.info("Predicting with %s", result)


def predict_raw(model, feature_file, num_features, max_seq_length, batch_size, version_2):
    """Runs the model over a prediction feature file; returns the `RawResult`s (v1.1) or `RawResultV2`s."""
    dataset = squad.prediction_dataset(feature_file, max_seq_length, batch_size, num_features=num_features)
    if getattr(model, "steps_per_execution", 1) != 1:  # set by training; one batch per call here
        model.steps_per_execution = 1
        model.make_predict_function(force=True)
    outputs = model.predict(dataset, verbose=0)
    unique_ids = outputs["unique_ids"]
    if version_2:
        return squad.raw_results_v2(unique_ids, outputs)
    return squad.raw_results_v1(unique_ids, outputs["start_logits"], outputs["end_logits"])


def _has_gold(path):
    data = squad.load_squad_json(path)
    return data, any(qa.get("answers") or qa.get("is_impossible")
                     for article in data["data"] for p in article["paragraphs"] for qa in p["qas"])


def evaluate_predictions(dataset, version_2, predictions, null_odds=None, best_non_null=None):
    """Official scores of a prediction run (see `run_squad.py`'s help for the v2.0 keys)."""
    if not version_2:
        return squad_evaluation.evaluate_v1(dataset, predictions)
    results = dict(squad_evaluation.evaluate_v2(dataset, predictions))
    tuned = squad_evaluation.evaluate_v2(dataset, best_non_null, na_probs=null_odds)
    for key in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"):
        results[f"dev_tuned_{key}"] = tuned[key]
    heldout = squad_evaluation.heldout_threshold_scores(dataset, best_non_null, null_odds)
    for key, value in heldout.items():
        results[f"heldout_{key}"] = value
    return results


def _predict(params, model, tokenizer, outcome, out):
    feature_file = _feature_file(params.predict_feature_file, params.output_dir, "predict.tf_record")
    data = squad.build_or_load_features(params.predict_file, feature_file, tokenizer, params.max_seq_length,
                                        params.doc_stride, params.max_query_length, is_training=False)
    examples, features = data.examples, data.features
    outcome.update(predict_examples=len(examples), predict_features=len(features),
                   predict_read_stats=dataclasses.asdict(data.read_stats), predict_conversion=data.conversion)
    if data.read_stats.impossible and not params.version_2_with_negative:
        logging.warning("%s has %d unanswerable (is_impossible) questions; the v1.1 head always answers. Pass "
                        "--version_2_with_negative for SQuAD 2.0.", params.predict_file, data.read_stats.impossible)
    start = time.time()
    results = predict_raw(model, feature_file, len(features), params.max_seq_length, params.predict_batch_size,
                          params.version_2_with_negative)
    outcome["predict_seconds"] = time.time() - start
    files = {"predictions": os.path.join(out, "predictions.json"),
             "nbest_predictions": os.path.join(out, "nbest_predictions.json")}
    dataset, has_gold = _has_gold(params.predict_file)
    result_dict = {}
    if not params.version_2_with_negative:
        squad.accumulate_predictions_v1(result_dict, examples, features, results, params.n_best_size,
                                        params.max_answer_length)
        predictions, _ = squad.write_predictions_v1(result_dict, examples, features, params.n_best_size,
                                                    files["predictions"], files["nbest_predictions"])
        outcome["files"] = files
        if has_gold:
            outcome["eval_results"] = evaluate_predictions(dataset, False, predictions)
        return
    cls_dict = {}
    squad.accumulate_predictions_v2(result_dict, cls_dict, examples, features, results, params.n_best_size,
                                    params.max_answer_length, params.start_n_top, params.end_n_top)
    _, null_odds, best_non_null, _ = squad.write_predictions_v2(result_dict, cls_dict, examples, features,
                                                                params.n_best_size)
    threshold, source = params.null_score_diff_threshold, "--null_score_diff_threshold"
    if threshold is None and has_gold:
        has_answer = squad_evaluation.has_answer_map(dataset)
        _, f1_raw = squad_evaluation.raw_scores_v2(dataset, best_non_null)
        _, threshold = squad_evaluation.realisable_threshold(best_non_null, f1_raw, null_odds, has_answer)
        source = "tuned on this file for the best F1, as the original"
    elif threshold is None:
        threshold, source = 0.0, "default 0.0 (no gold answers to tune on)"
    files["null_odds"] = os.path.join(out, "null_odds.json")
    predictions, _, _, _ = squad.write_predictions_v2(
        result_dict, cls_dict, examples, features, params.n_best_size, threshold, files["predictions"],
        files["nbest_predictions"], files["null_odds"])
    outcome.update(files=files, null_score_diff_threshold=threshold, null_score_diff_threshold_source=source)
    if has_gold:
        outcome["eval_results"] = evaluate_predictions(dataset, True, predictions, null_odds, best_non_null)


def run_squad(params):
    """Fine-tunes (resuming from output_dir), predicts and evaluates, and exports, as `run_squad.py` describes.

    Returns a dict: steps, counts, the paths written, `eval_results` (when the predict file has answers) and
    `export_dirs`.
    """
    check_params(params)
    training.set_precision(params.mixed_precision)
    keras.utils.set_random_seed(params.seed)
    tokenizer = FullTokenizer(spm_model_file=params.spm_model_file, do_lower_case=params.do_lower_case)
    strategy = distribution.get_strategy(params.strategy, params.tpu_name, params.tpu_zone, params.gcp_project,
                                         params.master, params.use_tpu)
    training.check_output_dir(params.output_dir, params.albert_config)
    write_dir = distribution.worker_dir(params.output_dir, strategy)
    model = _build_model(params, strategy)
    outcome = {"output_dir": params.output_dir}
    if params.do_train:
        _train(params, model, strategy, tokenizer, write_dir, outcome)
    elif params.do_predict or params.export_dir:
        _restore_for_prediction(params, model)
    chief = distribution.is_chief(strategy)
    if params.do_predict:
        # Every worker takes part in prediction (multi-worker collectives); only the chief's files are kept.
        tf.io.gfile.makedirs(write_dir)
        _predict(params, model, tokenizer, outcome, write_dir)
        if "eval_results" in outcome:
            results = {k: v for k, v in outcome["eval_results"].items() if not isinstance(v, list)}
            outcome["eval_results_file"] = training.write_results(os.path.join(write_dir, "eval_results.txt"),
                                                                  results)
    if params.export_dir and chief:
        threshold = outcome.get("null_score_diff_threshold", params.null_score_diff_threshold)
        outcome["export_dirs"] = export_squad_model(
            model, params.export_dir, spm_model_file=params.spm_model_file, do_lower_case=params.do_lower_case,
            max_seq_length=params.max_seq_length, max_query_length=params.max_query_length,
            max_answer_length=params.max_answer_length, null_score_diff_threshold=threshold)
    return outcome


# ------------------------------------------------------------------------------------------------------------------
# Export.

def _best_span(start_scores, end_scores, valid_start, valid_end, max_answer_length):
    """Best (start, end, score) per row over start <= end < start + max_answer_length, both valid."""
    seq_len = tf.shape(start_scores)[1]
    scores = start_scores[:, :, None] + end_scores[:, None, :]
    pos = tf.range(seq_len)
    length = pos[None, :] - pos[:, None]
    allowed = (length >= 0) & (length < max_answer_length)
    allowed = allowed[None] & valid_start[:, :, None] & valid_end[:, None, :]
    scores = tf.where(allowed, scores, tf.fill(tf.shape(scores), tf.constant(-_NEG, scores.dtype)))
    flat = tf.reshape(scores, tf.stack([tf.shape(scores)[0], -1]))
    best = tf.argmax(flat, axis=-1, output_type=tf.int32)
    return best // seq_len, best % seq_len, tf.reduce_max(flat, axis=-1)


def export_squad_model(model, export_dir, spm_model_file=None, do_lower_case=True, max_seq_length=384,
                       max_query_length=64, max_answer_length=30, null_score_diff_threshold=None, overwrite=True):
    """Writes the SavedModels of a SQuAD model; returns {"ids": dir, "text": dir (with a tokenizer)}.

    `<export_dir>/ids` — `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [batch, seq] (the
    feature layout `[CLS] question [SEP] context [SEP]`) -> v1.1: `start_logits`, `end_logits` [batch, seq];
    v2.0: `start_log_probs` [batch, seq], `start_top_log_probs`/`start_top_index`, `end_top_log_probs`/
    `end_top_index`, `cls_logits` [batch] (p_mask derived from the layout).

    `<export_dir>/text` (with `spm_model_file`) — `serving_default`: strings `question`, `context` [batch] ->
    the outputs above for the first window (question cut to `max_query_length` pieces, context to what fits in
    `max_seq_length`) plus `input_ids`, `segment_ids`, `answer_start`/`answer_end` (positions of the best valid
    span), `answer_score`, and `answer_text`: the span's pieces decoded (normalised text, i.e. lowercased and
    without accents when do_lower_case; exact context characters need the Python features). v2.0 also returns
    `is_impossible` (cls_logits > the null threshold; the threshold is the `null_score_diff_threshold` variable,
    0.0 if none was given). Both load with `tensorflow` + `tensorflow_text` only.
    """
    import tensorflow_text as tf_text  # pylint: disable=import-outside-toplevel

    from albert_tf.text_layers import (  # pylint: disable=import-outside-toplevel
        AlbertTextPreprocessor, TextPreprocessorModule)

    if not model.weights:
        model(dummy_inputs(seq_length=4), training=False)  # build the weights outside the traced functions
    version_2 = model.version_2
    max_positions = model.config.max_position_embeddings
    dirs = {}

    def heads(input_ids, input_mask, segment_ids):
        check = tf.debugging.assert_less_equal(tf.shape(input_ids)[1], max_positions,
                                               message=f"sequence longer than {max_positions} positions")
        with tf.control_dependencies([check]):
            outputs = model({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
                            training=False)
        return {k: tf.identity(v) for k, v in outputs.items()}

    ids_spec = [tf.TensorSpec([None, None], tf.int32, name=n) for n in ("input_ids", "input_mask", "segment_ids")]
    module = tf.Module()
    module.model = model
    module.serve = tf.function(heads, input_signature=ids_spec)
    module.version_2 = tf.Variable(version_2, trainable=False, name="version_2")
    signatures = {"serving_default": module.serve}
    if spm_model_file:
        signatures["tokenization_info"] = export.attach_tokenizer(module, spm_model_file, do_lower_case)
    dirs["ids"] = export.save_module(module, os.path.join(export_dir, "ids"), signatures, overwrite=overwrite)
    if not spm_model_file:
        return dirs

    text = tf.Module()
    text.model = model
    # The tokenizer module creates its lookup tables now, so the SavedModel tracks them.
    text.tokenizer = TextPreprocessorModule(AlbertTextPreprocessor(
        spm_model_file=spm_model_file, do_lower_case=do_lower_case, max_seq_length=max_seq_length))
    with tf.io.gfile.GFile(spm_model_file, "rb") as f:
        text.detokenizer = tf_text.FastSentencepieceTokenizer(f.read())
    text.threshold = tf.Variable(0.0 if null_score_diff_threshold is None else float(null_score_diff_threshold),
                                 trainable=False, name="null_score_diff_threshold")
    text.max_answer_length = tf.Variable(max_answer_length, trainable=False, name="max_answer_length")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="question"),
                                  tf.TensorSpec([None], tf.string, name="context")])
    def answer(question, context):
        batch_size = tf.shape(question, out_type=tf.int64)[0]
        ids = text.tokenizer.tokenize_to_ids(tf.concat([question, context], axis=0))
        question_ids = ids[:batch_size][:, :max_query_length]
        context_ids = ids[batch_size:]
        room = max_seq_length - 3 - question_ids.row_lengths()
        keep = tf.ragged.range(context_ids.row_lengths()) < tf.expand_dims(room, 1)
        context_ids = tf.ragged.boolean_mask(context_ids, keep)
        packed = text.tokenizer.preprocessor.pack(question_ids, context_ids)
        outputs = heads(packed["input_ids"], packed["input_mask"], packed["segment_ids"])
        p_mask = default_p_mask(packed["input_mask"], packed["segment_ids"])
        valid = tf.equal(p_mask, 0) & (tf.range(tf.shape(p_mask)[1])[None, :] > 0)
        if not version_2:
            start, end, score = _best_span(outputs["start_logits"], outputs["end_logits"], valid, valid,
                                           text.max_answer_length)
        else:
            k_start = tf.shape(outputs["start_top_index"])[1]
            k_end = tf.shape(outputs["end_top_index"])[1] // k_start
            starts = tf.repeat(outputs["start_top_index"], k_end, axis=1)
            ends = outputs["end_top_index"]
            scores = tf.repeat(outputs["start_top_log_probs"], k_end, axis=1) + outputs["end_top_log_probs"]
            ok = (tf.gather(valid, starts, batch_dims=1) & tf.gather(valid, ends, batch_dims=1) & (ends >= starts)
                  & (ends - starts < text.max_answer_length))
            scores = tf.where(ok, scores, -_NEG)
            best = tf.argmax(scores, axis=1, output_type=tf.int32)
            start = tf.gather(starts, best, batch_dims=1)
            end = tf.gather(ends, best, batch_dims=1)
            score = tf.reduce_max(scores, axis=1)
            outputs["is_impossible"] = outputs["cls_logits"] > text.threshold
        positions = tf.range(tf.shape(packed["input_ids"])[1])[None, :]
        in_span = (positions >= start[:, None]) & (positions <= end[:, None])
        span_ids = tf.ragged.boolean_mask(packed["input_ids"], in_span)
        answer_text = text.detokenizer.detokenize(span_ids)
        outputs.update(input_ids=packed["input_ids"], segment_ids=packed["segment_ids"], answer_start=start,
                       answer_end=end, answer_score=score, answer_text=answer_text)
        return outputs

    text.answer = answer
    text_signatures = {"serving_default": answer,
                       "tokenization_info": export.attach_tokenizer(text, spm_model_file, do_lower_case)}
    dirs["text"] = export.save_module(text, os.path.join(export_dir, "text"), text_signatures, overwrite=overwrite)
    return dirs
