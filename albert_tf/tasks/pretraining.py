"""Pretraining (MLM + SOP), as the original's `run_pretraining.py`: records in, checkpoints, eval results and an
encoder SavedModel out.

What differs from the other tasks: the records are read as they are (`records.pretraining_dataset`, files
sharded per input pipeline), there is no metric to pick a best checkpoint (the original evaluates the final
weights once, `max_eval_steps` batches of `eval_input_file`, else `input_file`), and the export is the encoder
with its `mlm` and `sop` signatures.

With `masked_lm_budget` > 0, training draws new n-gram masks on every pass (`albert_tf.data.masking`, with
`ngram`, `favor_shorter_ngram`, `do_whole_word_mask` as `create_pretraining_data.py` and the tokenizer's [MASK]
id and vocabulary); evaluation keeps the records' stored masks, so its results stay comparable between runs.
"""

import dataclasses
import logging

import keras
import numpy as np
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.data import masking, records
from albert_tf.errors import DataError, UsageError
from albert_tf.model import AlbertForPretraining, dummy_inputs, set_heads_only
from albert_tf.serving.encoder import export_encoder
from albert_tf.settings import NON_NEGATIVE, POSITIVE, PROBABILITY, Range, setting
from albert_tf.tasks.base import TaskBase, check_vocab_size
from albert_tf.tasks.common_settings import albert_config_setting, init_checkpoint_setting, output_dir_setting
from albert_tf.text.tokenization import FullTokenizer, TokenizerError
from albert_tf.train import runner
from albert_tf.train.runner import RUN_WRITES, RuntimeParams, Schedule
from albert_tf.train.steps import TrainStep


@keras.saving.register_keras_serializable(package="albert_tf", name="AlbertPretrainer")
class TrainablePretraining(TrainStep, AlbertForPretraining):
    """`AlbertForPretraining` with the project's train/test step (the original's clipping across replicas)."""


# The earlier name (still the registered Keras name, so saved `.keras` files load); the task models share the
# `Trainable*` scheme.
AlbertPretrainer = TrainablePretraining


