"""SQuAD v1.1 and v2.0, as the original's `run_squad_v1.py` / `run_squad_v2.py` (one task; `version_2_with_negative`
selects v2.0).

What differs from the other tasks:

* data: `data.squad` reads the JSON, aligns SentencePiece pieces to the context characters and cuts windows
  (`doc_stride`); windows are cached as TFRecords; v2.0 predicts in batches of windows of similar length cut to
  their longest (`dynamic_padding`; the same predictions: the head masks padding), v1.1 at max_seq_length (the
  original's n-best ranks every position's logit, padding included, so cutting would change answers); the number
  of training steps comes from the number of training questions, `questions / train_batch_size x
  num_train_epochs`, with `warmup_proportion` of them warm-up (AdamW), as the original;
* the model: `AlbertForSquad` (the v1.1 span head, or v2.0's answer verifier);
* evaluation: prediction of `predict_file`, post-processing (`evaluation.squad_postprocessing`) and the official
  scores when the file has answers; the best checkpoint is picked by F1, as the original's polling loop did;
* predictions: `predictions.json`, `nbest_predictions.json` (and `null_odds.json` for v2.0, whose null threshold
  is tuned on `predict_file` when it has answers and none is given, as the original);
* the export: `<export_dir>/ids/<step>/` and, with the SentencePiece model, `<export_dir>/text/<step>/`; with
  `export_huggingface_dir` (v1.1), also the Hugging Face folder (`AlbertForQuestionAnswering` and the tokenizer)
  of the final weights, after the run (`huggingface_export.export_huggingface`).
"""

import dataclasses
import logging
import os

import keras
import tensorflow as tf

from albert_tf import fileio, task_table
from albert_tf.checkpoints import huggingface
from albert_tf.config import AlbertConfig
from albert_tf.data import squad
from albert_tf.errors import UsageError
from albert_tf.evaluation import squad as squad_evaluation
from albert_tf.evaluation import squad_postprocessing as post
from albert_tf.model import AlbertForSquad, dummy_inputs
from albert_tf.model.squad import NEG_INF
from albert_tf.serving.squad import export_squad_model
from albert_tf.settings import NON_NEGATIVE, POSITIVE, PROBABILITY, Range, setting
from albert_tf.tasks.base import TaskBase, check_vocab_size
from albert_tf.tasks.common_settings import (
    albert_config_setting,
    init_checkpoint_setting,
    output_dir_setting,
    spm_model_file_setting,
)
from albert_tf.text.tokenization import FullTokenizer
from albert_tf.train import distribution, runner
from albert_tf.train.ordered_prediction import predict_in_order
from albert_tf.train.runner import RUN_WRITES, RuntimeParams, Schedule
from albert_tf.train.steps import TrainStep

TASK_JSON = "task.json"  # the head, for the converter (`python -m albert_tf.convert` of a checkpoint here)

INPUT_KEYS = ("input_ids", "input_mask", "segment_ids", "p_mask")
SQUAD_WRITES = RUN_WRITES + (TASK_JSON, "predictions.json", "nbest_predictions.json", "null_odds.json")
PER_POSITION = ("start_logits", "end_logits", "start_log_probs")


@keras.saving.register_keras_serializable(package="albert_tf")
class TrainableSquad(TrainStep, AlbertForSquad):
    """`AlbertForSquad` with the project's train/test step (the original's clipping across replicas)."""


