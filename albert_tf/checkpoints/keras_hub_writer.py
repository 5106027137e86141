"""Writes a keras-hub ALBERT preset: a folder `keras_hub.models.AlbertBackbone.from_preset(dir)`,
`keras_hub.models.AlbertTokenizer.from_preset(dir)` and, for a fine-tuned classifier,
`keras_hub.models.AlbertTextClassifier.from_preset(dir)` open offline.

The weights come as this project's `{TF1 name: array}` (`albert_tf.checkpoints.model_arrays(model)`) and are
assigned through the same name table the reader uses (`keras_hub_names.backbone_entries`), so reading and
writing are one mapping. The files are keras-hub's own: the preset is saved with keras-hub's `save_to_preset`,
staged in a temporary folder and moved into place only when complete.

What keras-hub cannot express is refused (one line) rather than written wrong: an activation other than the
original's `gelu` (tanh approximation, keras-hub's `gelu_approximate`), a layer-to-group assignment other than
keras-hub's contiguous one, a SentencePiece model with more pieces than the embedding has rows, a WordPiece
vocabulary. keras-hub's `AlbertTokenizer` runs SentencePiece on the raw text: it neither lowercases nor strips
accents as the original's `do_lower_case` does (see docs/compatibility.md, "keras-hub out").
"""

import os

import numpy as np

from albert_tf import fileio
from albert_tf.checkpoints.errors import CheckpointMismatchError
from albert_tf.checkpoints.keras_hub_names import backbone_entries

CONFIG_NAME = "albert_config.json"  # this project's config, kept inside the preset (keras-hub ignores it)
MAX_PREPROCESSOR_LENGTH = 512  # keras-hub's default sequence_length of the classifier's preprocessor


def check_config(config):
    """Raises `CheckpointMismatchError` (one line) when keras-hub's `AlbertBackbone` cannot compute `config`."""
    if config.hidden_act != "gelu":
        raise CheckpointMismatchError(
            f"keras-hub's AlbertBackbone computes only hidden_act 'gelu' (the tanh approximation); this model's "
            f"config has {config.hidden_act!r}, so it cannot be written as a keras-hub preset")
    layers, groups = config.num_hidden_layers, config.num_hidden_groups
    if layers % groups:
        raise CheckpointMismatchError(
            f"keras-hub's AlbertBackbone needs num_hidden_layers divisible by num_hidden_groups; this config has "
            f"{layers} layers in {groups} groups, so it cannot be written as a keras-hub preset")
    per_group = layers // groups
    if config.layer_groups() != [layer // per_group for layer in range(layers)]:
        raise CheckpointMismatchError(
            f"keras-hub's AlbertBackbone runs its {groups} groups over the {layers} layers in another order than "
            "the original does for this config, so it cannot be written as a keras-hub preset")


def build_backbone(config, arrays):
    """A keras-hub `AlbertBackbone` of `config` holding `arrays` ({TF1 name: array}, e.g. `model_arrays`).

    Raises `CheckpointMismatchError` naming the first weight the arrays lack or have in another shape.
    """
    import keras_hub  # pylint: disable=import-outside-toplevel

    check_config(config)
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, embedding_dim=config.embedding_size, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, num_groups=config.num_hidden_groups,
        num_inner_repetitions=config.inner_group_num, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings, num_segments=config.type_vocab_size,
        dtype="float32")
    pairs = []
    for entry in backbone_entries(backbone):
        if entry.name not in arrays:
            raise CheckpointMismatchError(f"the model lacks {entry.name}, which keras-hub's AlbertBackbone needs")
        try:
            pairs.append((entry.variable, entry.to_keras(arrays[entry.name])))
        except ValueError as err:
            raise CheckpointMismatchError(str(err)) from None
    for variable, value in pairs:
        variable.assign(np.asarray(value, dtype=np.float32))
    return backbone


