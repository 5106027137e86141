"""Sentence (pair) classification and regression, as the original's `run_classifier.py`: GLUE or a user's own
CSV/TSV files.

What differs from the other tasks:

* data: `glue` processors read the splits, their features are cached as TFRecords (`glue.cached_features`),
  batches are padded to their longest example (`dynamic_padding`, default on; TPUs pad to max_seq_length), and
  with `length_bucketing` training batches group examples of similar length;
* the model: `AlbertClassifier` (dropout + dense on the pooled output; cross-entropy, or squared error for
  regression), with an accuracy metric while training;
* the metric that picks the best checkpoint: the task's in `albert_tf.task_table` (`--best_metric` overrides);
* predictions: `test_results.tsv` (class probabilities, or the score) and `submit_results.tsv` (a GLUE
  submission: `index<TAB>prediction`, label strings);
* the export: `serving.classifier.export_classifier` (ids, tf.Examples, text and text pairs); with
  `export_huggingface_dir`, also the Hugging Face folder (`AlbertForSequenceClassification` with the label names
  and the tokenizer) of the final weights, after the run (`huggingface_export.export_huggingface`).

A directory records the task's labels in `task.json` and refuses a run with other labels.
"""

import dataclasses
import json
import os

import keras
import tensorflow as tf

from albert_tf import fileio, task_table
from albert_tf.checkpoints import huggingface
from albert_tf.config import AlbertConfig
from albert_tf.data import glue
from albert_tf.errors import RunError, UsageError
from albert_tf.evaluation import glue as glue_metrics
from albert_tf.model import AlbertClassifier, dummy_inputs
from albert_tf.model.encoder import as_config
from albert_tf.serving.classifier import export_classifier
from albert_tf.settings import NON_NEGATIVE, POSITIVE, Range, setting
from albert_tf.tasks.base import TaskBase
from albert_tf.tasks.common_settings import (
    albert_config_setting,
    do_lower_case_setting,
    init_checkpoint_setting,
    output_dir_setting,
    spm_model_file_setting,
    vocab_file_setting,
)
from albert_tf.text.preprocessor import AlbertTextPreprocessor
from albert_tf.train import distribution, runner
from albert_tf.train.ordered_prediction import predict_in_order
from albert_tf.train.runner import RUN_WRITES, RuntimeParams, Schedule
from albert_tf.train.steps import TrainStep
from albert_tf.train.text_inputs import TextInputs

TASK_JSON = "task.json"
CLASSIFIER_WRITES = RUN_WRITES + (TASK_JSON, "test_results.tsv", "submit_results.tsv")


@keras.saving.register_keras_serializable(package="albert_tf")
class TrainableClassifier(TextInputs, TrainStep, AlbertClassifier):
    """`AlbertClassifier` with the project's train/test step (the original's clipping across replicas).

    With a `preprocessor` (an `AlbertTextPreprocessor`; see `text_classifier`) its `fit`, `evaluate` and `predict`
    also take raw texts or text pairs, tokenized in the `tf.data` pipeline (`albert_tf.train.text_inputs`).
    """


def _names_a_task(data_dir, values):
    """--data_dir with neither own files nor a `processor` holds a named task's folders: --task_name must name one
    of `task_table`'s `run_classifier.py` tasks."""
    del data_dir
    if values.get("processor") is not None or any(values.get(name) for name in glue.OWN_FILE_OPTIONS):
        return
    try:
        glue.get_processor(values.get("task_name"))
    except glue.UnknownTaskError as err:
        raise UsageError(f"--task_name={values.get('task_name') or ''}: {err} (or give your own --train_file/"
                         "--dev_file/--test_file)") from None


