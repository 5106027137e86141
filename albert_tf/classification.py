"""Fine-tuning ALBERT on sentence (pair) classification and regression: the `run_classifier.py` run, evaluation
of every saved checkpoint with the best one kept, prediction files, and the serving export.

The run (`run_classifier(ClassifierParams(...))`) follows the original's `run_classifier.py`:

* training (`do_train`): `AlbertClassifier` (dropout + dense on the pooled output; softmax cross-entropy, or
  squared error for regression) with the original's AdamW or LAMB schedule and global-norm-1.0 clipping, for
  `train_step` steps, checkpointing every `save_checkpoints_steps` steps into `output_dir` and keeping the last
  `keep_checkpoint_max` (0 keeps all). A run that is restarted resumes from its latest checkpoint, skipping the
  batches already trained on;
* evaluation (`do_eval`): every checkpoint is evaluated on the dev set as it is saved (and, afterwards, any kept
  checkpoint not yet evaluated). Results go to `eval_results.txt` (the original's `key = value` blocks, one per
  checkpoint) and `eval_history.json`; the best checkpoint by the task's metric (`metrics.primary_metric`:
  accuracy, F1 for MRPC/QQP, Matthews correlation for CoLA, Pearson for STS-B) is copied to
  `output_dir/best_checkpoint/` and described (step, metric, results) in `best_checkpoint.json`. Unlike the
  original, no checkpoint is deleted except by `keep_checkpoint_max`, and nothing waits for checkpoints to
  appear;
* prediction (`do_predict`): with the best checkpoint (else the latest, else `init_checkpoint`), the test set's
  class probabilities (or scores) go to `test_results.tsv` and a GLUE submission (`index<TAB>prediction`, label
  strings) to `submit_results.tsv`;
* export (`export_dir`): `export_classifier` writes a SavedModel of the same weights.

Batches are padded to their longest example (`glue.train_dataset` / `glue.eval_dataset`) unless
`dynamic_padding=False`; on TPUs (`strategy="tpu"`) they are padded to `max_seq_length` with fixed batch sizes.
"""

import dataclasses
import json
import logging
import os
import shutil
import tempfile

import keras
import numpy as np
import tensorflow as tf

from albert_tf import checkpoints, distribution, export, glue, metrics, optimization, training
from albert_tf.config import AlbertConfig
from albert_tf.modeling import AlbertClassifier, dummy_inputs
from albert_tf.tokenization import FullTokenizer, TokenizerError, load_sentencepiece

BEST_DIR = "best_checkpoint"
BEST_JSON = "best_checkpoint.json"
HISTORY_JSON = "eval_history.json"
TASK_JSON = "task.json"


class RunError(ValueError):
    """The run cannot proceed as asked (flags that contradict each other or the model, a reused output_dir,
    nothing to evaluate or predict with); the message says why."""


# ----------------------------------------------------------------------------------------------------------------
# Model, loss, predictions.

def build_classifier(config, num_labels, dropout_prob=0.1):
    """An `AlbertClassifier` with its weights created (call it under a strategy's scope)."""
    model = AlbertClassifier(config, num_labels, dropout_prob=dropout_prob)
    model(dummy_inputs(), training=False)
    return model


def classifier_loss(regression):
    """The original's loss: mean softmax cross-entropy of the logits, or mean squared error (regression)."""
    if regression:
        return keras.losses.MeanSquaredError(name="mse")
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, name="cross_entropy")


