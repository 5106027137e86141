"""Exports from a checkpoint, by type (what `export_model.py` runs): each type is the serving export of a task.

`EXPORT_TYPES` lists them: the encoder (TF-Hub style) and the text preprocessing model, each task's SavedModel
(classifier, squad, race), TFLite of the id-input models, and the encoder and preprocessing model with TF Model
Garden's TF-Hub interface (`tfhub`, `tfhub_preprocessing`: what `albert_en_base/3` and `albert_en_preprocess/3`
offer).
"""

import dataclasses
import json
import os
import shutil

import tensorflow as tf

from albert_tf import checkpoints, fileio, guard
from albert_tf.checkpoints import model_garden
from albert_tf.config import AlbertConfig
from albert_tf.data import glue
from albert_tf.errors import UsageError
from albert_tf.model import AlbertForPretraining, AlbertModel
from albert_tf.serving.classifier import export_classifier
from albert_tf.serving.encoder import export_encoder, export_preprocessing
from albert_tf.serving.race import export_race_model
from albert_tf.serving.savedmodel import ID_FEATURES, ExportError
from albert_tf.serving.squad import export_squad_model
from albert_tf.serving.tfhub import export_tfhub, export_tfhub_preprocessing
from albert_tf.serving.tflite import QUANTIZE_MODES, TFLiteModel, compare_outputs, export_tflite
from albert_tf.tasks.classification import build_classifier
from albert_tf.tasks.export_request import EXPORT_TYPES, TFLITE_MODELS, ExportRequest
from albert_tf.tasks.race import build_model as build_race_model
from albert_tf.tasks.squad import TrainableSquad
from albert_tf.text.tokenization import FullTokenizer
from albert_tf.train.runner import dtype_policy_scope, precision_policy


def build_model(kind, config, init_checkpoint, num_labels=2, version_2=False, start_n_top=5, end_n_top=5):
    """The model for `kind` (encoder, classifier, squad, race) with `init_checkpoint` loaded; returns
    (model, LoadResult). The encoder is `AlbertForPretraining` when the checkpoint has the MLM/SOP heads, else
    `AlbertModel`; a task model refuses a checkpoint without its head."""
    if not init_checkpoint:
        raise UsageError("--init_checkpoint is required for this export type")
    if kind == "encoder":
        model = AlbertForPretraining(config)
        result = checkpoints.load_checkpoint(model, init_checkpoint)
        if result.missing:  # no pretraining heads (e.g. a fine-tuned checkpoint): the encoder alone
            model = AlbertModel(config)
            result = checkpoints.load_checkpoint(model, init_checkpoint)
        return model, result
    if kind == "classifier":
        if num_labels < 1:
            raise UsageError(f"--num_labels must be at least 1, got {num_labels}")
        model = build_classifier(config, num_labels)
    elif kind == "squad":
        model = TrainableSquad(config, version_2=version_2, start_n_top=start_n_top, end_n_top=end_n_top)
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
    result = checkpoints.load_checkpoint(model, init_checkpoint)
    if any(name.startswith("cls/predictions/") for name in result.missing):
        model = AlbertModel(config)
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


def export(export_type, export_dir, log=print, **options):
    """Writes the export of `export_type` (one of `EXPORT_TYPES`) to `export_dir`; `options` are the other
    `ExportRequest` fields. Returns a dict describing it (`export_type`, `export_dir`, and per type `model`,
    `dirs`, `tflite`, `eval`).

    Raises UsageError (bad flags), ExportError, CheckpointError, ConfigError or TokenizerError with a message.
    """
    request = ExportRequest(export_type, export_dir, **options)
    guard.check_params(request)
    if request.label_list and request.num_labels > 1 and len(request.label_list) != request.num_labels:
        raise UsageError(f"--label_list has {len(request.label_list)} labels, --num_labels={request.num_labels}: "
                         "give one label per output")
    fileio.refuse_inputs_as_outputs([("--export_dir", export_dir, True)], request.inputs())
    if request.quantize in ("none", ""):
        request.quantize = None
    if request.spm_model_file and request.vocab_file:
        log("Both --spm_model_file and --vocab_file given: using the SentencePiece model.")
    policy = precision_policy(request.mixed_precision)
    if policy != "float32" and (not request.needs_model() or export_type == "tflite"):
        raise UsageError(f"--mixed_precision applies to the model SavedModel exports, not to --export_type="
                         f"{export_type}")
    config = _config(request)
    default_length = {"squad": 384, "race": 512}.get(export_type, 128)
    if request.max_seq_length is None and config is not None:
        default_length = min(default_length, config.max_position_embeddings)
    seq_length = request.max_seq_length or default_length
    if config is not None:
        config.check_sequence_length(seq_length)
    outcome = {"export_type": export_type}
    # The whole export is written in one staging directory and moved into place when complete; the model is
    # built, and so serves, under the policy.
    with dtype_policy_scope(policy), fileio.atomic_path(export_dir, f"--export_dir {export_dir}", directory=True,
                                                        replace_directory_ok=request.overwrite) as staged:
        outcome.update(_EXPORTERS[export_type](dataclasses.replace(request, export_dir=staged), config, seq_length,
                                               log))
    return _published(outcome, staged, export_dir)