@dataclasses.dataclass(kw_only=True)
class ClassifierParams(RuntimeParams):
    """Everything a fine-tuning run needs; each `setting` is also `run_classifier.py`'s flag of the same name and
    default, with its help text.

    The task's reader is `processor` when given (a `glue.DataProcessor` built in code), else the reader of the
    user's own files (`train_file`, `dev_file`, `test_file` and their columns), else that of the task `task_name`
    names, its files under `data_dir`.
    """

    random_seed: int = setting(12345, "Seed of the initialisation and of the input order.")
    albert_config: AlbertConfig = albert_config_setting("The albert_config.json of the model (its architecture).")
    output_dir: str = output_dir_setting("Where checkpoints, results and predictions are written.",
                                         CLASSIFIER_WRITES)
    task_name: str = setting(None, task_table.task_name_help())
    data_dir: str = setting(None, "The input data dir: the GLUE folder holding the task's folder (e.g. SST-2/), or "
                                  "the task's folder itself. With --train_file etc., relative paths are looked up "
                                  "here.", role="input_dir", check=_names_a_task)
    processor: glue.DataProcessor = None
    spm_model_file: str = spm_model_file_setting()
    vocab_file: str = vocab_file_setting()
    cached_dir: str = setting(None, "Where the feature TFRecords are cached (default: --output_dir). Files are keyed "
                                    "by task, split, sequence length, data and tokenizer, so a stale cache is never "
                                    "reused.", role="output_dir", writes=("*.tf_record",), trains=False)
    init_checkpoint: str = init_checkpoint_setting(" (usually a pretrained model).")
    do_lower_case: bool = do_lower_case_setting()
    max_seq_length: int = setting(512, "The maximum total input sequence length after tokenization; longer "
                                       "sequences are truncated.", bounds=Range(3))
    do_train: bool = setting(False, "Whether to run training.", trains=False, required=("do_eval", "do_predict"))
    do_eval: bool = setting(False, "Whether to evaluate the checkpoints on the dev set.", trains=False)
    do_predict: bool = setting(False, "Whether to predict the test set.", trains=False)
    train_batch_size: int = setting(32, "Total (global) batch size for training.", bounds=POSITIVE)
    eval_batch_size: int = setting(8, "Total batch size for eval.", bounds=POSITIVE, trains=False)
    predict_batch_size: int = setting(8, "Total batch size for predict.", bounds=POSITIVE, trains=False)
    learning_rate: float = setting(5e-5, "The initial learning rate.", bounds=Range(0, low_open=True))
    train_step: int = setting(1000, "Total number of training steps.", bounds=NON_NEGATIVE, trains=False)
    warmup_step: int = setting(0, "Number of steps of linear learning-rate warmup.", bounds=NON_NEGATIVE)
    save_checkpoints_steps: int = setting(1000, "How often to save (and, with --do_eval, evaluate) a checkpoint.",
                                          bounds=POSITIVE, trains=False)
    keep_checkpoint_max: int = setting(5, "How many checkpoints to keep (0: all). The best one is kept apart in "
                                          "best_checkpoint/.", bounds=NON_NEGATIVE, trains=False)
    iterations_per_loop: int = setting(1000, "Steps run per call into the device (Keras steps_per_execution).",
                                       bounds=POSITIVE, trains=False)
    optimizer: str = setting("adamw", "The optimizer.", choices=("adamw", "lamb"))
    dropout_prob: float = setting(0.1, "Dropout rate on the pooled output before the classifier (the original "
                                       "hard-codes 0.1).", bounds=Range(0, 1, high_open=True))
    head_only_steps: int = setting(0, "Train only the classifier for the first steps, the encoder held (a linear "
                                      "probe, then fine-tuning of the whole model: LP-FT); 0: none.",
                                   bounds=NON_NEGATIVE)
    dynamic_padding: bool = setting(True, "Pad each batch to its longest example (else to --max_seq_length): same "
                                          "predictions, less work. TPUs always pad to --max_seq_length.", trains=False)
    length_bucketing: bool = setting(False, "With --dynamic_padding, put training examples of similar length in the "
                                            "same batch (faster; changes which examples share a batch, where the "
                                            "original draws batches in shuffled order).")
    export_dir: str = setting(None, "Where to write the SavedModel (signatures on ids, tf.Examples and text).",
                              role="output_dir", trains=False)
    export_huggingface_dir: str = setting(None, "Where to write, after the run, the Hugging Face folder of the "
                                                "final weights (AlbertForSequenceClassification with the label "
                                                "names, config and tokenizer); an earlier export there is replaced.",
                                          role="output_tree", trains=False)
    # The flag's default is the original's NaN, which the script reads as None (no threshold).
    threshold_to_export: float = setting(None, "A classification threshold to serve with the exported model (output "
                                               "'threshold').", flag_default=float("nan"), trains=False)
    best_metric: str = setting(None, task_table.best_metric_help(), trains=False)
    # A user's own CSV/TSV files instead of a named task (`run_classifier.py` builds no processor: the task reads
    # these); a `processor` given in code stands in for them.
    train_file: str = setting(None, "Your own data: the training file (CSV/TSV).", role="input_file",
                              under="data_dir", required=("data_dir", "dev_file", "test_file", "processor"),
                              why="a GLUE --task_name reads its files from --data_dir; your own data comes from "
                                  "--train_file, --dev_file and --test_file")
    dev_file: str = setting(None, "Your own data: the dev file.", role="input_file", under="data_dir")
    test_file: str = setting(None, "Your own data: the test file (no label column needed).", role="input_file",
                             under="data_dir")
    text_a_column: str = setting("0", "Your own data: column of the (first) text: 0-based position or header name.")
    text_b_column: str = setting(None, "Your own data: column of the second text of a pair.")
    label_column: str = setting("1", "Your own data: column of the label.")
    guid_column: str = setting(None, "Your own data: column of an example id (the index in submit_results.tsv).")
    delimiter: str = setting("tab", "Your own data: field separator: tab, comma, or one character.")
    has_header: bool = setting(True, "Your own data: whether the files' first row is a header.")
    label_list: list = setting(None, "Your own data: the labels in index order (default: sorted labels of the train "
                                     "file).")
    regression: bool = setting(False, "Your own data: the label is a number (one output, squared-error loss).")