def compile_classifier(model, optimizer, regression, jit_compile=False):
    """Compiles `model` with the task's loss and (classification) an accuracy metric."""
    model.compile(optimizer=optimizer, loss=classifier_loss(regression),
                  metrics=None if regression else [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                  jit_compile=jit_compile)
    return model


def probabilities_from_logits(logits, regression):
    """Softmax probabilities [N, C] (regression: the scores [N, 1], as the original's `probabilities`)."""
    logits = np.asarray(logits, np.float64)
    if regression:
        return logits
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def predictions_from_logits(logits, regression):
    """Predicted label indices [N] (regression: scores [N])."""
    logits = np.asarray(logits)
    return logits[:, 0] if regression else np.argmax(logits, axis=-1)


def predict_dataset(model, dataset, num_examples):
    """Runs `model` over an `glue.eval_dataset` and returns (logits [N, C], labels [N]) in file order.

    The padding examples of a static-shape pipeline are dropped.
    """
    # One batch per call: with the training's steps_per_execution, Keras would trace one graph per group of
    # differently shaped batches. The single-step function is kept for later calls.
    saved = model.steps_per_execution, model.predict_function
    model.steps_per_execution = 1
    model.predict_function = getattr(model, "_single_step_predict_function", None)
    try:
        logits = np.asarray(model.predict(dataset.map(glue.model_inputs), verbose=0), np.float32)
        model._single_step_predict_function = model.predict_function  # pylint: disable=protected-access
    finally:
        model.steps_per_execution, model.predict_function = saved
    index, labels = [], []
    for batch_index, batch_labels in dataset.map(lambda b: (b["example_index"], b["label_ids"])):
        index.append(batch_index.numpy())
        labels.append(batch_labels.numpy())
    index, labels = np.concatenate(index), np.concatenate(labels)
    if logits.shape[0] != index.shape[0]:
        raise RuntimeError(f"prediction returned {logits.shape[0]} rows for {index.shape[0]} examples")
    real = index >= 0
    if int(real.sum()) != num_examples or not np.array_equal(np.sort(index[real]), np.arange(num_examples)):
        raise RuntimeError(f"the evaluation data holds {int(real.sum())} examples, expected {num_examples}")
    ordered_logits = np.empty((num_examples, logits.shape[1]), np.float32)
    ordered_labels = np.empty((num_examples,), labels.dtype)
    ordered_logits[index[real]] = logits[real]
    ordered_labels[index[real]] = labels[real]
    return ordered_logits, ordered_labels


def eval_loss(logits, labels, regression):
    """The original's `eval_loss`: mean cross-entropy, or mean squared error."""
    logits = np.asarray(logits, np.float64)
    if regression:
        return float(np.mean((logits[:, 0] - np.asarray(labels, np.float64)) ** 2))
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return float(-np.mean(log_probs[np.arange(logits.shape[0]), np.asarray(labels, np.int64)]))


def evaluation_results(task_name, logits, labels, regression, num_labels=None):
    """The task's metrics (`metrics.task_metrics`) plus `eval_loss`, as floats."""
    predictions = predictions_from_logits(logits, regression)
    results = metrics.task_metrics(task_name, labels, predictions, regression=regression, num_labels=num_labels)
    results["eval_loss"] = eval_loss(logits, labels, regression)
    return results


# ----------------------------------------------------------------------------------------------------------------
# Export.

def export_classifier(model, export_dir, tokenizer_file, do_lower_case=True, max_seq_length=128, threshold=None,
                      overwrite=False, label_list=None):
    """Writes a SavedModel of an `AlbertClassifier` that TF Serving (or `tensorflow` + `tensorflow_text` alone)
    can run. Returns the export directory.

    Signatures (every one returns float32 `probabilities` [B, num_labels] — softmax, or the score [B, 1] for
    regression — and `predictions` [B] — int32 label index, or the float score; plus, when `threshold` is given,
    float32 `threshold` [B] holding that constant, and with `label_list` the string `labels` [B] of the predicted
    classes):
      * `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [B, T], T <= max_position_embeddings;
      * `serialized_example`: string `serialized_example` [B], serialized `tf.train.Example`s with int64
        `input_ids`, `input_mask`, `segment_ids` (the original's record features; other features are ignored;
        lengths up to max_position_embeddings, shorter ones padded);
      * `text`: string `text` [B], tokenized in the graph (`AlbertTextPreprocessor`, `max_seq_length`);
      * `text_pair`: string `text_a`, `text_b` [B] for sentence-pair tasks (an empty `text_b` is a single text);
      * `tokenization_info`: the tokenizer file (an asset) and `do_lower_case`.
    """
    from albert_tf.text_layers import AlbertTextPreprocessor  # pylint: disable=import-outside-toplevel

    if not tokenizer_file:
        raise export.ExportError("export_classifier needs the tokenizer file (--spm_model_file or --vocab_file)")
    config = model.config
    if max_seq_length > config.max_position_embeddings:
        raise export.ExportError(f"max_seq_length {max_seq_length} exceeds max_position_embeddings "
                                 f"{config.max_position_embeddings}")
    regression = model.num_labels == 1
    if label_list is not None and not regression and len(label_list) != model.num_labels:
        raise export.ExportError(f"label_list has {len(label_list)} labels, the model {model.num_labels}")
    try:  # a SentencePiece model (else a WordPiece vocabulary, one token per line)
        load_sentencepiece(tokenizer_file)
        is_spm = True
    except TokenizerError:
        is_spm = False
    preprocessor = AlbertTextPreprocessor(spm_model_file=tokenizer_file if is_spm else None,
                                          vocab_file=None if is_spm else tokenizer_file,
                                          do_lower_case=do_lower_case, max_seq_length=max_seq_length)
    preprocessor._ensure_resources()  # pylint: disable=protected-access

    module = tf.Module()
    module.model = model
    module.preprocessor = preprocessor
    max_positions = config.max_position_embeddings
    labels_table = tf.constant([str(label) for label in label_list]) if label_list and not regression else None

    def outputs(input_ids, input_mask, segment_ids):
        check = tf.debugging.assert_less_equal(
            tf.shape(input_ids)[1], max_positions,
            message=f"sequence length exceeds max_position_embeddings ({max_positions})")
        with tf.control_dependencies([check]):
            logits = tf.cast(model({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
                                   training=False), tf.float32)
        if regression:
            result = {"probabilities": logits, "predictions": logits[:, 0]}
        else:
            result = {"probabilities": tf.nn.softmax(logits, axis=-1),
                      "predictions": tf.argmax(logits, axis=-1, output_type=tf.int32)}
            if labels_table is not None:
                result["labels"] = tf.gather(labels_table, result["predictions"])
        if threshold is not None:
            result["threshold"] = tf.fill(tf.shape(logits)[:1], tf.constant(float(threshold), tf.float32))
        return result

    def from_packed(packed):
        # Drop the columns that are padding in every row: same outputs, less work.
        length = tf.maximum(tf.reduce_max(tf.reduce_sum(packed["input_mask"], axis=1)), 1)
        return outputs(packed["input_ids"][:, :length], packed["input_mask"][:, :length],
                       packed["segment_ids"][:, :length])

    ids = [tf.TensorSpec([None, None], tf.int32, name=n) for n in glue.FEATURE_NAMES]

    @tf.function(input_signature=ids)
    def serve(input_ids, input_mask, segment_ids):
        return outputs(input_ids, input_mask, segment_ids)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="serialized_example")])
    def serve_examples(serialized_example):
        parsed = tf.io.parse_example(serialized_example,
                                     {n: tf.io.RaggedFeature(tf.int64) for n in glue.FEATURE_NAMES})
        dense = [tf.cast(parsed[n].to_tensor(0), tf.int32) for n in glue.FEATURE_NAMES]
        return outputs(*dense)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve_text(text):
        return from_packed(preprocessor(text))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text_a"),
                                  tf.TensorSpec([None], tf.string, name="text_b")])
    def serve_text_pair(text_a, text_b):
        return from_packed(preprocessor((text_a, text_b)))

    module.serve, module.serve_examples = serve, serve_examples
    module.serve_text, module.serve_text_pair = serve_text, serve_text_pair
    module.max_seq_length = tf.Variable(int(max_seq_length), trainable=False, name="max_seq_length")
    signatures = {"serving_default": serve, "serialized_example": serve_examples, "text": serve_text,
                  "text_pair": serve_text_pair,
                  "tokenization_info": export.attach_tokenizer(module, tokenizer_file, do_lower_case)}
    return export.save_module(module, export_dir, signatures, overwrite=overwrite)


