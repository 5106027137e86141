"""Exports from a checkpoint, by type (what `export_model.py` runs): each type is the serving export of a task.

`EXPORT_TYPES` lists them: the encoder (TF-Hub style) and the text preprocessing model, each task's SavedModel
(classifier, squad, race), TFLite of the id-input models, and the encoder and preprocessing model with TF Model
Garden's TF-Hub interface (`tfhub`, `tfhub_preprocessing`: what `albert_en_base/3` and `albert_en_preprocess/3`
offer).
"""

import json
import os
import shutil

import tensorflow as tf

from albert_tf import checkpoints, fileio
from albert_tf.checkpoints import model_garden
from albert_tf.config import AlbertConfig
from albert_tf.data import glue
from albert_tf.errors import UsageError
from albert_tf.model import AlbertForPretraining, AlbertModel, dummy_inputs
from albert_tf.serving.classifier import export_classifier
from albert_tf.serving.encoder import export_encoder, export_preprocessing
from albert_tf.serving.race import export_race_model
from albert_tf.serving.savedmodel import ID_FEATURES, ExportError
from albert_tf.serving.squad import export_squad_model
from albert_tf.serving.tfhub import export_tfhub, export_tfhub_preprocessing
from albert_tf.serving.tflite import QUANTIZE_MODES, TFLiteModel, compare_outputs, export_tflite
from albert_tf.tasks.classification import build_classifier
from albert_tf.tasks.race import build_model as build_race_model
from albert_tf.tasks.squad import TrainableSquad
from albert_tf.text.tokenization import FullTokenizer

EXPORT_TYPES = ("encoder", "preprocessing", "classifier", "squad", "race", "tflite", "tfhub", "tfhub_preprocessing")
TEXT_ONLY_TYPES = ("preprocessing", "tfhub_preprocessing")
TFLITE_MODELS = ("encoder", "classifier", "squad", "race")


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
        if num_labels < 1:
            raise UsageError(f"--num_labels must be at least 1, got {num_labels}")
        model = build_classifier(config, num_labels)
    elif kind == "squad":
        model = TrainableSquad(config, version_2=version_2, start_n_top=start_n_top, end_n_top=end_n_top)
        model(dummy_inputs(seq_length=4), training=False)
    elif kind == "race":
        model = build_race_model(config)
    else:
        raise UsageError(f"unknown model {kind!r}; known: {', '.join(TFLITE_MODELS)}")
    result = checkpoints.load_checkpoint(model, init_checkpoint)
    if result.missing:
        raise ExportError(f"{init_checkpoint} has no {kind} head that fits this model (missing: "
                          f"{', '.join(result.missing[:4])}); export a checkpoint fine-tuned for {kind}"
                          + (" with the same --num_labels" if kind == "classifier" else "")
                          + (" and the same --version_2_with_negative" if kind == "squad" else ""))
    return model, result


def build_pretraining_or_encoder(config, init_checkpoint):
    """`AlbertForPretraining` with `init_checkpoint` when it has the masked-LM head (the sentence-order head may
    be missing: Model Garden's formats have none), else `AlbertModel`; returns (model, LoadResult)."""
    if not init_checkpoint:
        raise UsageError("--init_checkpoint is required for this export type")
    model = AlbertForPretraining(config)
    model(dummy_inputs(num_predictions=1), training=False)
    result = checkpoints.load_checkpoint(model, init_checkpoint)
    if any(name.startswith("cls/predictions/") for name in result.missing):
        model = AlbertModel(config)
        model(dummy_inputs(), training=False)
        result = checkpoints.load_checkpoint(model, init_checkpoint)
    return model, result


def _eval_features(task, data_dir, tokenizer, seq_length, max_examples):
    processor = glue.get_processor(task)
    if processor.is_regression:
        raise UsageError(f"--eval_task {task} is a regression task; accuracy needs a classification task")
    examples = processor.get_dev_examples(data_dir)[:max_examples]
    features = glue.features_from_texts(tokenizer, [e.text_a for e in examples], [e.text_b for e in examples],
                                        seq_length)
    labels = [processor.label_index(e.label) for e in examples]
    return features, labels