def task_processor(params):
    """The reader of a `ClassifierParams`' task (see its docstring)."""
    if params.processor is not None:
        return params.processor
    return glue.get_processor(
        params.task_name, train_file=params.train_file, dev_file=params.dev_file, test_file=params.test_file,
        text_a_column=params.text_a_column, text_b_column=params.text_b_column, label_column=params.label_column,
        guid_column=params.guid_column, delimiter=params.delimiter, header=params.has_header,
        labels=params.label_list or None, regression=params.regression, data_dir=params.data_dir)


def build_classifier(config, num_labels, dropout_prob=0.1, preprocessor=None, head_only_steps=0):
    """A trainable `AlbertClassifier` with its weights created (call it under a strategy's scope);
    `head_only_steps`: see `train.steps.TrainStep`."""
    model = TrainableClassifier(config, num_labels, dropout_prob=dropout_prob, preprocessor=preprocessor,
                                head_only_steps=head_only_steps)
    model(dummy_inputs(), training=False)
    return model


def text_classifier(config, num_labels=2, spm_model_file=None, vocab_file=None, do_lower_case=True,
                    max_seq_length=128, dropout_prob=0.1, **tokenizer_args):
    """A `TrainableClassifier` whose `fit`, `evaluate` and `predict` take raw text.

    `x` may be a list or numpy array of texts, a tuple `(texts_a, texts_b)` of pairs, or a `tf.data.Dataset` of
    batches of texts / `(texts, labels)` / `((texts_a, texts_b), labels)`. The tokenizer is `FullTokenizer`'s, in
    the graph (`AlbertTextPreprocessor`: SentencePiece with `spm_model_file`, else WordPiece with `vocab_file`;
    `tokenizer_args`: `max_input_chars_per_word`, `map_latex_quotes`) and runs in the `tf.data` pipeline, not in
    the model. `model.save("x.keras")` stores the tokenizer file; `keras.saving.load_model` restores it.
    Load pretrained weights with `albert_tf.load_checkpoint(model, path)`; call it under a strategy's scope.
    """
    config = as_config(config)
    if max_seq_length > config.max_position_embeddings:
        raise ValueError(f"max_seq_length {max_seq_length} exceeds the model's max_position_embeddings "
                         f"{config.max_position_embeddings}")
    preprocessor = AlbertTextPreprocessor(spm_model_file=spm_model_file, vocab_file=vocab_file,
                                          do_lower_case=do_lower_case, max_seq_length=max_seq_length,
                                          name="preprocessor", **tokenizer_args)
    return build_classifier(config, num_labels, dropout_prob, preprocessor=preprocessor)


