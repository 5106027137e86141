"""Export a trained ALBERT for serving: one command per export type.

    # the encoder (TF-Hub style: serving_default, mlm, sop, tokenization_info)
    python export_model.py --export_type=encoder --albert_config_file=albert_base/albert_config.json \
      --init_checkpoint=albert_base/model.ckpt-best --spm_model_file=albert_base/30k-clean.model \
      --export_dir=export/encoder

    # text in, ids out (pair it with the encoder)
    python export_model.py --export_type=preprocessing --spm_model_file=albert_base/30k-clean.model \
      --max_seq_length=128 --export_dir=export/preprocessing

    # a fine-tuned classifier (signatures on ids, tf.Examples, text and text pairs)
    python export_model.py --export_type=classifier --num_labels=2 --albert_config_file=... \
      --init_checkpoint=out/sst2/best_checkpoint --spm_model_file=... --export_dir=export/sst2

    # SQuAD (<export_dir>/ids and <export_dir>/text) and RACE
    python export_model.py --export_type=squad [--version_2_with_negative] --init_checkpoint=out/squad ...
    python export_model.py --export_type=race --init_checkpoint=out/race ...

    # TF Model Garden's TF-Hub interface, as albert_en_base/3 and albert_en_preprocess/3 (inputs input_word_ids,
    # input_mask, input_type_ids; outputs pooled_output, sequence_output, encoder_outputs, default; .mlm)
    python export_model.py --export_type=tfhub --init_checkpoint=out/pretraining \
      --albert_config_file=albert_base/albert_config.json --spm_model_file=... --export_dir=export/albert_hub
    python export_model.py --export_type=tfhub_preprocessing --spm_model_file=albert_base/30k-clean.model \
      --export_dir=export/albert_preprocess

    # computing in bfloat16 (float32 weights and outputs): faster on CPUs with AVX512_BF16 or AMX
    python export_model.py --export_type=encoder --mixed_precision=bf16 ... --export_dir=export/encoder_bf16

    # TFLite (fixed sequence length; float32 or dynamic-range int8), of the encoder or of a task model
    python export_model.py --export_type=tflite --tflite_model=classifier --num_labels=2 --quantize=dynamic_int8 \
      --max_seq_length=128 --init_checkpoint=out/sst2/best_checkpoint ... --export_dir=export/sst2_tflite \
      --eval_task=sst-2 --eval_data_dir=glue_data

--init_checkpoint takes any format `albert_tf.checkpoints.load_checkpoint` reads: the original TF1 release (or its
TF-Hub module), Hugging Face, keras-hub, TF Model Garden (TF2 checkpoints and TF-Hub SavedModels), or this project's
own (pretraining or fine-tuned task checkpoints, a directory or a prefix). A task export needs a checkpoint with that
task's head. Without --albert_config_file, an albert_config.json beside the checkpoint (or in its assets/) is used.

TFLite writes <export_dir>/model.tflite, a copy of the tokenizer file, and tflite_info.json (size, and the max
abs difference of each output from the float32 model on sample inputs); with --eval_task (a GLUE task, with a
classifier) it also reports the accuracy of both on the task's dev set (at most --eval_max_examples) and the change.
It uses TFLite builtin ops only; a model needing other TensorFlow ops stops naming them, unless
--allow_select_tf_ops.
"""

import dataclasses

from absl import flags
from absl import logging as absl_logging

from albert_tf import cli

EXPORT_TYPES = ("encoder", "preprocessing", "classifier", "squad", "race", "tflite", "tfhub", "tfhub_preprocessing")
TFLITE_MODELS = ("encoder", "classifier", "squad", "race")

FLAGS = flags.FLAGS

flags.DEFINE_string("export_type", None, f"What to export: {', '.join(EXPORT_TYPES)}.")
flags.DEFINE_string("export_dir", None, "Where to write the export (a directory; refused if it exists and is not "
                                        "empty, unless --overwrite).")
flags.DEFINE_bool("overwrite", False, "Replace an existing non-empty --export_dir.")
flags.DEFINE_string("albert_config_file", None, "The albert_config.json of the model (or a Hugging Face "
                                                "config.json).")
flags.DEFINE_string("init_checkpoint", None, "The weights: an original TF1, Hugging Face, keras-hub, Model Garden "
                                             "or albert_tf checkpoint (pretrained or fine-tuned; a directory or a "
                                             "prefix), or a TF-Hub module or SavedModel directory.")
flags.DEFINE_string("spm_model_file", None, "The SentencePiece model (30k-clean.model).")
flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary (used when no --spm_model_file is given, e.g. the "
                                        "Chinese models).")
