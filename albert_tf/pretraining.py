"""MLM + SOP pretraining: the loss, the Keras training and evaluation steps, and the whole run.

`AlbertPretrainer` is `AlbertForPretraining` with `train_step`/`test_step`, so `fit` and `evaluate` drive it
under any `tf.distribute` strategy. Losses are the original's: masked-LM cross-entropy weighted by
`masked_lm_weights` (sum / (sum of weights + 1e-5)) plus sentence-order cross-entropy. Both are normalised by
their totals over the global batch (summed across replicas), so a step on N replicas equals a step on one
device with the same global batch; on one device this is exactly the original's formula.
"""

import dataclasses
import logging
import os

import keras
import tensorflow as tf

from albert_tf import checkpoints, distribution, export, optimization, records, training
from albert_tf.config import AlbertConfig
from albert_tf.modeling import AlbertForPretraining, dummy_inputs


def pretraining_losses(outputs, features):
    """Per-position MLM losses [B, P], per-example SOP losses [B], and the correctness of each prediction."""
    labels = tf.cast(features["masked_lm_ids"], tf.int32)
    mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)
    mlm_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=mlm_logits)
    mlm_correct = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, output_type=tf.int32), labels), tf.float32)
    sop_labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
    sop_logits = tf.cast(outputs["sop_logits"], tf.float32)
    sop_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=sop_labels, logits=sop_logits)
    sop_correct = tf.cast(tf.equal(tf.argmax(sop_logits, -1, output_type=tf.int32), sop_labels), tf.float32)
    return mlm_loss, mlm_correct, sop_loss, sop_correct


class AlbertPretrainer(training.LocalBatchSymbolicBuild, AlbertForPretraining):
    """`AlbertForPretraining` that trains itself with `fit` (MLM + SOP) and reports the original's metrics:
    masked_lm_accuracy, masked_lm_loss, sentence_order_accuracy, sentence_order_loss (plus loss and
    learning_rate while training)."""

    def __init__(self, config, clip_norm=1.0, **kwargs):
        super().__init__(config, **kwargs)
        self.clip_norm = clip_norm
        self.masked_lm_accuracy = keras.metrics.Mean(name="masked_lm_accuracy")
        self.masked_lm_loss = keras.metrics.Mean(name="masked_lm_loss")
        self.sentence_order_accuracy = keras.metrics.Mean(name="sentence_order_accuracy")
        self.sentence_order_loss = keras.metrics.Mean(name="sentence_order_loss")

    @property
    def metrics(self):
        return [self.masked_lm_accuracy, self.masked_lm_loss, self.sentence_order_accuracy,
                self.sentence_order_loss]

    def _update_metrics(self, features, mlm_loss, mlm_correct, sop_loss, sop_correct):
        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        self.masked_lm_accuracy.update_state(mlm_correct, sample_weight=weights)
        self.masked_lm_loss.update_state(mlm_loss, sample_weight=weights)
        self.sentence_order_accuracy.update_state(sop_correct)
        self.sentence_order_loss.update_state(sop_loss)

    def _results(self):
        results = {m.name: m.result() for m in self.metrics}
        results["loss"] = results["masked_lm_loss"] + results["sentence_order_loss"]
        return results

    def train_step(self, data):
        features = data
        with tf.GradientTape() as tape:
            outputs = self(features, training=True)
            mlm_loss, mlm_correct, sop_loss, sop_correct = pretraining_losses(outputs, features)
            weights = tf.cast(features["masked_lm_weights"], tf.float32)
            total_weight = training.global_sum(tf.reduce_sum(weights))
            total_examples = training.global_sum(tf.cast(tf.shape(sop_loss)[0], tf.float32))
            loss = (tf.reduce_sum(mlm_loss * weights) / (total_weight + 1e-5)
                    + tf.reduce_sum(sop_loss) / total_examples)
            scaled_loss = self.optimizer.scale_loss(loss)
        grads = tape.gradient(scaled_loss, self.trainable_variables)
        grads = training.clip_gradients_across_replicas(grads, self.clip_norm,
                                                        training.loss_scale_of(self.optimizer))
        self.optimizer.apply(grads, self.trainable_variables)
        self._update_metrics(features, mlm_loss, mlm_correct, sop_loss, sop_correct)
        results = self._results()
        results["learning_rate"] = tf.cast(self.optimizer.learning_rate, tf.float32)
        return training.multi_worker_logs(results)

    def test_step(self, data):
        outputs = self(data, training=False)
        self._update_metrics(data, *pretraining_losses(outputs, data))
        return training.multi_worker_logs(self._results())

    def get_config(self):
        return {**super().get_config(), "clip_norm": self.clip_norm}


