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

    # TFLite (fixed sequence length; float32 or dynamic-range int8), of the encoder or of a task model
    python export_model.py --export_type=tflite --tflite_model=classifier --num_labels=2 --quantize=dynamic_int8 \
      --max_seq_length=128 --init_checkpoint=out/sst2/best_checkpoint ... --export_dir=export/sst2_tflite \
      --eval_task=sst-2 --eval_data_dir=glue_data

--init_checkpoint takes any format `albert_tf.checkpoints.load_checkpoint` reads: the original TF1 release, Hugging
Face, keras-hub, or this project's own (pretraining or fine-tuned task checkpoints, a directory or a prefix). A
task export needs a checkpoint with that task's head.

TFLite writes <export_dir>/model.tflite, a copy of the tokenizer file, and tflite_info.json (size, and the max
abs difference of each output from the float32 model on sample inputs); with --eval_task (a GLUE task, with a
classifier) it also reports the accuracy of both on the task's dev set (at most --eval_max_examples) and the change.
"""

import json
import os
import shutil
import sys

from absl import app, flags
from absl import logging as absl_logging

EXPORT_TYPES = ("encoder", "preprocessing", "classifier", "squad", "race", "tflite")
TFLITE_MODELS = ("encoder", "classifier", "squad", "race")

FLAGS = flags.FLAGS

flags.DEFINE_string("export_type", None, f"What to export: {', '.join(EXPORT_TYPES)}.")
flags.DEFINE_string("export_dir", None, "Where to write the export (a directory; refused if it exists and is not "
                                        "empty, unless --overwrite).")
flags.DEFINE_bool("overwrite", False, "Replace an existing non-empty --export_dir.")
flags.DEFINE_string("albert_config_file", None, "The albert_config.json of the model (or a Hugging Face "
                                                "config.json).")
flags.DEFINE_string("init_checkpoint", None, "The weights: an original TF1, Hugging Face, keras-hub or albert_tf "
                                             "checkpoint (pretrained or fine-tuned; a directory or a prefix).")
flags.DEFINE_string("spm_model_file", None, "The SentencePiece model (30k-clean.model).")
flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary (used when no --spm_model_file is given, e.g. the "
                                        "Chinese models).")
flags.DEFINE_bool("do_lower_case", True, "Lowercase the input text (True for the uncased English models).")
flags.DEFINE_integer("max_seq_length", None, "Sequence length of the text signatures (preprocessing, classifier, "
                                             "SQuAD text) and of the TFLite inputs. Default 128 (SQuAD: 384).")
flags.DEFINE_integer("num_labels", 2, "Classifier: number of labels (1 = regression).")
flags.DEFINE_list("label_list", None, "Classifier: label names in index order (served as `labels`).")
flags.DEFINE_float("threshold", None, "Classifier: a classification threshold served as the `threshold` output.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD: the v2.0 head (unanswerable questions).")
flags.DEFINE_integer("max_query_length", 64, "SQuAD text signature: question pieces kept.")
flags.DEFINE_integer("max_qa_length", None, "RACE text signature: question+option pieces kept (the last ones; "
                                            "default min(128, max_seq_length - 3)).")
flags.DEFINE_integer("max_answer_length", 30, "SQuAD text signature: longest answer span, in pieces.")
flags.DEFINE_integer("start_n_top", 5, "SQuAD v2.0: beam size over starts.")
flags.DEFINE_integer("end_n_top", 5, "SQuAD v2.0: beam size over ends.")
flags.DEFINE_float("null_score_diff_threshold", None, "SQuAD v2.0: threshold on cls_logits for `is_impossible`.")
flags.DEFINE_string("tflite_model", "encoder", f"TFLite: which model to convert: {', '.join(TFLITE_MODELS)} (built "
                                               "from --init_checkpoint), unless --source_saved_model is given.")
flags.DEFINE_string("source_saved_model", None, "TFLite: convert this exported SavedModel (serving_default on "
                                                "input_ids, input_mask, segment_ids) instead of a checkpoint.")
flags.DEFINE_string("quantize", "none", "TFLite: none (float32) or dynamic_int8 (int8 weights).")
flags.DEFINE_string("eval_task", None, "TFLite classifier: a GLUE task (e.g. sst-2) whose dev set measures the "
                                       "accuracy of the TFLite model against the float32 model.")
flags.DEFINE_string("eval_data_dir", None, "TFLite: the GLUE data dir for --eval_task (e.g. data/glue).")
flags.DEFINE_integer("eval_max_examples", 1000, "TFLite: at most this many dev examples for --eval_task.")


class UsageError(ValueError):
    """A flag is missing or wrong; the message says which."""


def _tokenizer_file(spm_model_file, vocab_file):
    return spm_model_file or vocab_file


def check_export_dir(export_dir, overwrite):
    """Refuses an existing non-empty `export_dir` unless `overwrite` (before any work is done)."""
    if not export_dir:
        raise UsageError("--export_dir is required")
    if os.path.isfile(export_dir):
        raise UsageError(f"--export_dir {export_dir} is a file")
    if os.path.isdir(export_dir) and os.listdir(export_dir) and not overwrite:
        raise UsageError(f"export directory {export_dir} exists and is not empty; pass --overwrite to replace it")


def build_model(kind, config, init_checkpoint, num_labels=2, version_2=False, start_n_top=5, end_n_top=5):
    """The model for `kind` (encoder, classifier, squad, race) with `init_checkpoint` loaded; returns
    (model, LoadResult). The encoder is `AlbertForPretraining` when the checkpoint has the MLM/SOP heads, else
    `AlbertModel`; a task model refuses a checkpoint without its head."""
    from albert_tf import checkpoints  # pylint: disable=import-outside-toplevel
    from albert_tf.export import ExportError  # pylint: disable=import-outside-toplevel
    from albert_tf.modeling import (AlbertForPretraining, AlbertModel,  # pylint: disable=import-outside-toplevel
                                    dummy_inputs)

    if not init_checkpoint:
        raise UsageError("--init_checkpoint is required for this export type")
    if kind == "encoder":
        model = AlbertForPretraining(config)
        model(dummy_inputs(num_predictions=1), training=False)
        result = checkpoints.load_checkpoint(model, init_checkpoint)
        if result.missing:  # no pretraining heads (e.g. a fine-tuned checkpoint): the encoder alone
            model = AlbertModel(config)
            model(dummy_inputs(), training=False)
            result = checkpoints.load_checkpoint(model, init_checkpoint)
        return model, result
    if kind == "classifier":
        from albert_tf.classification import build_classifier  # pylint: disable=import-outside-toplevel

        if num_labels < 1:
            raise UsageError(f"--num_labels must be at least 1, got {num_labels}")
        model = build_classifier(config, num_labels)
    elif kind == "squad":
        from albert_tf.squad_modeling import AlbertForSquad  # pylint: disable=import-outside-toplevel

        model = AlbertForSquad(config, version_2=version_2, start_n_top=start_n_top, end_n_top=end_n_top)
        model(dummy_inputs(seq_length=4), training=False)
    elif kind == "race":
        from albert_tf.race import build_model as build_race  # pylint: disable=import-outside-toplevel

        model = build_race(config)
    else:
        raise UsageError(f"unknown model {kind!r}; known: {', '.join(TFLITE_MODELS)}")
    result = checkpoints.load_checkpoint(model, init_checkpoint)
    if result.missing:
        raise ExportError(f"{init_checkpoint} has no {kind} head that fits this model (missing: "
                          f"{', '.join(result.missing[:4])}); export a checkpoint fine-tuned for {kind}"
                          + (" with the same --num_labels" if kind == "classifier" else "")
                          + (" and the same --version_2_with_negative" if kind == "squad" else ""))
    return model, result


def _eval_features(task, data_dir, tokenizer, seq_length, max_examples):
    from albert_tf import glue  # pylint: disable=import-outside-toplevel

    processor = glue.get_processor(task)
    if processor.is_regression:
        raise UsageError(f"--eval_task {task} is a regression task; accuracy needs a classification task")
    examples = processor.get_dev_examples(data_dir)[:max_examples]
    features = glue.features_from_texts(tokenizer, [e.text_a for e in examples], [e.text_b for e in examples],
                                        seq_length)
    labels = [processor.label_index(e.label) for e in examples]
    return features, labels


def run(export_type, export_dir, overwrite=False, albert_config_file=None, init_checkpoint=None,
        spm_model_file=None, vocab_file=None, do_lower_case=True, max_seq_length=None, num_labels=2,
        label_list=None, threshold=None, version_2_with_negative=False, max_query_length=64, max_answer_length=30,
        start_n_top=5, end_n_top=5, null_score_diff_threshold=None, max_qa_length=None, tflite_model="encoder",
        source_saved_model=None, quantize=None, eval_task=None, eval_data_dir=None, eval_max_examples=1000,
        log=print):
    """Writes the export; returns a dict describing it (`export_dir`, and per type `dirs`, `tflite`, `eval`).

    Raises UsageError (bad flags), ExportError, CheckpointError, ConfigError or TokenizerError with a message.
    """
    if export_type not in EXPORT_TYPES:
        raise UsageError(f"unknown export type {export_type!r}; known: {', '.join(EXPORT_TYPES)}")
    check_export_dir(export_dir, overwrite)
    if quantize in ("none", ""):
        quantize = None
    tokenizer_file = _tokenizer_file(spm_model_file, vocab_file)
    if spm_model_file and vocab_file:
        log("Both --spm_model_file and --vocab_file given: using the SentencePiece model.")
    if tflite_model not in TFLITE_MODELS:
        raise UsageError(f"unknown --tflite_model {tflite_model!r}; known: {', '.join(TFLITE_MODELS)}")

    from albert_tf import export  # pylint: disable=import-outside-toplevel
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel

    config = None
    if albert_config_file:
        config = AlbertConfig.from_json_file(albert_config_file)
    needs_model = export_type != "preprocessing" and not (export_type == "tflite" and source_saved_model)
    if needs_model and config is None:
        raise UsageError("--albert_config_file is required for this export type")
    default_length = {"squad": 384, "race": 512}.get(export_type, 128)
    if max_seq_length is None and config is not None:
        default_length = min(default_length, config.max_position_embeddings)
    seq_length = max_seq_length or default_length
    if config is not None and seq_length > config.max_position_embeddings:
        raise UsageError(f"--max_seq_length {seq_length} exceeds max_position_embeddings "
                         f"{config.max_position_embeddings} of {albert_config_file}")
    outcome = {"export_type": export_type}

    if export_type == "preprocessing":
        outcome["export_dir"] = export.export_preprocessing(
            export_dir, spm_model_file=spm_model_file, vocab_file=None if spm_model_file else vocab_file,
            do_lower_case=do_lower_case, max_seq_length=seq_length,
            max_position_embeddings=config.max_position_embeddings if config else None, overwrite=overwrite)
        return outcome

    if export_type == "tflite":
        if quantize not in export.QUANTIZE_MODES:
            raise UsageError(f"unknown --quantize {quantize!r}; known: none, dynamic_int8")
        if source_saved_model:
            source, head = source_saved_model, "saved_model"
        else:
            source, result = build_model(tflite_model, config, init_checkpoint, num_labels=num_labels,
                                         version_2=version_2_with_negative, start_n_top=start_n_top,
                                         end_n_top=end_n_top)
            head = tflite_model
            log(f"Loaded {result}")
        tmp_dir = export.prepare_export_dir(export_dir, overwrite)
        try:
            info = export.export_tflite(source, os.path.join(tmp_dir, "model.tflite"), quantize=quantize,
                                        seq_length=seq_length)
            outcome["tflite"] = info
            if eval_task:
                if head != "classifier":
                    raise UsageError("--eval_task needs --tflite_model=classifier (a fine-tuned classifier)")
                if not eval_data_dir:
                    raise UsageError("--eval_data_dir is required with --eval_task")
                from albert_tf.tokenization import FullTokenizer  # pylint: disable=import-outside-toplevel

                if not tokenizer_file:
                    raise UsageError("--eval_task needs --spm_model_file or --vocab_file")
                tokenizer = FullTokenizer(spm_model_file=spm_model_file, vocab_file=vocab_file,
                                          do_lower_case=do_lower_case)
                features, labels = _eval_features(eval_task, eval_data_dir, tokenizer, seq_length,
                                                  eval_max_examples)
                reference = _keras_reference(source)
                lite = export.TFLiteModel(info.path)
                outcome["eval"] = export.compare_outputs(reference, lite, features, labels, output="logits")
            if tokenizer_file:
                shutil.copy(tokenizer_file, os.path.join(tmp_dir, os.path.basename(tokenizer_file)))
            summary = {"model": head, "quantize": quantize or "none", "seq_length": seq_length,
                       "size_bytes": info.size_bytes, "inputs": list(export.ID_FEATURES),
                       "input_shape": list(info.input_shape), "outputs": list(info.outputs),
                       "max_abs_diff_vs_float32_model": info.max_abs_diff, "select_tf_ops": info.select_tf_ops,
                       "tokenizer_file": os.path.basename(tokenizer_file) if tokenizer_file else None,
                       "do_lower_case": do_lower_case, "eval": outcome.get("eval")}
            with open(os.path.join(tmp_dir, "tflite_info.json"), "w", encoding="utf-8") as f:
                json.dump(summary, f, indent=2, sort_keys=True)
            outcome["export_dir"] = export.publish(tmp_dir, export_dir)
        except BaseException:
            shutil.rmtree(tmp_dir, ignore_errors=True)
            raise
        info.path = os.path.join(outcome["export_dir"], "model.tflite")
        return outcome

    model, result = build_model(export_type, config, init_checkpoint, num_labels=num_labels,
                                version_2=version_2_with_negative, start_n_top=start_n_top, end_n_top=end_n_top)
    log(f"Loaded {result}")
    outcome["model"] = type(model).__name__
    if export_type == "encoder":
        outcome["export_dir"] = export.export_encoder(model, export_dir, tokenizer_file=tokenizer_file,
                                                      do_lower_case=do_lower_case, overwrite=overwrite)
    elif export_type == "classifier":
        from albert_tf.classification import export_classifier  # pylint: disable=import-outside-toplevel

        if not tokenizer_file:
            raise UsageError("the classifier export needs --spm_model_file or --vocab_file (its text signatures)")
        outcome["export_dir"] = export_classifier(model, export_dir, tokenizer_file, do_lower_case=do_lower_case,
                                                  max_seq_length=seq_length, threshold=threshold,
                                                  overwrite=overwrite, label_list=label_list)
    elif export_type == "squad":
        from albert_tf.squad_modeling import export_squad_model  # pylint: disable=import-outside-toplevel

        if vocab_file and not spm_model_file:
            raise UsageError("the SQuAD export needs --spm_model_file (SQuAD features are SentencePiece-only)")
        if overwrite and os.path.isdir(export_dir):
            shutil.rmtree(export_dir)
        outcome["dirs"] = export_squad_model(
            model, export_dir, spm_model_file=spm_model_file, do_lower_case=do_lower_case,
            max_seq_length=seq_length, max_query_length=max_query_length, max_answer_length=max_answer_length,
            null_score_diff_threshold=null_score_diff_threshold, overwrite=overwrite)
        outcome["export_dir"] = os.path.abspath(export_dir)
    elif export_type == "race":
        from albert_tf.race import export_race_model  # pylint: disable=import-outside-toplevel

        outcome["export_dir"] = export_race_model(
            model, export_dir, tokenizer_file=tokenizer_file, do_lower_case=do_lower_case, overwrite=overwrite,
            is_sentencepiece=bool(spm_model_file) if tokenizer_file else None, max_seq_length=seq_length,
            max_qa_length=max_qa_length or min(128, seq_length - 3))
    return outcome


def _keras_reference(model):
    """The float32 model as a callable of the id inputs -> {"logits": ...} (what its SavedModel serves)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    @tf.function
    def reference(input_ids, input_mask, segment_ids):
        logits = model({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
                       training=False)
        return {"logits": tf.cast(logits, tf.float32)}

    return reference


def _describe(outcome):
    lines = [f"Exported {outcome['export_type']} to {outcome['export_dir']}"]
    for name, path in sorted(outcome.get("dirs", {}).items()):
        lines.append(f"  {name}: {path}")
    if "tflite" in outcome:
        lines.append(outcome["tflite"].summary())
    if "eval" in outcome:
        e = outcome["eval"]
        lines.append(f"  dev set ({e['examples']} examples): float32 accuracy {e['reference_accuracy']:.4f}, "
                     f"TFLite accuracy {e['candidate_accuracy']:.4f} (change {e['accuracy_change']:+.4f}), "
                     f"argmax agreement {e['argmax_agreement']:.4f}, max abs logit diff {e['max_abs_diff']:.3g}")
    if outcome["export_type"] != "tflite":
        lines.append(f"  inspect: saved_model_cli show --all --dir {outcome['export_dir']}"
                     + ("/ids" if outcome["export_type"] == "squad" else ""))
    return "\n".join(lines)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    if FLAGS.export_type not in EXPORT_TYPES:
        raise app.UsageError(f"--export_type must be one of {', '.join(EXPORT_TYPES)}"
                             + (f" (got {FLAGS.export_type!r})" if FLAGS.export_type else ""))
    try:
        check_export_dir(FLAGS.export_dir, FLAGS.overwrite)
    except UsageError as err:
        raise app.UsageError(str(err)) from None

    absl_logging.set_verbosity(absl_logging.WARNING)  # TensorFlow logs each step of writing a SavedModel at INFO
    from albert_tf import glue  # pylint: disable=import-outside-toplevel
    from albert_tf.checkpoints import CheckpointError  # pylint: disable=import-outside-toplevel
    from albert_tf.config import ConfigError  # pylint: disable=import-outside-toplevel
    from albert_tf.export import ExportError  # pylint: disable=import-outside-toplevel
    from albert_tf.tokenization import TokenizerError  # pylint: disable=import-outside-toplevel

    try:
        outcome = run(
            FLAGS.export_type, FLAGS.export_dir, overwrite=FLAGS.overwrite,
            albert_config_file=FLAGS.albert_config_file, init_checkpoint=FLAGS.init_checkpoint,
            spm_model_file=FLAGS.spm_model_file, vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
            max_seq_length=FLAGS.max_seq_length, num_labels=FLAGS.num_labels, label_list=FLAGS.label_list,
            threshold=FLAGS.threshold, version_2_with_negative=FLAGS.version_2_with_negative,
            max_query_length=FLAGS.max_query_length, max_answer_length=FLAGS.max_answer_length,
            start_n_top=FLAGS.start_n_top, end_n_top=FLAGS.end_n_top,
            null_score_diff_threshold=FLAGS.null_score_diff_threshold, max_qa_length=FLAGS.max_qa_length,
            tflite_model=FLAGS.tflite_model,
            source_saved_model=FLAGS.source_saved_model, quantize=FLAGS.quantize, eval_task=FLAGS.eval_task,
            eval_data_dir=FLAGS.eval_data_dir, eval_max_examples=FLAGS.eval_max_examples)
    except UsageError as err:
        raise app.UsageError(str(err)) from None
    except (CheckpointError, ConfigError, ExportError, TokenizerError, glue.DataError) as err:
        sys.exit(f"export_model.py: error: {err}")
    print(_describe(outcome))


if __name__ == "__main__":
    app.run(main)