def _published(outcome, staged, export_dir):
    """`outcome` with the paths in the staging directory `staged` made paths in `export_dir`."""
    final = export_dir if fileio.is_remote(export_dir) else os.path.abspath(export_dir)

    def moved(value):
        if isinstance(value, str) and value.startswith(staged):
            return final + value[len(staged):]
        if isinstance(value, dict):
            return {k: moved(v) for k, v in value.items()}
        return value

    if "tflite" in outcome:
        outcome["tflite"].path = moved(outcome["tflite"].path)
    return moved(outcome)


def _config(request):
    """The AlbertConfig of the export (None for text-only exports), from --albert_config_file or the
    albert_config.json beside the weights."""
    path = request.albert_config_file
    if not path and request.needs_model() and request.init_checkpoint:
        path = model_garden.config_file_beside(request.init_checkpoint)  # e.g. a hub module's assets/
        if not path:
            raise UsageError(f"--albert_config_file is required for this export type: the weights do not give the "
                             f"number of layers and heads, and {request.init_checkpoint} has no "
                             f"{model_garden.CONFIG_NAME} beside it")
    if not path:
        if request.needs_model():
            raise UsageError("--albert_config_file is required for this export type")
        return None
    return AlbertConfig.from_json_file(path)


def _loaded(request, kind, config, log):
    """`build_model(kind, ...)` with the request's checkpoint and head options, logging what loaded."""
    model, result = build_model(kind, config, request.init_checkpoint, num_labels=request.num_labels,
                                version_2=request.version_2_with_negative, start_n_top=request.start_n_top,
                                end_n_top=request.end_n_top)
    log(f"Loaded {result}")
    return model


def _export_preprocessing(request, config, seq_length, log):
    return {"export_dir": export_preprocessing(
        request.export_dir, spm_model_file=request.spm_model_file, vocab_file=request.vocab_file_only,
        do_lower_case=request.do_lower_case, max_seq_length=seq_length,
        max_position_embeddings=config.max_position_embeddings if config else None, overwrite=request.overwrite)}


def _export_tfhub_preprocessing(request, config, seq_length, log):
    return {"export_dir": export_tfhub_preprocessing(
        request.export_dir, spm_model_file=request.spm_model_file, vocab_file=request.vocab_file_only,
        do_lower_case=request.do_lower_case, seq_length=seq_length, overwrite=request.overwrite)}


def _export_tfhub(request, config, seq_length, log):
    model, result = build_pretraining_or_encoder(config, request.init_checkpoint)
    log(f"Loaded {result}")
    return {"model": type(model).__name__,
            "export_dir": export_tfhub(model, request.export_dir, spm_model_file=request.spm_model_file,
                                       vocab_file=request.vocab_file_only, do_lower_case=request.do_lower_case,
                                       overwrite=request.overwrite)}


def _export_encoder(request, config, seq_length, log):
    model = _loaded(request, "encoder", config, log)
    return {"model": type(model).__name__,
            "export_dir": export_encoder(model, request.export_dir, tokenizer_file=request.tokenizer_file,
                                         do_lower_case=request.do_lower_case, overwrite=request.overwrite)}


def _export_classifier(request, config, seq_length, log):
    model = _loaded(request, "classifier", config, log)
    if not request.tokenizer_file:
        raise UsageError("the classifier export needs --spm_model_file or --vocab_file (its text signatures)")
    return {"model": type(model).__name__,
            "export_dir": export_classifier(model, request.export_dir, request.tokenizer_file,
                                            do_lower_case=request.do_lower_case, max_seq_length=seq_length,
                                            threshold=request.threshold, overwrite=request.overwrite,
                                            label_list=request.label_list)}