@dataclasses.dataclass(kw_only=True)
class SquadParams(RuntimeParams):
    """Everything a SQuAD run needs; each `setting` is also `run_squad.py`'s flag of the same name and default (the
    original's), with its help text."""

    random_seed: int = setting(12345, "Seed of the initialisation, the example shuffle and the input order.")
    albert_config: AlbertConfig = albert_config_setting("The albert_config.json of the pre-trained model.")
    spm_model_file: str = spm_model_file_setting(
        "The SentencePiece model the model was trained with (30k-clean.model).", required=True,
        why="SQuAD answers are located by aligning SentencePiece pieces to the context characters; a WordPiece "
            "--vocab_file (the Chinese ALBERT models) is not supported for SQuAD, as in the original release, whose "
            "SQuAD code uses the SentencePiece model directly")
    output_dir: str = output_dir_setting("Where checkpoints, predictions and eval_results.txt are written.",
                                         SQUAD_WRITES)
    version_2_with_negative: bool = setting(False, "SQuAD 2.0: questions may have no answer (the v2 head).")
    train_file: str = setting(None, "SQuAD JSON for training, e.g. train-v1.1.json (a .zip holding it works).",
                              role="input_file")
    predict_file: str = setting(None, "SQuAD JSON to predict, e.g. dev-v1.1.json; scored when it has answers.",
                                role="input_file", trains=False)
    train_feature_file: str = setting(None, "Training feature cache (TFRecord); written if missing or stale, else "
                                            "read. Default: <output_dir>/train.tf_record.", role="output_file")
    predict_feature_file: str = setting(None, "Prediction feature cache (TFRecord), as --train_feature_file. "
                                              "Default: <output_dir>/predict.tf_record.",
                                        role="output_file", trains=False)
    init_checkpoint: str = init_checkpoint_setting(" (pre-trained, or fine-tuned for --do_predict alone).")
    do_lower_case: bool = setting(True, "Lowercase the input (True for the released uncased models).")
    max_seq_length: int = setting(384, "Length of each window: [CLS] question [SEP] context [SEP] + padding.",
                                  bounds=Range(3))
    doc_stride: int = setting(128, "Context pieces between the starts of consecutive windows.", bounds=POSITIVE)
    max_query_length: int = setting(64, "Questions longer than this many pieces keep their first pieces.",
                                    bounds=POSITIVE)
    do_train: bool = setting(False, "Whether to fine-tune on --train_file.", trains=False)
    do_predict: bool = setting(False, "Whether to predict (and score) --predict_file.", trains=False)
    train_batch_size: int = setting(32, "Global batch size for training.", bounds=POSITIVE)
    predict_batch_size: int = setting(8, "Batch size for predictions.", bounds=POSITIVE, trains=False)
    learning_rate: float = setting(5e-5, "The initial learning rate (AdamW, as the original).",
                                   bounds=Range(0, low_open=True))
    num_train_epochs: float = setting(3.0, "Epochs over the training questions (steps = questions / batch x epochs, "
                                           "as the original).", bounds=NON_NEGATIVE, trains=False)
    warmup_proportion: float = setting(0.1, "Proportion of the steps with linear learning-rate warmup.",
                                       bounds=PROBABILITY)
    save_checkpoints_steps: int = setting(1000, "How often to save a checkpoint.", bounds=POSITIVE, trains=False)
    keep_checkpoint_max: int = setting(5, "How many checkpoints to keep.", bounds=NON_NEGATIVE, trains=False)
    iterations_per_loop: int = setting(1000, "Steps per call into the device (Keras steps_per_execution).",
                                       bounds=POSITIVE, trains=False)
    n_best_size: int = setting(20, "Candidates per window (v1.1) and length of the n-best lists.",
                               bounds=POSITIVE, trains=False)
    max_answer_length: int = setting(30, "Longest answer, in pieces.", bounds=POSITIVE, trains=False)
    start_n_top: int = setting(5, "v2.0: beam size for the start positions.", bounds=POSITIVE, trains=False)
    end_n_top: int = setting(5, "v2.0: beam size for the end positions.", bounds=POSITIVE, trains=False)
    dropout_prob: float = setting(0.1, "v2.0: dropout of the answerability layer.", bounds=Range(0, 1, high_open=True))
    null_score_diff_threshold: float = setting(None, "v2.0: answer \"\" when a question's null score is above this. "
                                                     "Default: tuned on --predict_file when it has answers (as the "
                                                     "original), else 0.0.", trains=False)
    dynamic_padding: bool = setting(True, "SQuAD 2.0: predict in batches of windows of similar length, each cut to "
                                          "its longest window (same predictions, less work; else padded to "
                                          "--max_seq_length). v1.1 and TPUs always pad to --max_seq_length (the "
                                          "original's v1.1 n-best ranks padding positions too).", trains=False)
    export_dir: str = setting(None, "Where to write the SavedModels (ids/ and text/).",
                              role="output_tree", trains=False)
    export_huggingface_dir: str = setting(None, "SQuAD v1.1: where to write, after the run, the Hugging Face folder "
                                                "of the final weights (AlbertForQuestionAnswering, config and "
                                                "tokenizer); an earlier export there is replaced.",
                                          role="output_tree", trains=False)