# ----------------------------------------------------------------------------------------------------------------
# The run.

@dataclasses.dataclass
class ClassifierParams(training.RuntimeParams):
    """Everything a fine-tuning run needs; the fields follow `run_classifier.py`'s flags.

    `processor` (a `glue.DataProcessor`) overrides `task_name` + `data_dir` lookup, e.g. a `glue.CsvProcessor`
    for a user's files.
    """

    albert_config: AlbertConfig
    output_dir: str
    task_name: str = None
    data_dir: str = None
    processor: glue.DataProcessor = None
    spm_model_file: str = None
    vocab_file: str = None
    cached_dir: str = None
    init_checkpoint: str = None
    do_lower_case: bool = True
    max_seq_length: int = 512
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    learning_rate: float = 5e-5
    train_step: int = 1000
    warmup_step: int = 0
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    iterations_per_loop: int = 1000
    optimizer: str = "adamw"
    dropout_prob: float = 0.1
    dynamic_padding: bool = True
    export_dir: str = None
    threshold_to_export: float = None
    best_metric: str = None
    tensorboard: bool = True


def _check_task_record(output_dir, processor, write):
    """Records the task's labels in `output_dir/task.json`; refuses a directory trained with other labels."""
    path = os.path.join(output_dir, TASK_JSON)
    record = {"task_name": processor.task_name, "labels": processor.get_labels(),
              "regression": processor.is_regression}
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path, "r") as f:
            existing = json.load(f)
        if existing.get("labels") != record["labels"] or existing.get("regression") != record["regression"]:
            raise RunError(f"--output_dir {output_dir} holds a run with labels {existing.get('labels')} "
                             f"(regression={existing.get('regression')}); this task has labels {record['labels']} "
                             f"(regression={record['regression']}); use a new --output_dir")
    elif write:
        training.write_json(path, record)