@dataclasses.dataclass
class PretrainingParams(training.RuntimeParams):
    """Everything a pretraining run needs; the fields follow `run_pretraining.py`'s flags."""

    albert_config: AlbertConfig
    input_file: str
    output_dir: str
    eval_input_file: str = None
    init_checkpoint: str = None
    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    do_train: bool = True
    do_eval: bool = True
    train_batch_size: int = 4096
    eval_batch_size: int = 64
    optimizer: str = "lamb"
    learning_rate: float = 0.00176
    poly_power: float = 1.0
    num_train_steps: int = 125000
    num_warmup_steps: int = 3125
    start_warmup_step: int = 0
    save_checkpoints_steps: int = 5000
    keep_checkpoint_max: int = 5
    iterations_per_loop: int = 1000
    max_eval_steps: int = 100
    init_from_group0: bool = False
    export_dir: str = None
    tokenizer_file: str = None
    do_lower_case: bool = True


def _datasets(params, strategy, steps_done):
    def train_fn(context):
        batch = context.get_per_replica_batch_size(params.train_batch_size)
        ds = records.pretraining_dataset(params.input_file, params.max_seq_length,
                                         params.max_predictions_per_seq, batch, is_training=True,
                                         seed=params.seed, input_context=context)
        # Each step takes one batch per replica; a pipeline feeds num_replicas / num_pipelines replicas.
        skip = steps_done * context.num_replicas_in_sync // context.num_input_pipelines
        return ds.skip(skip) if skip else ds

    def eval_fn(context):
        batch = context.get_per_replica_batch_size(params.eval_batch_size)
        return records.pretraining_dataset(params.eval_input_file or params.input_file, params.max_seq_length,
                                           params.max_predictions_per_seq, batch, is_training=False,
                                           input_context=context)

    return strategy.distribute_datasets_from_function(train_fn), eval_fn


def run_pretraining(params):
    """Trains (resuming from `output_dir` if it holds checkpoints), evaluates, and exports a SavedModel.

    Returns a dict with the final step, eval results and the paths written.
    """
    training.set_precision(params.mixed_precision)
    keras.utils.set_random_seed(params.seed)
    strategy = distribution.get_strategy(params.strategy, params.tpu_name, params.tpu_zone, params.gcp_project,
                                         params.master, params.use_tpu)
    config = params.albert_config
    if params.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length {params.max_seq_length} exceeds max_position_embeddings "
                         f"{config.max_position_embeddings} of the albert config")
    if params.train_batch_size % strategy.num_replicas_in_sync:
        raise ValueError(f"--train_batch_size {params.train_batch_size} is not divisible by the "
                         f"{strategy.num_replicas_in_sync} replicas")
    for patterns in filter(None, (params.input_file, params.eval_input_file)):
        records.check_record_lengths(records.expand_file_patterns(patterns), params.max_seq_length,
                                     params.max_predictions_per_seq)
    training.check_output_dir(params.output_dir, config)
    write_dir = distribution.worker_dir(params.output_dir, strategy)

    with strategy.scope():
        model = AlbertPretrainer(config)
        model(dummy_inputs(num_predictions=1), training=False)
        optimizer = optimization.create_optimizer(
            params.optimizer, params.learning_rate, params.num_train_steps, params.num_warmup_steps,
            params.start_warmup_step, params.poly_power)
        model.compile(optimizer=optimizer, jit_compile=params.jit_compile)
        model.optimizer.build(model.trainable_variables)

        def initialize():
            if params.init_checkpoint:
                logging.info("Initialised from %s", checkpoints.load_checkpoint(
                    model, params.init_checkpoint, init_from_group0=params.init_from_group0))

        manager, done = training.restore_or_initialize(model, write_dir, params.keep_checkpoint_max, initialize)

    outcome = {"output_dir": params.output_dir, "step": done}
    if params.do_train and done < params.num_train_steps:
        train_ds, _ = _datasets(params, strategy, done)
        steps, seconds = training.fit_to_step(
            model, train_ds, manager, params.num_train_steps, params.save_checkpoints_steps,
            params.iterations_per_loop, log_dir=os.path.join(write_dir, "train"), log_every=params.log_every)
        outcome["train_seconds"] = seconds
        outcome["train_examples_per_second"] = steps * params.train_batch_size / max(seconds, 1e-9)
        done = int(model.optimizer.iterations.numpy())
        outcome["step"] = done

    if params.do_eval:
        _, eval_fn = _datasets(params, strategy, 0)
        eval_ds = strategy.distribute_datasets_from_function(eval_fn)
        results = model.evaluate(eval_ds, steps=params.max_eval_steps, return_dict=True, verbose=0)
        results = {k: float(v) for k, v in results.items()}
        results["global_step"] = done
        outcome["eval_results"] = results
        outcome["eval_results_file"] = training.write_results(os.path.join(write_dir, "eval_results.txt"),
                                                              results)
        logging.info("Eval results: %s", results)

    if params.export_dir and distribution.is_chief(strategy):
        outcome["export_dir"] = export.export_encoder(model, params.export_dir, tokenizer_file=params.tokenizer_file,
                                                      do_lower_case=params.do_lower_case, overwrite=True)
    return outcome