flags.DEFINE_bool("do_lower_case", True, "Lowercase the input text (True for the uncased English models).")
flags.DEFINE_integer("max_seq_length", None, "Sequence length of the text signatures (preprocessing, "
                                             "tfhub_preprocessing, classifier, SQuAD text) and of the TFLite inputs. "
                                             "Default 128 (SQuAD: 384).")
flags.DEFINE_integer("num_labels", 2, "Classifier: number of labels (1 = regression).")
flags.DEFINE_list("label_list", None, "Classifier: label names in index order (served as `labels`).")
flags.DEFINE_float("threshold", None, "Classifier: a classification threshold served as the `threshold` output.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD: the v2.0 head (unanswerable questions).")
flags.DEFINE_integer("max_query_length", 64, "SQuAD text signature: question pieces kept.")
flags.DEFINE_integer("max_qa_length", None, "RACE text signature: question+option pieces kept (the last ones; "
                                            "default min(128, max_seq_length - 3)).")
flags.DEFINE_integer("max_answer_length", 30, "SQuAD text signature: longest answer span, in pieces.")
flags.DEFINE_integer("doc_stride", 128, "SQuAD text signature: pieces between the starts of the context windows "
                                        "(as run_squad.py's --doc_stride).")
flags.DEFINE_integer("n_best_size", 20, "SQuAD v1.1 text signature: best starts and ends paired per window (as "
                                        "run_squad.py's --n_best_size).")
flags.DEFINE_integer("start_n_top", 5, "SQuAD v2.0: beam size over starts.")
flags.DEFINE_integer("end_n_top", 5, "SQuAD v2.0: beam size over ends.")
flags.DEFINE_float("null_score_diff_threshold", None, "SQuAD v2.0: threshold on cls_logits for `is_impossible`.")
flags.DEFINE_string("tflite_model", "encoder", f"TFLite: which model to convert: {', '.join(TFLITE_MODELS)} (built "
                                               "from --init_checkpoint), unless --source_saved_model is given.")
flags.DEFINE_string("source_saved_model", None, "TFLite: convert this exported SavedModel (serving_default on "
                                                "input_ids, input_mask, segment_ids) instead of a checkpoint.")
flags.DEFINE_string("quantize", "none", "TFLite: none (float32) or dynamic_int8 (int8 weights).")
flags.DEFINE_bool("allow_select_tf_ops", False, "TFLite: if the model needs TensorFlow ops that are not TFLite "
                                                "builtins, convert with SELECT_TF_OPS (the file then needs the "
                                                "TensorFlow-ops delegate) instead of stopping with their names.")
flags.DEFINE_string("mixed_precision", None, "Model SavedModel exports: build the served model under a mixed "
                    "precision policy, bf16 (mixed_bfloat16) or fp16 (mixed_float16): float32 weights, "
                    "computation in 16 bits (LayerNorm and softmax in float32), float32 outputs.")
flags.DEFINE_string("eval_task", None, "TFLite classifier: a GLUE task (e.g. sst-2) whose dev set measures the "
                                       "accuracy of the TFLite model against the float32 model.")
flags.DEFINE_string("eval_data_dir", None, "TFLite: the GLUE data dir for --eval_task (e.g. data/glue).")
flags.DEFINE_integer("eval_max_examples", 1000, "TFLite: at most this many dev examples for --eval_task.")


def main(argv):
    # pylint: disable=import-outside-toplevel
    from albert_tf.errors import UsageError

    if len(argv) > 1:
        raise UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    if FLAGS.export_type not in EXPORT_TYPES:
        raise UsageError(f"--export_type must be one of {', '.join(EXPORT_TYPES)}"
                         + (f" (got {FLAGS.export_type!r})" if FLAGS.export_type else ""))
    absl_logging.set_verbosity(absl_logging.WARNING)  # TensorFlow logs each step of writing a SavedModel at INFO
    from albert_tf.tasks import exports

    exports.check_export_dir(FLAGS.export_dir, FLAGS.overwrite)
    options = {field.name: FLAGS[field.name].value for field in dataclasses.fields(exports.ExportRequest)
               if field.name not in ("export_type", "export_dir")}  # the flags are the request's fields
    outcome = exports.export(FLAGS.export_type, FLAGS.export_dir, **options)
    print(exports.describe(outcome))


def run():
    """The console command: `main` under `albert_tf.cli.run`."""
    cli.run(main, __doc__)


if __name__ == "__main__":
    run()