@dataclasses.dataclass(kw_only=True)
class PretrainingParams(RuntimeParams):
    """Everything a pretraining run needs; each `setting` is also `run_pretraining.py`'s flag of the same name and
    default (the original's, plus this project's), with its help text."""

    random_seed: int = setting(12345, "Seed of the initialisation, of the input order and of online masks.")
    albert_config: AlbertConfig = albert_config_setting("The albert_config.json of the model to train.")
    input_file: str = setting(help_text="Input TFRecord files: comma-separated globs. Without it: the demo.",
                              flag_default=None, role="input_files")
    output_dir: str = output_dir_setting("Where checkpoints, summaries and eval_results.txt are written.", RUN_WRITES)
    eval_input_file: str = setting(None, "TFRecords to evaluate on (default: --input_file, as the original).",
                                   role="input_files", trains=False)
    init_checkpoint: str = init_checkpoint_setting()
    max_seq_length: int = setting(512, "Sequence length of the records.", bounds=Range(2))
    max_predictions_per_seq: int = setting(20, "Masked positions per sequence in the records.", bounds=POSITIVE)
    do_train: bool = setting(True, "Whether to run training.", trains=False, required=("do_eval",))
    do_eval: bool = setting(False, "Whether to run eval on the eval input.", trains=False)
    train_batch_size: int = setting(4096, "Global batch size for training.", bounds=POSITIVE)
    eval_batch_size: int = setting(64, "Global batch size for eval.", bounds=POSITIVE, trains=False)
    optimizer: str = setting("lamb", "The optimizer for training.", choices=("adamw", "lamb"))
    learning_rate: float = setting(0.00176, "The initial learning rate.", bounds=Range(0, low_open=True))
    poly_power: float = setting(1.0, "The power of the polynomial decay.")
    num_train_steps: int = setting(125000, "Number of training steps.", bounds=NON_NEGATIVE, trains=False)
    num_warmup_steps: int = setting(3125, "Number of warmup steps.", bounds=NON_NEGATIVE)
    start_warmup_step: int = setting(0, "The step at which warmup starts.")
    save_checkpoints_steps: int = setting(5000, "How often to save a checkpoint.", bounds=POSITIVE, trains=False)
    keep_checkpoint_max: int = setting(5, "How many checkpoints to keep.", bounds=NON_NEGATIVE, trains=False)
    iterations_per_loop: int = setting(1000, "Steps run per call into the device (Keras steps_per_execution).",
                                       bounds=POSITIVE, trains=False)
    max_eval_steps: int = setting(100, "Maximum number of eval steps.", bounds=NON_NEGATIVE, trains=False)
    init_from_group0: bool = setting(False, "Initialise every group from group_0 of --init_checkpoint.")
    masked_lm_budget: float = setting(
        0.0, "Online masking: with a value in (0, 1], the records' stored masks are ignored and new n-gram masks "
             "are drawn in the input pipeline on every pass, masking this fraction of each sequence's tokens (as "
             "create_pretraining_data's --masked_lm_prob; at most --max_predictions_per_seq). Needs "
             "--spm_model_file or --vocab_file. 0: the stored masks. Evaluation always uses the stored masks.",
                                      bounds=PROBABILITY)
    # Online masking only, with create_pretraining_data.py's names and defaults.
    ngram: int = setting(3, "Online masking: maximum n-gram length (in words) to mask.", bounds=POSITIVE)
    favor_shorter_ngram: bool = setting(True, "Online masking: p(n) proportional to 1/n (else reversed).")
    do_whole_word_mask: bool = setting(True, "Online masking: mask whole words (from the records' token_boundary) "
                                             "rather than single pieces.")
    export_dir: str = setting(None, "Where to write the SavedModel at the end, as <export_dir>/<global_step>/ "
                                    "(default after training: <output_dir>/saved_model).",
                              role="output_dir", trains=False)
    spm_model_file: str = setting(None, "SentencePiece model, attached to the export (tokenization_info); online "
                                        "masking takes its [MASK] id and vocabulary.", role="input_file")
    vocab_file: str = setting(None, "WordPiece vocabulary, attached to the export (and used by online masking) "
                                    "when no spm model.", role="input_file")
    do_lower_case: bool = setting(True, "Recorded in the export's tokenization_info.")


