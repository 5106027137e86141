"""The tokenizer a converted folder gets: the file its flag names, else the one found beside the input checkpoint.

A Hugging Face folder takes a SentencePiece model or a WordPiece vocabulary, a keras-hub preset a SentencePiece
model only. Beside the input means in its folder or that folder's `assets/` (as the release tarballs and TF-Hub
modules keep it; a keras-hub preset keeps its model as `assets/tokenizer/vocabulary.spm`). Several candidates are
a `UsageError` naming the flag that chooses one, never a guess.
"""

import glob
import os

from absl import logging

from albert_tf.errors import MissingDataError, UsageError


def _input_folder(input_checkpoint):
    """The folder an input lives in: the input itself when it is a directory, else the prefix's directory."""
    if os.path.isdir(input_checkpoint):
        return input_checkpoint
    return os.path.dirname(os.path.abspath(input_checkpoint))


def _beside(input_checkpoint, pattern):
    """Files matching `pattern` beside the input (in its folder) or in its `assets/`, sorted."""
    folder = _input_folder(input_checkpoint)
    places = [folder, os.path.join(folder, "assets")]
    return sorted(path for place in places for path in glob.glob(os.path.join(glob.escape(place), pattern)))


def _one(found, kind, flag):
    """The one file of `found` (logged as the tokenizer), None for none; several is a `UsageError` naming `flag`."""
    if len(found) > 1:
        raise UsageError(f"several {kind} beside the input ({', '.join(found)}); pass {flag} to say which is the "
                         "model's")
    if found:
        logging.info("Tokenizer: %s (beside the input)", found[0])
        return found[0]
    return None


def _existing_file(flag, path):
    if not os.path.isfile(path):
        raise MissingDataError(f"{flag}: no such file: {path}")
    return path


def keras_hub_tokenizer(input_checkpoint, spm_model_file=None, vocab_file=None):
    """The SentencePiece model for a keras_hub output: `spm_model_file`, else the one `*.model` beside the input
    or in its `assets/` (a keras-hub preset's `assets/tokenizer/vocabulary.spm`). Raises `UsageError` for a
    WordPiece vocabulary (given, or all there is beside the input) or several models to choose from, and
    `MissingDataError` when there is none."""
    if vocab_file:
        raise UsageError(f"--vocab_file {vocab_file}: keras-hub's AlbertTokenizer is SentencePiece only, so a "
                         "WordPiece vocabulary cannot go into a keras_hub preset; pass --spm_model_file")
    if spm_model_file:
        return _existing_file("--spm_model_file", spm_model_file)
    found = _beside(input_checkpoint, "*.model")
    preset_spm = os.path.join(_input_folder(input_checkpoint), "assets", "tokenizer", "vocabulary.spm")
    if not found and os.path.isfile(preset_spm):
        found = [preset_spm]
    found = _one(found, "SentencePiece models", "--spm_model_file")
    if found:
        return found
    vocabs = _beside(input_checkpoint, "vocab*.txt")
    if vocabs:
        raise UsageError(f"the tokenizer beside the input is the WordPiece vocabulary {vocabs[0]}; keras-hub's "
                         "AlbertTokenizer is SentencePiece only, so it cannot go into a keras_hub preset")
    raise MissingDataError(f"no tokenizer for the keras_hub preset: no SentencePiece *.model beside the input "
                           f"{input_checkpoint} (or in its assets/); pass --spm_model_file")


def huggingface_tokenizer(input_checkpoint, spm_model_file=None, vocab_file=None):
    """(spm_model_file, vocab_file) for a huggingface output, one of them None: the flag given (SentencePiece
    first, as the scripts), else the one `*.model` beside the input or in its `assets/`, else the one
    `vocab*.txt` there (WordPiece). (None, None) when there is none: the folder then holds the model only, which
    `AutoModel` opens and `AutoTokenizer` does not (logged). Raises `MissingDataError` for a flag naming no file
    and `UsageError` for several candidates."""
    if spm_model_file:
        return _existing_file("--spm_model_file", spm_model_file), None
    if vocab_file:
        return None, _existing_file("--vocab_file", vocab_file)
    found = _one(_beside(input_checkpoint, "*.model"), "SentencePiece models", "--spm_model_file")
    if found:
        return found, None
    found = _one(_beside(input_checkpoint, "vocab*.txt"), "WordPiece vocabularies", "--vocab_file")
    if found:
        return None, found
    logging.warning("No tokenizer beside the input %s (no *.model or vocab*.txt): the Hugging Face folder holds "
                    "the model only, and AutoTokenizer will not open it; pass --spm_model_file (or --vocab_file) "
                    "to add it", input_checkpoint)
    return None, None