def _export_squad(request, config, seq_length, log):
    model = _loaded(request, "squad", config, log)
    if request.vocab_file and not request.spm_model_file:
        raise UsageError("the SQuAD export needs --spm_model_file (SQuAD features are SentencePiece-only)")
    dirs = export_squad_model(
        model, request.export_dir, spm_model_file=request.spm_model_file, do_lower_case=request.do_lower_case,
        max_seq_length=seq_length, doc_stride=request.doc_stride, max_query_length=request.max_query_length,
        max_answer_length=request.max_answer_length, n_best_size=request.n_best_size,
        null_score_diff_threshold=request.null_score_diff_threshold, overwrite=request.overwrite)
    return {"model": type(model).__name__, "dirs": dirs, "export_dir": os.path.abspath(request.export_dir)}


def _export_race(request, config, seq_length, log):
    model = _loaded(request, "race", config, log)
    return {"model": type(model).__name__, "export_dir": export_race_model(
        model, request.export_dir, tokenizer_file=request.tokenizer_file, do_lower_case=request.do_lower_case,
        overwrite=request.overwrite, is_sentencepiece=bool(request.spm_model_file) if request.tokenizer_file else None,
        max_seq_length=seq_length, max_qa_length=request.max_qa_length or min(128, seq_length - 3))}


def _export_tflite(request, config, seq_length, log):
    if request.quantize not in QUANTIZE_MODES:
        raise UsageError(f"unknown --quantize {request.quantize!r}; known: none, dynamic_int8")
    if request.source_saved_model:
        source, head = request.source_saved_model, "saved_model"
    else:
        source, head = _loaded(request, request.tflite_model, config, log), request.tflite_model
    tokenizer_file = request.tokenizer_file
    outcome = {}
    tf.io.gfile.makedirs(request.export_dir)
    info = export_tflite(source, os.path.join(request.export_dir, "model.tflite"), quantize=request.quantize,
                         seq_length=seq_length, allow_select_tf_ops=request.allow_select_tf_ops)
    outcome["tflite"] = info
    if request.eval_task:
        outcome["eval"] = _tflite_eval(request, head, source, info, seq_length)
    if tokenizer_file:
        shutil.copy(tokenizer_file, os.path.join(request.export_dir, os.path.basename(tokenizer_file)))
    summary = {"model": head, "quantize": request.quantize or "none", "seq_length": seq_length,
               "size_bytes": info.size_bytes, "inputs": list(ID_FEATURES),
               "input_shape": list(info.input_shape), "outputs": list(info.outputs),
               "max_abs_diff_vs_float32_model": info.max_abs_diff, "select_tf_ops": info.select_tf_ops,
               "not_verified": info.unverified,
               "tokenizer_file": os.path.basename(tokenizer_file) if tokenizer_file else None,
               "do_lower_case": request.do_lower_case, "eval": outcome.get("eval")}
    with open(os.path.join(request.export_dir, "tflite_info.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, sort_keys=True)
    outcome["export_dir"] = request.export_dir
    return outcome


def _tflite_eval(request, head, source, info, seq_length):
    """Dev-set accuracy of the float32 classifier against its TFLite conversion (`--eval_task`)."""
    if head != "classifier":
        raise UsageError("--eval_task needs --tflite_model=classifier (a fine-tuned classifier)")
    if not request.eval_data_dir:
        raise UsageError("--eval_data_dir is required with --eval_task")
    if not request.tokenizer_file:
        raise UsageError("--eval_task needs --spm_model_file or --vocab_file")
    tokenizer = FullTokenizer(spm_model_file=request.spm_model_file, vocab_file=request.vocab_file,
                              do_lower_case=request.do_lower_case)
    features, labels = _eval_features(request.eval_task, request.eval_data_dir, tokenizer, seq_length,
                                      request.eval_max_examples)
    return compare_outputs(_keras_reference(source), TFLiteModel(info.path), features, labels, output="logits")


_EXPORTERS = {"encoder": _export_encoder, "preprocessing": _export_preprocessing,
              "classifier": _export_classifier, "squad": _export_squad, "race": _export_race,
              "tflite": _export_tflite, "tfhub": _export_tfhub, "tfhub_preprocessing": _export_tfhub_preprocessing}
assert tuple(_EXPORTERS) == EXPORT_TYPES


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