def write_predictions(output_dir, examples, logits, label_list, regression):
    """Writes `test_results.tsv` (per example: the class probabilities, tab-separated; or the score) and
    `submit_results.tsv` (GLUE submission: header `index<TAB>prediction`, then guid and label string or score).
    Returns the two paths."""
    probabilities = glue_metrics.probabilities_from_logits(logits, regression)
    predictions = glue_metrics.predictions_from_logits(logits, regression)
    results = "".join("\t".join(repr(float(p)) for p in probs) + "\n" for probs in probabilities)
    submit = ["index\tprediction\n"]
    for example, prediction in zip(examples, predictions):
        label = repr(float(prediction)) if regression else str(label_list[int(prediction)])
        submit.append(f"{example.guid}\t{label}\n")
    paths = os.path.join(output_dir, "test_results.tsv"), os.path.join(output_dir, "submit_results.tsv")
    fileio.write_text(paths[0], results)
    fileio.write_text(paths[1], "".join(submit))
    return paths


class ClassificationTask(TaskBase):
    """The `run_classifier.py` task."""

    name = "classification"

    def __init__(self):
        self.processor = None
        self.tokenizer_ = None
        self.static_shapes = False
        self.splits = {}
        self.chief = True  # this process writes the run's outputs (`check` asks the strategy)

    # -- checks and data ------------------------------------------------------------------------------------------

    def check(self, params, strategy):
        self.processor = task_processor(params)
        self.tokenizer_ = self.tokenizer(params)
        self.static_shapes = isinstance(strategy, tf.distribute.TPUStrategy)
        self.chief = distribution.is_chief(strategy)
        names = [n for n, on in (("eval_batch_size", params.do_eval), ("predict_batch_size", params.do_predict))
                 if on]
        self.check_batch_sizes(params, strategy, names)
        metric = self.primary_metric(params)
        regression = self.processor.is_regression
        sample = [0.0, 1.0] if regression else [0, 1]
        reported = sorted(set(glue_metrics.task_metrics(self.processor.task_name, sample, sample, regression,
                                                        self.processor.num_labels)) - {"MSE"})
        if metric not in reported:
            raise UsageError(f"--best_metric {metric!r} is not reported for task {self.processor.task_name} "
                             f"(higher-is-better results: {', '.join(reported)})")
        self._check_task_record(params.output_dir)
        if params.export_huggingface_dir:
            huggingface.check_export_folder(params.export_huggingface_dir,
                                            f"--export_huggingface_dir {params.export_huggingface_dir}")
        # Read every split first, so that data errors (an empty dev.tsv too) come before any model work.
        wanted = [s for s, on in (("train", params.do_train), ("dev", params.do_eval), ("test", params.do_predict))
                  if on]
        self.splits = {split: glue.read_split(self.processor, params.data_dir, split)[1] for split in wanted}

    def _task_record(self):
        return {"task_name": self.processor.task_name, "labels": self.processor.get_labels(),
                "regression": self.processor.is_regression}

    def _check_task_record(self, output_dir):
        path = os.path.join(output_dir, TASK_JSON)
        if not tf.io.gfile.exists(path):
            return
        with tf.io.gfile.GFile(path, "r") as f:
            existing = json.load(f)
        record = self._task_record()
        if existing.get("labels") != record["labels"] or existing.get("regression") != record["regression"]:
            raise RunError(f"--output_dir {output_dir} holds a run with labels {existing.get('labels')} "
                           f"(regression={existing.get('regression')}); this task has labels {record['labels']} "
                           f"(regression={record['regression']}); use a new --output_dir")

    def prepare(self, params, strategy, cache_dir):
        path = os.path.join(params.output_dir, TASK_JSON)
        if cache_dir == params.output_dir and not tf.io.gfile.exists(path):
            fileio.write_json(path, self._task_record())
        self.features = {split: glue.cached_features(self.processor, params.data_dir, split, self.tokenizer_,
                                                     params.max_seq_length, params.cached_dir or cache_dir, examples)
                         for split, examples in self.splits.items()}

    def train_files(self, params):
        return [self.features["train"].path]

    # -- model and training ---------------------------------------------------------------------------------------

    def primary_metric(self, params):
        processor = self.processor or task_processor(params)
        return params.best_metric or glue_metrics.primary_metric(processor.task_name, processor.is_regression)

    def train_schedule(self, params):
        return Schedule(params.train_step, params.warmup_step, 0, 1.0, params.optimizer, params.learning_rate,
                        params.save_checkpoints_steps, params.keep_checkpoint_max, params.iterations_per_loop,
                        params.train_batch_size)

    def build_model(self, params):
        return build_classifier(params.albert_config, self.processor.num_labels, params.dropout_prob,
                                head_only_steps=params.head_only_steps)

    def compile_args(self, params):
        if self.processor.is_regression:
            return {}
        return {"metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}

    def train_dataset(self, params, input_context, skip_batches):
        return glue.train_dataset(
            self.features["train"].path, params.max_seq_length,
            input_context.get_per_replica_batch_size(params.train_batch_size), self.processor.is_regression,
            seed=params.random_seed, dynamic_padding=params.dynamic_padding, bucketing=params.length_bucketing,
            static_shapes=self.static_shapes, input_context=input_context, skip_batches=skip_batches)

    # -- evaluation, prediction, export ---------------------------------------------------------------------------

    def has_dev(self, params):
        return params.do_eval

    def logits(self, model, params, strategy, split, batch_size):
        """float32 logits [N, num_labels] of a split's features, in file order."""
        features = self.features[split]
        return predict_in_order(
            model, lambda context: glue.eval_dataset(
                features.path, params.max_seq_length, batch_size, self.processor.is_regression,
                features.num_examples, dynamic_padding=params.dynamic_padding and not self.static_shapes,
                input_context=context),
            features.num_examples, batch_size, glue.FEATURE_NAMES, strategy)

    def evaluate(self, model, params, strategy):
        logits = self.logits(model, params, strategy, "dev", params.eval_batch_size)
        labels = [self.processor.label_index(e.label) for e in self.features["dev"].examples]
        return glue_metrics.evaluation_results(self.processor.task_name, logits, labels,
                                               self.processor.is_regression, self.processor.num_labels)

    def predict(self, model, params, strategy, output_dir):
        logits = self.logits(model, params, strategy, "test", params.predict_batch_size)
        outcome = {"test_logits": logits}
        if output_dir == params.output_dir:
            outcome["test_results_file"], outcome["submit_results_file"] = write_predictions(
                output_dir, self.features["test"].examples, logits, self.processor.get_labels(),
                self.processor.is_regression)
        return outcome

    def export(self, model, params, export_dir):
        regression = self.processor.is_regression
        return export_classifier(model, export_dir, params.spm_model_file or params.vocab_file,
                                 params.do_lower_case, params.max_seq_length, threshold=params.threshold_to_export,
                                 label_list=None if regression else self.processor.get_labels())


def run_classifier(params):
    """Trains, evaluates every checkpoint (keeping the best), predicts and exports as `params` asks; returns the
    runner's outcome (`start_step`, `step`, `eval_results`, `best_step`, `eval_history`, `test_logits`, ...,
    and `export_huggingface_dir`)."""
    task = ClassificationTask()
    outcome = runner.run(task, params)
    if params.export_huggingface_dir and task.chief:  # one writer under multi-worker
        # Imported here: tasks.exports imports this module.
        from albert_tf.tasks.huggingface_export import export_huggingface  # pylint: disable=import-outside-toplevel

        regression = task.processor.is_regression
        outcome["export_huggingface_dir"], _ = export_huggingface(
            task.build_model(params), params, labels=None if regression else task.processor.get_labels(),
            regression=regression)
    return outcome