def build_tokenizer(spm_model_file, vocab_size=None):
    """keras-hub's `AlbertTokenizer` of a SentencePiece model file.

    Raises `TokenizerError` naming the file when it is missing or no SentencePiece model, and
    `CheckpointMismatchError` when it has more pieces than the model's `vocab_size`.
    """
    import keras_hub  # pylint: disable=import-outside-toplevel

    from albert_tf.text.tokenization import load_sentencepiece  # pylint: disable=import-outside-toplevel

    pieces = load_sentencepiece(spm_model_file).get_piece_size()  # one clear line for a missing or bad file
    if vocab_size is not None and pieces > vocab_size:
        raise CheckpointMismatchError(
            f"the SentencePiece model {spm_model_file} has {pieces} pieces but the model's vocab_size is "
            f"{vocab_size}: it is another model's tokenizer")
    with open(spm_model_file, "rb") as f:
        return keras_hub.models.AlbertTokenizer(proto=f.read())


def classifier_head(arrays, num_labels, hidden_size):
    """(kernel [H, N], bias [N]) of keras-hub's `logits` layer from the original's `output_weights` [N, H] and
    `output_bias` [N] (the head of `run_classifier`: dropout then one dense layer on the pooled output, as
    keras-hub's `AlbertTextClassifier` has)."""
    if "output_weights" not in arrays or "output_bias" not in arrays:
        raise CheckpointMismatchError("the model has no classifier head (output_weights, output_bias) to write "
                                      "as a keras-hub AlbertTextClassifier")
    weights, bias = np.asarray(arrays["output_weights"]), np.asarray(arrays["output_bias"])
    if weights.shape != (num_labels, hidden_size) or bias.shape != (num_labels,):
        raise CheckpointMismatchError(
            f"the classifier head output_weights has shape {list(weights.shape)}, expected {[num_labels, hidden_size]} "
            f"for {num_labels} labels")
    return weights.T, bias


def write_preset(output_dir, config, arrays, spm_model_file, num_labels=None, overwrite=False,
                 dropout_prob=0.1, sequence_length=None, what=None):
    """Writes a keras-hub preset of `arrays` ({TF1 name: array}) at `output_dir`; returns `output_dir`.

    Args:
      output_dir: the preset folder; an existing non-empty one is replaced only with `overwrite`.
      config: the model's `AlbertConfig` (also written as `albert_config.json` in the folder).
      arrays: the model's weights by TF1 name; with `num_labels`, `output_weights` and `output_bias` too.
      spm_model_file: the SentencePiece model of the tokenizer (copied into the preset by keras-hub).
      num_labels: write an `AlbertTextClassifier` (task.json, task.weights.h5, preprocessor.json) with this many
        classes; None writes the backbone and tokenizer only.
      dropout_prob: the classifier's dropout rate before the logits (training only).
      sequence_length: the classifier preprocessor's sequence length (default: the smaller of 512 and
        `max_position_embeddings`).
      what: how errors name the output (e.g. "--output_path /x").
    Nothing is left at `output_dir` if anything fails: the folder is written in a staging folder and moved into
    place whole.
    """
    import keras_hub  # pylint: disable=import-outside-toplevel

    backbone = build_backbone(config, arrays)
    tokenizer = build_tokenizer(spm_model_file, config.vocab_size)
    task = None
    if num_labels is not None:
        kernel, bias = classifier_head(arrays, num_labels, config.hidden_size)
        length = sequence_length or min(MAX_PREPROCESSOR_LENGTH, config.max_position_embeddings)
        preprocessor = keras_hub.models.AlbertTextClassifierPreprocessor(tokenizer=tokenizer,
                                                                         sequence_length=length)
        task = keras_hub.models.AlbertTextClassifier(backbone=backbone, preprocessor=preprocessor,
                                                     num_classes=num_labels, dropout=dropout_prob)
        task.output_dense.kernel.assign(kernel.astype(np.float32))
        task.output_dense.bias.assign(bias.astype(np.float32))
    with fileio.atomic_path(output_dir, what, directory=True, replace_directory_ok=overwrite) as staged:
        if task is not None:
            task.save_to_preset(staged)  # the backbone, the preprocessor and its tokenizer too
        else:
            backbone.save_to_preset(staged)
            tokenizer.save_to_preset(staged)
        with open(os.path.join(staged, CONFIG_NAME), "w", encoding="utf-8") as f:
            f.write(config.to_json_string())
    return output_dir