def _checkpoint_step(prefix):
    return int(prefix.rsplit("-", 1)[-1])


def _copy_checkpoint(prefix, output_dir, step):
    """Copies the checkpoint files of `prefix` to `output_dir/best_checkpoint/` (atomically, replacing what was
    there) with a `checkpoint` state file, so `tf.train.latest_checkpoint` and `load_checkpoint` find it."""
    target = os.path.join(output_dir, BEST_DIR)
    tmp = tempfile.mkdtemp(prefix=f".{BEST_DIR}.tmp-", dir=output_dir)
    try:
        name = f"ckpt-{step}"
        for source in tf.io.gfile.glob(prefix + ".*"):
            suffix = source[len(prefix):]
            tf.io.gfile.copy(source, os.path.join(tmp, name + suffix), overwrite=True)
        # The `checkpoint` state file (a CheckpointState text proto), with a path relative to the directory.
        with tf.io.gfile.GFile(os.path.join(tmp, "checkpoint"), "w") as f:
            f.write(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')
        export.publish(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return os.path.join(target, name)


def _format_value(value):
    return repr(value) if isinstance(value, float) else str(value)


class CheckpointEvaluator:
    """Evaluates checkpoints on the dev set, keeps the record of results and the best checkpoint.

    State lives in `output_dir`: `eval_history.json` (every evaluated step's results), `eval_results.txt`,
    `best_checkpoint/` and `best_checkpoint.json`. Only the chief writes (`write=False` elsewhere).
    """

    def __init__(self, model, dataset, num_examples, task_name, regression, num_labels, metric, output_dir,
                 write=True):
        self.model = model
        self.dataset = dataset
        self.num_examples = num_examples
        self.task_name = task_name
        self.regression = regression
        self.num_labels = num_labels
        self.metric = metric
        self.output_dir = output_dir
        self.write = write
        self.history = {}
        self.best = None
        history_path = os.path.join(output_dir, HISTORY_JSON)
        if tf.io.gfile.exists(history_path):
            with tf.io.gfile.GFile(history_path, "r") as f:
                stored = json.load(f)
            if stored.get("metric") == metric:
                self.history = {int(k): v for k, v in stored.get("results", {}).items()}
        best_path = os.path.join(output_dir, BEST_JSON)
        if tf.io.gfile.exists(best_path):
            with tf.io.gfile.GFile(best_path, "r") as f:
                best = json.load(f)
            if best.get("metric") == metric:
                self.best = best

    def evaluate_weights(self, step):
        """Evaluates the model's current weights; returns the results (not recorded)."""
        logits, labels = predict_dataset(self.model, self.dataset, self.num_examples)
        results = evaluation_results(self.task_name, logits, labels, self.regression, self.num_labels)
        results["global_step"] = int(step)
        if self.metric not in results:
            raise RunError(f"metric {self.metric!r} is not among the results ({', '.join(sorted(results))})")
        return results

    def evaluate_checkpoint(self, prefix, step, weights_loaded=False):
        """Evaluates checkpoint `prefix` (restoring it unless `weights_loaded`), records the results and, if it is
        the best so far, copies it to `best_checkpoint/`."""
        if not weights_loaded:
            tf.train.Checkpoint(model=self.model).read(prefix).expect_partial()
        results = self.evaluate_weights(step)
        logging.info("Eval results at step %d: %s", step,
                     ", ".join(f"{k}={_format_value(v)}" for k, v in sorted(results.items())))
        self.history[int(step)] = results
        value = results[self.metric]
        if metrics.is_better(value, None if self.best is None else self.best["value"]):
            self.best = {"step": int(step), "metric": self.metric, "value": value, "results": results,
                         "checkpoint": os.path.join(BEST_DIR, f"ckpt-{step}")}
            if self.write:
                _copy_checkpoint(prefix, self.output_dir, step)
                training.write_json(os.path.join(self.output_dir, BEST_JSON), self.best)
            logging.info("New best %s = %s at step %d", self.metric, _format_value(value), step)
        self._write_records()
        return results

    def _write_records(self):
        if not self.write:
            return
        training.write_json(os.path.join(self.output_dir, HISTORY_JSON),
                            {"metric": self.metric, "results": {str(k): v for k, v in sorted(self.history.items())}})
        lines = []
        for step in sorted(self.history):
            results = self.history[step]
            lines.extend(f"{key} = {_format_value(results[key])}" for key in sorted(results))
            lines.append("=" * 50)
        if self.best is not None:
            lines.append(f"best_step = {self.best['step']}")
            lines.append(f"best_{self.metric} = {_format_value(self.best['value'])}")
        path = os.path.join(self.output_dir, "eval_results.txt")
        tmp = path + ".tmp"
        with tf.io.gfile.GFile(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        tf.io.gfile.rename(tmp, path, overwrite=True)


class EvaluateOnSave(keras.callbacks.Callback):
    """During `fit`, evaluates each checkpoint right after it is saved (the weights in memory are the saved
    ones), so checkpoints that `keep_checkpoint_max` later deletes are evaluated too."""

    def __init__(self, manager, evaluator):
        super().__init__()
        self.manager = manager
        self.evaluator = evaluator
        self._last = manager.latest_checkpoint

    def _check(self):
        latest = self.manager.latest_checkpoint
        if latest and latest != self._last:
            self._last = latest
            step = _checkpoint_step(latest)
            if step not in self.evaluator.history:
                self.evaluator.evaluate_checkpoint(latest, step, weights_loaded=True)

    def on_train_batch_end(self, batch, logs=None):
        self._check()

    def on_train_end(self, logs=None):
        self._check()


def _init_from_checkpoint(model, params):
    if not params.init_checkpoint:
        return
    try:
        result = checkpoints.load_checkpoint(model, params.init_checkpoint)
    except checkpoints.CheckpointError as err:
        raise checkpoints.CheckpointError(
            f"--init_checkpoint {params.init_checkpoint} does not fit the model of the albert config "
            f"(hidden_size={model.config.hidden_size}, num_hidden_layers={model.config.num_hidden_layers}, "
            f"vocab_size={model.config.vocab_size}, ...): {err}") from None
    logging.info("Initialised from %s: %s", params.init_checkpoint, result)


def _features(params, processor, tokenizer, split):
    cached_dir = params.cached_dir or params.output_dir
    return glue.cached_features(processor, params.data_dir, split, tokenizer, params.max_seq_length, cached_dir)


def write_predictions(output_dir, examples, logits, label_list, regression):
    """Writes `test_results.tsv` (per example: the class probabilities, tab-separated; or the score) and
    `submit_results.tsv` (GLUE submission: header `index<TAB>prediction`, then guid and label string or score).
    Returns the two paths."""
    probabilities = probabilities_from_logits(logits, regression)
    predictions = predictions_from_logits(logits, regression)
    results_path = os.path.join(output_dir, "test_results.tsv")
    submit_path = os.path.join(output_dir, "submit_results.tsv")
    with tf.io.gfile.GFile(results_path + ".tmp", "w") as results, \
            tf.io.gfile.GFile(submit_path + ".tmp", "w") as submit:
        submit.write("index\tprediction\n")
        for example, probs, prediction in zip(examples, probabilities, predictions):
            results.write("\t".join(repr(float(p)) for p in probs) + "\n")
            label = repr(float(prediction)) if regression else str(label_list[int(prediction)])
            submit.write(f"{example.guid}\t{label}\n")
    tf.io.gfile.rename(results_path + ".tmp", results_path, overwrite=True)
    tf.io.gfile.rename(submit_path + ".tmp", submit_path, overwrite=True)
    return results_path, submit_path


def run_classifier(params):
    """Trains, evaluates, predicts and exports as `params` asks (see module docstring).

    Returns a dict: `start_step` (where this run began: > 0 when it resumed), `step`, and as applicable
    `train_seconds`, `train_examples_per_second`, `eval_results` (the best checkpoint's), `best_step`,
    `eval_history` ({step: results}), `final_weights` (what predictions and the export used), `test_logits`,
    `test_results_file`, `submit_results_file`, `export_dir`.
    """
    if not (params.do_train or params.do_eval or params.do_predict):
        raise RunError("at least one of do_train, do_eval or do_predict must be True")
    config = params.albert_config
    if params.max_seq_length > config.max_position_embeddings:
        raise RunError(f"Cannot use sequence length {params.max_seq_length} because the ALBERT model was only "
                         f"trained up to sequence length {config.max_position_embeddings} (max_position_embeddings "
                         "of the albert config)")
    processor = params.processor or glue.get_processor(params.task_name)
    regression = processor.is_regression
    label_list = processor.get_labels()
    num_labels = processor.num_labels
    tokenizer = FullTokenizer(vocab_file=params.vocab_file, do_lower_case=params.do_lower_case,
                              spm_model_file=params.spm_model_file)

    training.set_precision(params.mixed_precision)
    keras.utils.set_random_seed(params.seed)
    strategy = distribution.get_strategy(params.strategy, params.tpu_name, params.tpu_zone, params.gcp_project,
                                         params.master, params.use_tpu)
    static_shapes = isinstance(strategy, tf.distribute.TPUStrategy)
    if params.do_train and params.train_batch_size % strategy.num_replicas_in_sync:
        raise RunError(f"train_batch_size {params.train_batch_size} is not divisible by the "
                         f"{strategy.num_replicas_in_sync} replicas")
    chief = distribution.is_chief(strategy)
    try:
        training.check_output_dir(params.output_dir, config)
    except ValueError as err:
        raise RunError(str(err)) from None
    _check_task_record(params.output_dir, processor, write=chief)
    write_dir = distribution.worker_dir(params.output_dir, strategy)
    metric = params.best_metric or metrics.primary_metric(processor.task_name, regression)
    sample = [0.0, 1.0] if regression else [0, 1]
    reported = sorted(set(metrics.task_metrics(processor.task_name, sample, sample, regression, num_labels)) - {"MSE"})
    if metric not in reported:
        raise RunError(f"--best_metric {metric!r} is not reported for task {processor.task_name} (higher-is-better "
                       f"results: {', '.join(reported)})")

    # Read and cache the data first, so that data errors come before any model work.
    train_features = _features(params, processor, tokenizer, "train") if params.do_train else None
    dev_features = _features(params, processor, tokenizer, "dev") if params.do_eval else None
    test_features = _features(params, processor, tokenizer, "test") if params.do_predict else None

    with strategy.scope():
        model = build_classifier(config, num_labels, params.dropout_prob)
        optimizer = optimization.create_optimizer(params.optimizer, params.learning_rate, params.train_step,
                                                  params.warmup_step)
        compile_classifier(model, optimizer, regression, jit_compile=params.jit_compile)
        model.optimizer.build(model.trainable_variables)
        keep = params.keep_checkpoint_max if params.keep_checkpoint_max and params.keep_checkpoint_max > 0 else None
        manager, done = training.restore_or_initialize(model, write_dir, keep,
                                                       lambda: _init_from_checkpoint(model, params))

    outcome = {"output_dir": params.output_dir, "start_step": done, "step": done}
    evaluator = None
    if params.do_eval:
        dev_ds = glue.eval_dataset(dev_features.path, params.max_seq_length, params.eval_batch_size, regression,
                                   dynamic_padding=params.dynamic_padding, static_shapes=static_shapes,
                                   num_examples=dev_features.num_examples)
        evaluator = CheckpointEvaluator(model, dev_ds, dev_features.num_examples, processor.task_name, regression,
                                        num_labels, metric, params.output_dir, write=chief)

    if params.do_train and done < params.train_step:
        logging.info("Training on %d examples, batch size %d, %d steps (from step %d)", train_features.num_examples,
                     params.train_batch_size, params.train_step, done)

        def train_fn(context):
            batch = context.get_per_replica_batch_size(params.train_batch_size)
            ds = glue.train_dataset(train_features.path, params.max_seq_length, batch, regression, seed=params.seed,
                                    dynamic_padding=params.dynamic_padding, static_shapes=static_shapes,
                                    input_context=context)
            return ds.skip(done) if done else ds

        train_ds = strategy.distribute_datasets_from_function(train_fn)
        callbacks = [EvaluateOnSave(manager, evaluator)] if evaluator is not None else []
        steps, seconds = training.fit_to_step(
            model, train_ds, manager, params.train_step, params.save_checkpoints_steps, params.iterations_per_loop,
            log_dir=os.path.join(write_dir, "train") if params.tensorboard else None, log_every=params.log_every,
            callbacks=callbacks)
        done = int(model.optimizer.iterations.numpy())
        outcome.update(step=done, train_seconds=seconds,
                       train_examples_per_second=steps * params.train_batch_size / max(seconds, 1e-9))

    if evaluator is not None:
        pending = [p for p in manager.checkpoints if _checkpoint_step(p) not in evaluator.history]
        for prefix in pending:
            evaluator.evaluate_checkpoint(prefix, _checkpoint_step(prefix))
        if pending and manager.latest_checkpoint:
            tf.train.Checkpoint(model=model).read(manager.latest_checkpoint).expect_partial()
        if not manager.checkpoints and not evaluator.history:
            if not params.init_checkpoint:
                raise RunError(f"nothing to evaluate: no checkpoint in {params.output_dir} and no "
                                 "--init_checkpoint")
            # A model fine-tuned elsewhere (--init_checkpoint), evaluated as it is; no checkpoint to keep.
            outcome["eval_results"] = evaluator.evaluate_weights(done)
            logging.info("Eval results of --init_checkpoint: %s", outcome["eval_results"])
            if chief:
                training.write_results(os.path.join(params.output_dir, "eval_results.txt"),
                                       outcome["eval_results"])
        if evaluator.best is not None:
            outcome["eval_results"] = evaluator.best["results"]
            outcome["best_step"] = evaluator.best["step"]
            outcome["eval_history"] = dict(evaluator.history)

    if params.do_predict or params.export_dir:
        source = _load_final_weights(model, params, manager)
        outcome["final_weights"] = source

    if params.do_predict:
        predict_ds = glue.eval_dataset(test_features.path, params.max_seq_length, params.predict_batch_size,
                                       regression, dynamic_padding=params.dynamic_padding,
                                       static_shapes=static_shapes, num_examples=test_features.num_examples)
        logits, _ = predict_dataset(model, predict_ds, test_features.num_examples)
        if chief:
            paths = write_predictions(params.output_dir, test_features.examples, logits, label_list, regression)
            outcome["test_results_file"], outcome["submit_results_file"] = paths
        outcome["test_logits"] = logits

    if params.export_dir and chief:
        outcome["export_dir"] = export_classifier(
            model, params.export_dir, params.spm_model_file or params.vocab_file, params.do_lower_case,
            params.max_seq_length, threshold=params.threshold_to_export, overwrite=True,
            label_list=None if regression else label_list)
    return outcome


def _load_final_weights(model, params, manager):
    """Puts the weights to predict and export with into `model`: the best checkpoint, else the latest, else those
    of --init_checkpoint (already loaded). Returns what was used."""
    best = tf.train.latest_checkpoint(os.path.join(params.output_dir, BEST_DIR))
    if best:
        tf.train.Checkpoint(model=model).read(best).expect_partial()
        return best
    if manager.latest_checkpoint:
        tf.train.Checkpoint(model=model).read(manager.latest_checkpoint).expect_partial()
        return manager.latest_checkpoint
    if params.init_checkpoint:
        return params.init_checkpoint
    raise RunError(f"nothing to predict with: no checkpoint in {params.output_dir} and no --init_checkpoint")

