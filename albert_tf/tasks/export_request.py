"""What `export_model.py` can be asked for: the export types and `ExportRequest`, whose `setting` fields are the
script's flags (name, default, help). Apart from `tasks.exports`, which loads TensorFlow and every task, so that
the script defines its flags and answers `--help` without them."""

import dataclasses

from albert_tf.settings import POSITIVE, Range, setting
from albert_tf.tasks.common_settings import spm_model_file_setting, vocab_file_setting

EXPORT_TYPES = ("encoder", "preprocessing", "classifier", "squad", "race", "tflite", "tfhub", "tfhub_preprocessing")
TEXT_ONLY_TYPES = ("preprocessing", "tfhub_preprocessing")
TFLITE_MODELS = ("encoder", "classifier", "squad", "race")


@dataclasses.dataclass
class ExportRequest:
    """What one export is asked for: each field is `export_model.py`'s flag of the same name."""

    export_type: str = setting(help_text="What to export.", flag_default=None, choices=EXPORT_TYPES, required=True)
    export_dir: str = setting(help_text="Where to write the export (a directory; refused if it exists and is not "
                                        "empty, unless --overwrite).", flag_default=None, role="output_tree",
                              replaced_by="overwrite", records=True, required=True)
    overwrite: bool = setting(False, "Replace an existing non-empty --export_dir.")
    albert_config_file: str = setting(None, "The albert_config.json of the model (or a Hugging Face config.json).",
                                      role="input_file")
    init_checkpoint: str = setting(None, "The weights: an original TF1, Hugging Face, keras-hub, Model Garden or "
                                         "albert_tf checkpoint (pretrained or fine-tuned; a directory or a prefix), "
                                         "or a TF-Hub module or SavedModel directory.", role="input_checkpoint")
    spm_model_file: str = spm_model_file_setting(required=False)
    vocab_file: str = vocab_file_setting()
    do_lower_case: bool = setting(True, "Lowercase the input text (True for the uncased English models).")
    max_seq_length: int = setting(None, "Sequence length of the text signatures (preprocessing, tfhub_preprocessing, "
                                        "classifier, SQuAD text) and of the TFLite inputs. Default 128 (SQuAD: 384).",
                                  bounds=Range(3))
    num_labels: int = setting(2, "Classifier: number of labels (1 = regression).", bounds=POSITIVE)
    label_list: list = setting(None, "Classifier: label names in index order (served as `labels`).")
    threshold: float = setting(None, "Classifier: a classification threshold served as the `threshold` output.")
    version_2_with_negative: bool = setting(False, "SQuAD: the v2.0 head (unanswerable questions).")
    max_query_length: int = setting(64, "SQuAD text signature: question pieces kept.", bounds=POSITIVE)
    max_answer_length: int = setting(30, "SQuAD text signature: longest answer span, in pieces.", bounds=POSITIVE)
    doc_stride: int = setting(128, "SQuAD text signature: pieces between the starts of the context windows (as "
                                   "run_squad.py's --doc_stride).", bounds=POSITIVE)
    n_best_size: int = setting(20, "SQuAD v1.1 text signature: best starts and ends paired per window (as "
                                   "run_squad.py's --n_best_size).", bounds=POSITIVE)
    start_n_top: int = setting(5, "SQuAD v2.0: beam size over starts.", bounds=POSITIVE)
    end_n_top: int = setting(5, "SQuAD v2.0: beam size over ends.", bounds=POSITIVE)
    null_score_diff_threshold: float = setting(None, "SQuAD v2.0: threshold on cls_logits for `is_impossible`.")
    max_qa_length: int = setting(None, "RACE text signature: question+option pieces kept (the last ones; default "
                                       "min(128, max_seq_length - 3)).", bounds=POSITIVE)
    tflite_model: str = setting("encoder", "TFLite: which model to convert (built from --init_checkpoint), unless "
                                           "--source_saved_model is given.", choices=TFLITE_MODELS)
    source_saved_model: str = setting(None, "TFLite: convert this exported SavedModel (serving_default on "
                                            "input_ids, input_mask, segment_ids) instead of a checkpoint.",
                                      role="input_tree")
    # The flag's "none" is read as None by `exports.export`.
    quantize: str = setting(None, "TFLite: none (float32) or dynamic_int8 (int8 weights).", flag_default="none")
    eval_task: str = setting(None, "TFLite classifier: a GLUE task (e.g. sst-2) whose dev set measures the accuracy "
                                   "of the TFLite model against the float32 model.")
    eval_data_dir: str = setting(None, "TFLite: the GLUE data dir for --eval_task (e.g. data/glue).", role="input_dir")
    eval_max_examples: int = setting(1000, "TFLite: at most this many dev examples for --eval_task.", bounds=POSITIVE)
    allow_select_tf_ops: bool = setting(False, "TFLite: if the model needs TensorFlow ops that are not TFLite "
                                               "builtins, convert with SELECT_TF_OPS (the file then needs the "
                                               "TensorFlow-ops delegate) instead of stopping with their names.")
    mixed_precision: str = setting(None, "Model SavedModel exports: build the served model under a mixed precision "
                                         "policy, bf16 (mixed_bfloat16) or fp16 (mixed_float16): float32 weights, "
                                         "computation in 16 bits (LayerNorm and softmax in float32), float32 "
                                         "outputs.")

    def inputs(self):
        """The (flag, path) of every file or folder the export reads."""
        return [(f"--{name}", getattr(self, name)) for name in ("init_checkpoint", "source_saved_model",
                                                                 "albert_config_file", "spm_model_file",
                                                                 "vocab_file", "eval_data_dir")]

    @property
    def tokenizer_file(self):
        return self.spm_model_file or self.vocab_file

    @property
    def vocab_file_only(self):
        """The WordPiece vocabulary when no SentencePiece model is given (the SentencePiece model wins)."""
        return None if self.spm_model_file else self.vocab_file

    def needs_model(self):
        return self.export_type not in TEXT_ONLY_TYPES and not (self.export_type == "tflite"
                                                                 and self.source_saved_model)