def export(export_type, export_dir, overwrite=False, albert_config_file=None, init_checkpoint=None,
        spm_model_file=None, vocab_file=None, do_lower_case=True, max_seq_length=None, num_labels=2,
        label_list=None, threshold=None, version_2_with_negative=False, max_query_length=64, max_answer_length=30,
        doc_stride=128, n_best_size=20, start_n_top=5, end_n_top=5, null_score_diff_threshold=None,
        max_qa_length=None, tflite_model="encoder",
        source_saved_model=None, quantize=None, eval_task=None, eval_data_dir=None, eval_max_examples=1000,
        allow_select_tf_ops=False, log=print):
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

    config = None
    needs_model = export_type not in TEXT_ONLY_TYPES and not (export_type == "tflite" and source_saved_model)
    if not albert_config_file and needs_model and init_checkpoint:
        albert_config_file = model_garden.config_file_beside(init_checkpoint)  # e.g. a hub module's assets/
        if not albert_config_file:
            raise UsageError(f"--albert_config_file is required for this export type: the weights do not give the "
                             f"number of layers and heads, and {init_checkpoint} has no "
                             f"{model_garden.CONFIG_NAME} beside it")
    if albert_config_file:
        config = AlbertConfig.from_json_file(albert_config_file)
    if needs_model and config is None:
        raise UsageError("--albert_config_file is required for this export type")
    default_length = {"squad": 384, "race": 512}.get(export_type, 128)
    if max_seq_length is None and config is not None:
        default_length = min(default_length, config.max_position_embeddings)
    seq_length = max_seq_length or default_length
    if config is not None:
        config.check_sequence_length(seq_length)
    outcome = {"export_type": export_type}

    if export_type == "preprocessing":
        outcome["export_dir"] = export_preprocessing(
            export_dir, spm_model_file=spm_model_file, vocab_file=None if spm_model_file else vocab_file,
            do_lower_case=do_lower_case, max_seq_length=seq_length,
            max_position_embeddings=config.max_position_embeddings if config else None, overwrite=overwrite)
        return outcome
    if export_type == "tfhub_preprocessing":
        outcome["export_dir"] = export_tfhub_preprocessing(
            export_dir, spm_model_file=spm_model_file, vocab_file=None if spm_model_file else vocab_file,
            do_lower_case=do_lower_case, seq_length=seq_length, overwrite=overwrite)
        return outcome
    if export_type == "tfhub":
        model, result = build_pretraining_or_encoder(config, init_checkpoint)
        log(f"Loaded {result}")
        outcome["model"] = type(model).__name__
        outcome["export_dir"] = export_tfhub(model, export_dir, spm_model_file=spm_model_file,
                                             vocab_file=None if spm_model_file else vocab_file,
                                             do_lower_case=do_lower_case, overwrite=overwrite)
        return outcome

    if export_type == "tflite":
        if quantize not in QUANTIZE_MODES:
            raise UsageError(f"unknown --quantize {quantize!r}; known: none, dynamic_int8")
        if source_saved_model:
            source, head = source_saved_model, "saved_model"
        else:
            source, result = build_model(tflite_model, config, init_checkpoint, num_labels=num_labels,
                                         version_2=version_2_with_negative, start_n_top=start_n_top,
                                         end_n_top=end_n_top)
            head = tflite_model
            log(f"Loaded {result}")
        with fileio.atomic_path(export_dir, f"--export_dir {export_dir}", directory=True,
                                replace_directory_ok=True) as tmp_dir:
            tf.io.gfile.makedirs(tmp_dir)
            info = export_tflite(source, os.path.join(tmp_dir, "model.tflite"), quantize=quantize,
                                 seq_length=seq_length, allow_select_tf_ops=allow_select_tf_ops)
            outcome["tflite"] = info
            if eval_task:
                if head != "classifier":
                    raise UsageError("--eval_task needs --tflite_model=classifier (a fine-tuned classifier)")
                if not eval_data_dir:
                    raise UsageError("--eval_data_dir is required with --eval_task")
                if not tokenizer_file:
                    raise UsageError("--eval_task needs --spm_model_file or --vocab_file")
                tokenizer = FullTokenizer(spm_model_file=spm_model_file, vocab_file=vocab_file,
                                          do_lower_case=do_lower_case)
                features, labels = _eval_features(eval_task, eval_data_dir, tokenizer, seq_length,
                                                  eval_max_examples)
                outcome["eval"] = compare_outputs(_keras_reference(source), TFLiteModel(info.path), features,
                                                  labels, output="logits")
            if tokenizer_file:
                shutil.copy(tokenizer_file, os.path.join(tmp_dir, os.path.basename(tokenizer_file)))
            summary = {"model": head, "quantize": quantize or "none", "seq_length": seq_length,
                       "size_bytes": info.size_bytes, "inputs": list(ID_FEATURES),
                       "input_shape": list(info.input_shape), "outputs": list(info.outputs),
                       "max_abs_diff_vs_float32_model": info.max_abs_diff, "select_tf_ops": info.select_tf_ops,
                       "not_verified": info.unverified,
                       "tokenizer_file": os.path.basename(tokenizer_file) if tokenizer_file else None,
                       "do_lower_case": do_lower_case, "eval": outcome.get("eval")}
            with open(os.path.join(tmp_dir, "tflite_info.json"), "w", encoding="utf-8") as f:
                json.dump(summary, f, indent=2, sort_keys=True)
        outcome["export_dir"] = os.path.abspath(export_dir)
        info.path = os.path.join(outcome["export_dir"], "model.tflite")
        return outcome

    model, result = build_model(export_type, config, init_checkpoint, num_labels=num_labels,
                                version_2=version_2_with_negative, start_n_top=start_n_top, end_n_top=end_n_top)
    log(f"Loaded {result}")
    outcome["model"] = type(model).__name__
    if export_type == "encoder":
        outcome["export_dir"] = export_encoder(model, export_dir, tokenizer_file=tokenizer_file,
                                                      do_lower_case=do_lower_case, overwrite=overwrite)
    elif export_type == "classifier":
        if not tokenizer_file:
            raise UsageError("the classifier export needs --spm_model_file or --vocab_file (its text signatures)")
        outcome["export_dir"] = export_classifier(model, export_dir, tokenizer_file, do_lower_case=do_lower_case,
                                                  max_seq_length=seq_length, threshold=threshold,
                                                  overwrite=overwrite, label_list=label_list)
    elif export_type == "squad":
        if vocab_file and not spm_model_file:
            raise UsageError("the SQuAD export needs --spm_model_file (SQuAD features are SentencePiece-only)")
        if overwrite and os.path.isdir(export_dir):
            shutil.rmtree(export_dir)
        outcome["dirs"] = export_squad_model(
            model, export_dir, spm_model_file=spm_model_file, do_lower_case=do_lower_case,
            max_seq_length=seq_length, doc_stride=doc_stride, max_query_length=max_query_length,
            max_answer_length=max_answer_length, n_best_size=n_best_size,
            null_score_diff_threshold=null_score_diff_threshold, overwrite=overwrite)
        outcome["export_dir"] = os.path.abspath(export_dir)
    elif export_type == "race":
        outcome["export_dir"] = export_race_model(
            model, export_dir, tokenizer_file=tokenizer_file, do_lower_case=do_lower_case, overwrite=overwrite,
            is_sentencepiece=bool(spm_model_file) if tokenizer_file else None, max_seq_length=seq_length,
            max_qa_length=max_qa_length or min(128, seq_length - 3))
    return outcome


def _keras_reference(model):
    """The float32 model as a callable of the id inputs -> {"logits": ...} (what its SavedModel serves)."""
    @tf.function
    def reference(input_ids, input_mask, segment_ids):
        logits = model({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
                       training=False)
        return {"logits": tf.cast(logits, tf.float32)}

    return reference


def describe(outcome):
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