class PretrainingTask(TaskBase):
    """The `run_pretraining.py` task."""

    name = "pretraining"
    train_data_flag = "--input_file"

    def check(self, params, strategy):
        self.check_batch_sizes(params, strategy, ["train_batch_size"] if params.do_train else [])
        if params.do_eval:
            self.check_batch_sizes(params, strategy, ["eval_batch_size"])
        eval_flag = "--eval_input_file" if params.eval_input_file else "--input_file"
        for flag, patterns in (("--input_file", params.input_file), ("--eval_input_file", params.eval_input_file)):
            if not patterns:
                continue
            try:
                files = records.expand_file_patterns(patterns)
            except ValueError as err:
                raise DataError(f"{flag}: {err}") from None
            records.check_record_lengths(files[:records.MAX_FILES_CHECKED], params.max_seq_length,
                                         params.max_predictions_per_seq)
            read = (flag == "--input_file" and params.do_train) or (flag == eval_flag and params.do_eval)
            if read and not records.has_records(files):
                raise DataError(f"{flag} {patterns} holds no records (an empty file?)")
        self.tokenizer_file(params)
        if params.masked_lm_budget:
            self.masking(params)

    def tokenizer_file(self, params):
        """The tokenizer file attached to the export (checked to load and to fit the embedding table)."""
        if params.spm_model_file and params.vocab_file:
            logging.warning("Both --spm_model_file and --vocab_file given: the SentencePiece model is used, "
                            "--vocab_file is ignored.")
        path = params.spm_model_file or params.vocab_file
        if not path or "://" in path:  # remote files are attached at export time, unchecked
            return path
        try:
            tokenizer = FullTokenizer(spm_model_file=params.spm_model_file,
                                      vocab_file=None if params.spm_model_file else params.vocab_file,
                                      do_lower_case=params.do_lower_case)
        except OSError as err:
            raise TokenizerError(str(err)) from None
        check_vocab_size(tokenizer, path, params.albert_config)
        return path

    def train_schedule(self, params):
        return Schedule(params.num_train_steps, params.num_warmup_steps, params.start_warmup_step, params.poly_power,
                        params.optimizer, params.learning_rate, params.save_checkpoints_steps,
                        params.keep_checkpoint_max, params.iterations_per_loop, params.train_batch_size)

    def build_model(self, params):
        model = set_heads_only(TrainablePretraining(params.albert_config))  # the loss reads the heads only
        model(dummy_inputs(num_predictions=1), training=False)
        return model

    def train_files(self, params):
        return records.expand_file_patterns(params.input_file)

    def eval_files(self, params):
        if params.eval_input_file:
            return records.expand_file_patterns(params.eval_input_file), "--eval_input_file"
        return self.train_files(params), "--input_file"

    def masking(self, params):
        """The online masking config of `--masked_lm_budget` > 0 (None at 0), from the run's tokenizer."""
        if not params.masked_lm_budget:
            return None
        masking.check_budget(params.masked_lm_budget)
        if not (params.spm_model_file or params.vocab_file):
            raise UsageError("--masked_lm_budget > 0 (online masking) needs the records' tokenizer for the [MASK] "
                             "id and the vocabulary of random replacements: give --spm_model_file (or --vocab_file "
                             "for WordPiece models)")
        tokenizer = self.tokenizer(params)
        return masking.MaskingConfig.from_tokenizer(
            tokenizer, params.masked_lm_budget, params.max_predictions_per_seq, ngram=params.ngram,
            favor_shorter_ngram=params.favor_shorter_ngram, do_whole_word_mask=params.do_whole_word_mask,
            seed=params.random_seed)

    def train_dataset(self, params, input_context, skip_batches):
        return records.pretraining_dataset(
            params.input_file, params.max_seq_length, params.max_predictions_per_seq,
            input_context.get_per_replica_batch_size(params.train_batch_size), is_training=True,
            seed=params.random_seed, input_context=input_context, skip_batches=skip_batches,
            masking=self.masking(params))

    def has_dev(self, params):
        return params.do_eval

    def evaluate(self, model, params, strategy):
        def eval_fn(context):
            return records.pretraining_dataset(
                params.eval_input_file or params.input_file, params.max_seq_length, params.max_predictions_per_seq,
                context.get_per_replica_batch_size(params.eval_batch_size), is_training=False, input_context=context)

        dataset = strategy.distribute_datasets_from_function(eval_fn)
        results = model.evaluate(dataset, steps=eval_steps(params), return_dict=True, verbose=0)
        return {k: float(v) for k, v in results.items()}

    def export(self, model, params, export_dir):
        return export_encoder(model, export_dir, tokenizer_file=self.tokenizer_file(params),
                              do_lower_case=params.do_lower_case)


def eval_steps(params):
    """How many batches the eval reads: `max_eval_steps` (0: no limit), fewer when the eval records hold fewer
    full batches (one pass, as the original's eval input). Keras gets the exact count because it warns that the
    input "ran out of data" whenever it reaches the end of a dataset of unknown length."""
    files = records.expand_file_patterns(params.eval_input_file or params.input_file)
    dataset = tf.data.TFRecordDataset(files)
    if params.max_eval_steps:
        dataset = dataset.take(params.max_eval_steps * params.eval_batch_size)
    count = int(dataset.reduce(np.int64(0), lambda n, _: n + 1))
    if count < params.eval_batch_size:
        raise DataError(f"the eval records ({', '.join(files[:3])}{', ...' if len(files) > 3 else ''}) hold {count} "
                        f"record(s), fewer than one batch of --eval_batch_size={params.eval_batch_size}")
    return count // params.eval_batch_size


def run_pretraining(params):
    """Trains (resuming from `output_dir`), evaluates and exports as `run_pretraining.py` does; returns the
    runner's outcome (step, eval results, paths)."""
    return runner.run(PretrainingTask(), params)