def padded_to(model, seq_length):
    """`model` for batches cut to their longest window (v2.0's dynamic padding), with its per-position outputs
    (`start_logits`, `end_logits`, `start_log_probs` [B, T]) padded back to [B, seq_length] with -1e30, the
    masked value, so every batch gives arrays of one shape. The positions added never hold an answer."""
    def call(inputs, training=False):
        outputs = model(inputs, training=training)
        return {name: tf.pad(value, [[0, 0], [0, seq_length - tf.shape(value)[1]]], constant_values=-NEG_INF)
                if name in PER_POSITION else value for name, value in outputs.items()}

    return call


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


class SquadTask(TaskBase):
    """The `run_squad.py` task."""

    name = "squad"

    def __init__(self):
        self.tokenizer_ = None
        self.train_examples = None
        self.predict_examples = None
        self.train = None
        self.predict_set = None
        self.gold = None
        self.threshold = None  # v2.0: the null threshold the last prediction used (served by the export)
        self.static_shapes = False  # TPUs: windows padded to max_seq_length
        self.chief = True  # this process writes the run's outputs (`check` asks the strategy)

    def check(self, params, strategy):
        if not (params.do_train or params.do_predict or params.export_dir or params.export_huggingface_dir):
            raise UsageError("At least one of --do_train, --do_predict, --export_dir or --export_huggingface_dir "
                             "must be given.")
        if params.do_train and not params.train_file:
            raise UsageError("--do_train needs --train_file")
        if params.do_predict and not params.predict_file:
            raise UsageError("--do_predict needs --predict_file")
        if params.export_huggingface_dir:
            if params.version_2_with_negative:
                raise UsageError("--export_huggingface_dir: Hugging Face's AlbertForQuestionAnswering is the v1.1 "
                                 "span head; it has no place for SQuAD 2.0's answer verifier (leave out "
                                 "--version_2_with_negative or --export_huggingface_dir)")
            huggingface.check_export_folder(params.export_huggingface_dir,
                                            f"--export_huggingface_dir {params.export_huggingface_dir}")
        squad.check_lengths(params.max_seq_length, params.max_query_length, params.doc_stride)
        self.static_shapes = isinstance(strategy, tf.distribute.TPUStrategy)
        self.chief = distribution.is_chief(strategy)
        if params.version_2_with_negative and (params.start_n_top > params.max_seq_length
                                               or params.end_n_top > params.max_seq_length):
            raise UsageError("--start_n_top and --end_n_top must not exceed --max_seq_length")
        if params.do_predict:
            self.check_batch_sizes(params, strategy, ["predict_batch_size"])
        self.tokenizer_ = FullTokenizer(spm_model_file=params.spm_model_file, do_lower_case=params.do_lower_case)
        check_vocab_size(self.tokenizer_, params.spm_model_file, params.albert_config)
        if params.do_train:
            self.train_examples = squad.read_examples(params.train_file, True, params.random_seed)
            steps = self.train_schedule(params).num_train_steps
            if steps < 1:
                raise UsageError(f"{len(self.train_examples[0])} training questions at --train_batch_size "
                                 f"{params.train_batch_size} x --num_train_epochs {params.num_train_epochs} make no "
                                 "step")
        if params.do_predict:
            self.predict_examples = squad.read_examples(params.predict_file, False)
            data = squad.load_squad_json(params.predict_file)
            has_gold = any(qa.get("answers") or qa.get("is_impossible")
                           for article in data["data"] for p in article["paragraphs"] for qa in p["qas"])
            self.gold = data if has_gold else None
            stats = self.predict_examples[1]
            if stats.impossible and not params.version_2_with_negative:
                logging.warning("%s has %d unanswerable (is_impossible) questions; the v1.1 head always answers. "
                                "Pass --version_2_with_negative for SQuAD 2.0.", params.predict_file,
                                stats.impossible)

    def train_schedule(self, params):
        steps = warmup = 1
        if params.do_train and self.train_examples is not None:
            # As the original: steps from the number of questions (not windows), warmup a proportion of them.
            steps = int(len(self.train_examples[0]) / params.train_batch_size * params.num_train_epochs)
            warmup = int(steps * params.warmup_proportion)
        return Schedule(steps, warmup, 0, 1.0, "adamw", params.learning_rate, params.save_checkpoints_steps,
                        params.keep_checkpoint_max, params.iterations_per_loop, params.train_batch_size)

    def prepare(self, params, strategy, cache_dir):
        record = os.path.join(params.output_dir, TASK_JSON)
        if cache_dir == params.output_dir and not tf.io.gfile.exists(record):  # the chief; what the converter reads
            fileio.write_json(record, {"task_name": "squad",
                                       "version_2_with_negative": params.version_2_with_negative})
        if params.do_train:
            self.train = squad.build_or_load_features(
                params.train_file, params.train_feature_file or os.path.join(cache_dir, "train.tf_record"),
                self.tokenizer_, params.max_seq_length, params.doc_stride, params.max_query_length, is_training=True,
                shuffle_seed=params.random_seed, examples=self.train_examples)
            logging.info("Training on %d questions (%d windows)", len(self.train.examples), self.train.num_features)
        if params.do_predict:
            self.predict_set = squad.build_or_load_features(
                params.predict_file, params.predict_feature_file or os.path.join(cache_dir, "predict.tf_record"),
                self.tokenizer_, params.max_seq_length, params.doc_stride, params.max_query_length,
                is_training=False, examples=self.predict_examples)

    def train_files(self, params):
        return [self.train.feature_file]

    def primary_metric(self, params):
        return task_table.get("squad-v2" if params.version_2_with_negative else "squad").scoring.primary

    def build_model(self, params):
        model = TrainableSquad(params.albert_config, version_2=params.version_2_with_negative,
                               start_n_top=params.start_n_top, end_n_top=params.end_n_top,
                               dropout_prob=params.dropout_prob)
        model(dummy_inputs(seq_length=4), training=False)
        return model

    def train_dataset(self, params, input_context, skip_batches):
        return squad.training_dataset(self.train.feature_file, params.max_seq_length,
                                      input_context.get_per_replica_batch_size(params.train_batch_size),
                                      seed=params.random_seed, input_context=input_context,
                                      skip_batches=skip_batches)

    def has_dev(self, params):
        return bool(params.do_predict and self.gold is not None)

    # -- prediction ---------------------------------------------------------------------------------------------

    def _answers(self, model, params, strategy):
        """Predictions of `predict_file` with the model's weights: (files' contents, results, outcome extras)."""
        data = self.predict_set
        # v1.1 pads to max_seq_length: the original's n-best ranks the logits of every position, padding included.
        dynamic = params.dynamic_padding and params.version_2_with_negative and not self.static_shapes
        outputs = predict_in_order(
            padded_to(model, params.max_seq_length) if dynamic else model,
            lambda context: squad.prediction_dataset(
                data.feature_file, params.max_seq_length, params.predict_batch_size, data.num_features, context,
                dynamic_padding=dynamic, min_length=max(params.start_n_top, params.end_n_top)),
            data.num_features, params.predict_batch_size, INPUT_KEYS, strategy)
        unique_ids = [f.unique_id for f in data.features]
        result_dict, examples, features = {}, data.examples, data.features
        if not params.version_2_with_negative:
            results = post.raw_results_v1(unique_ids, outputs["start_logits"], outputs["end_logits"])
            post.accumulate_predictions_v1(result_dict, examples, features, results, params.n_best_size,
                                           params.max_answer_length)
            predictions, nbest = post.write_predictions_v1(result_dict, examples, features, params.n_best_size)
            scores = evaluate_predictions(self.gold, False, predictions) if self.gold else None
            return {"predictions": predictions, "nbest_predictions": nbest}, scores, {}
        cls_dict = {}
        results = post.raw_results_v2(unique_ids, outputs)
        post.accumulate_predictions_v2(result_dict, cls_dict, examples, features, results, params.n_best_size,
                                       params.max_answer_length, params.start_n_top, params.end_n_top)
        _, null_odds, best_non_null, _ = post.write_predictions_v2(result_dict, cls_dict, examples, features,
                                                                   params.n_best_size)
        threshold, source = params.null_score_diff_threshold, "--null_score_diff_threshold"
        if threshold is None and self.gold:
            has_answer = squad_evaluation.has_answer_map(self.gold)
            _, f1_raw = squad_evaluation.raw_scores_v2(self.gold, best_non_null)
            _, threshold = squad_evaluation.realisable_threshold(best_non_null, f1_raw, null_odds, has_answer)
            source = "tuned on this file for the best F1, as the original"
        elif threshold is None:
            threshold, source = 0.0, "default 0.0 (no gold answers to tune on)"
        predictions, null_odds, best_non_null, nbest = post.write_predictions_v2(
            result_dict, cls_dict, examples, features, params.n_best_size, threshold)
        scores = evaluate_predictions(self.gold, True, predictions, null_odds, best_non_null) if self.gold else None
        files = {"predictions": predictions, "nbest_predictions": nbest, "null_odds": null_odds}
        return files, scores, {"null_score_diff_threshold": threshold, "null_score_diff_threshold_source": source}

    def evaluate(self, model, params, strategy):
        _, scores, _ = self._answers(model, params, strategy)
        return {k: v for k, v in scores.items() if not isinstance(v, list)}

    def predict(self, model, params, strategy, output_dir):
        contents, scores, extras = self._answers(model, params, strategy)
        files = {name: post.write_json_atomic(os.path.join(output_dir, f"{name}.json"), value)
                 for name, value in contents.items()}
        outcome = {"files": files, "predict_examples": len(self.predict_set.examples),
                   "predict_features": self.predict_set.num_features, **extras}
        if scores is not None:
            outcome["eval_results"] = scores
        self.threshold = extras.get("null_score_diff_threshold", params.null_score_diff_threshold)
        return outcome

    def export(self, model, params, export_dir):
        base, step = os.path.split(export_dir)
        kinds = ("ids", "text") if params.spm_model_file else ("ids",)
        existing = {kind: os.path.join(base, kind, step) for kind in kinds}
        if all(os.path.exists(path) for path in existing.values()):
            logging.warning("%s exist (exports of step %s): kept as they are", ", ".join(existing.values()), step)
            return existing
        threshold = self.threshold if self.threshold is not None else params.null_score_diff_threshold
        return export_squad_model(model, base, spm_model_file=params.spm_model_file,
                                  do_lower_case=params.do_lower_case, max_seq_length=params.max_seq_length,
                                  doc_stride=params.doc_stride, max_query_length=params.max_query_length,
                                  max_answer_length=params.max_answer_length, n_best_size=params.n_best_size,
                                  null_score_diff_threshold=threshold, version=step)


def run_squad(params, task=None):
    """Fine-tunes (resuming from output_dir), predicts and evaluates, and exports, as `run_squad.py` describes;
    returns the runner's outcome (steps, counts, the paths written, `eval_results`, `export_dir`,
    `export_huggingface_dir`). `task`: the `SquadTask` to run (a new one by default), for its counts after."""
    task = task or SquadTask()
    outcome = runner.run(task, params)
    if params.export_huggingface_dir and task.chief:  # one writer under multi-worker
        # Imported here: tasks.exports imports this module.
        from albert_tf.tasks.huggingface_export import export_huggingface  # pylint: disable=import-outside-toplevel

        outcome["export_huggingface_dir"], _ = export_huggingface(task.build_model(params), params)
    return outcome
