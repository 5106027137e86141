"""The tokenizer files of a Hugging Face ALBERT folder, so `transformers.AutoTokenizer.from_pretrained(dir)` opens
it offline and gives `FullTokenizer`'s ids.

SentencePiece (`spm_model_file`): `spiece.model` (the model, byte for byte), `tokenizer.json`, `tokenizer_config.json`
(`AlbertTokenizer`, `do_lower_case`, `keep_accents` false, `remove_space` true: the original's `preprocess_text`)
and `special_tokens_map.json`. `tokenizer.json` is needed, not decoration: built from `spiece.model` alone,
transformers 5 turns the model's user-defined pieces (`(`, `.`, `-`, ... in `30k-clean.model`) into added tokens
that split the text before SentencePiece and get a word boundary of their own ("ex-wife" -> `▁ex - ▁wife`, the
original `▁ex - wife`), which changes most sentences' ids. `tokenizer.json` keeps them ordinary pieces, and lowers
the score of pieces that end in a digit and a comma, Hugging Face's stand-in for the original's digit-comma re-split.

WordPiece (`vocab_file`, the Chinese models): `vocab.txt`, and `tokenizer_config.json` naming `BertTokenizer`, which
is the original's BERT-style basic tokenizer and WordPiece (Chinese characters split, accents stripped when
lowercasing).

Where Hugging Face's rules still differ from the original's: docs/compatibility.md, "Hugging Face out".
"""

import base64
import json
import os
import shutil

from albert_tf.checkpoints.errors import CheckpointMismatchError
from albert_tf.text.tokenization import FullTokenizer

SPM_NAME = "spiece.model"
WORDPIECE_NAME = "vocab.txt"
TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
SPM_FILES = (SPM_NAME, TOKENIZER_JSON, TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP)
WORDPIECE_FILES = (WORDPIECE_NAME, TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP)

# The special tokens of the original's vocabularies, by Hugging Face's role names.
SPM_SPECIAL = {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "<unk>", "sep_token": "[SEP]",
               "pad_token": "<pad>", "cls_token": "[CLS]", "mask_token": "[MASK]"}
WORDPIECE_SPECIAL = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                     "mask_token": "[MASK]"}
# SentencePiece piece types (sentencepiece_model.proto): control and unknown pieces are special tokens.
_UNKNOWN, _CONTROL = 2, 3
_SPACE = "\u2581"  # SentencePiece's word-boundary mark
_DIGIT_COMMA_PENALTY = 100.0  # what Hugging Face's own AlbertConverter subtracts from such pieces' scores
# Segment ids as the original's features: [CLS] A [SEP] in segment 0, B [SEP] in segment 1.
_MODEL_INPUTS = ["input_ids", "token_type_ids", "attention_mask"]


def tokenizer_files(spm_model_file=None, vocab_file=None):
    """The names of the files `write_tokenizer` writes for this tokenizer."""
    return SPM_FILES if spm_model_file else WORDPIECE_FILES if vocab_file else ()


def _sentencepiece_proto(spm_model_file):
    """The parsed `ModelProto` of a SentencePiece model (its pieces, scores, types and normaliser)."""
    from sentencepiece import sentencepiece_model_pb2  # pylint: disable=import-outside-toplevel

    proto = sentencepiece_model_pb2.ModelProto()
    with open(spm_model_file, "rb") as f:
        proto.ParseFromString(f.read())
    return proto


def _digit_comma(piece):
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def _special(content, token_id):
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def _template(cls_id, sep_id):
    """[CLS] A [SEP] (segment 0) and [CLS] A [SEP] B [SEP] (B [SEP] in segment 1), as the original's features."""
    def token(name, segment):
        return {"SpecialToken": {"id": name, "type_id": segment}}

    def sequence(name, segment):
        return {"Sequence": {"id": name, "type_id": segment}}

    return {"type": "TemplateProcessing",
            "single": [token("[CLS]", 0), sequence("A", 0), token("[SEP]", 0)],
            "pair": [token("[CLS]", 0), sequence("A", 0), token("[SEP]", 0), sequence("B", 1), token("[SEP]", 1)],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [cls_id], "tokens": ["[CLS]"]},
                               "[SEP]": {"id": "[SEP]", "ids": [sep_id], "tokens": ["[SEP]"]}}}


def sentencepiece_tokenizer_json(spm_model_file, do_lower_case):
    """The `tokenizer.json` (Hugging Face `tokenizers` serialisation) of a SentencePiece model: the original's
    normalisation (quotes as Hugging Face maps them, NFKD without accents, lowercasing with `do_lower_case`, then
    the model's own normaliser), whitespace splitting with a word boundary before each word, and a Unigram model
    of the model's pieces and scores (characters it has no piece for become byte pieces where the model was trained
    with byte fallback, as SentencePiece does, else `<unk>`). Only control and unknown pieces are added tokens."""
    proto = _sentencepiece_proto(spm_model_file)
    pieces = [(p.piece, p.score - _DIGIT_COMMA_PENALTY if _digit_comma(p.piece) else p.score, p.type)
              for p in proto.pieces]
    ids = {piece: i for i, (piece, _, _) in enumerate(pieces)}
    for token in ("[CLS]", "[SEP]", "<unk>"):
        if token not in ids:
            raise CheckpointMismatchError(f"the SentencePiece model {spm_model_file} has no {token} piece: it is "
                                          "not an ALBERT tokenizer")
    normalizers = [{"type": "Replace", "pattern": {"String": "``"}, "content": '"'},
                   {"type": "Replace", "pattern": {"String": "''"}, "content": '"'},
                   {"type": "NFKD"}, {"type": "StripAccents"}]
    if do_lower_case:
        normalizers.append({"type": "Lowercase"})
    charsmap = proto.normalizer_spec.precompiled_charsmap
    if charsmap:
        normalizers.append({"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()})
    metaspace = {"type": "Metaspace", "replacement": _SPACE, "prepend_scheme": "always", "split": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [_special(piece, i) for i, (piece, _, kind) in enumerate(pieces)
                         if kind in (_UNKNOWN, _CONTROL)],
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, metaspace]},
        "post_processor": _template(ids["[CLS]"], ids["[SEP]"]),
        "decoder": metaspace,
        "model": {"type": "Unigram", "unk_id": ids["<unk>"], "vocab": [[p, s] for p, s, _ in pieces],
                  "byte_fallback": bool(proto.trainer_spec.byte_fallback)},
    }


def _check_size(tokenizer, path, vocab_size):
    size = max(tokenizer.vocab.values()) + 1
    if vocab_size is not None and size > vocab_size:
        raise CheckpointMismatchError(f"the tokenizer {path} has {size} tokens but the model's vocab_size is "
                                      f"{vocab_size}: it is another model's tokenizer")


def _write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=1)


def write_tokenizer(directory, spm_model_file=None, vocab_file=None, do_lower_case=True, model_max_length=512,
                    vocab_size=None):
    """Writes the tokenizer files into `directory` (an existing folder being staged; see
    `huggingface.write_folder`): SentencePiece from `spm_model_file`, else WordPiece from `vocab_file`.

    Raises `TokenizerError` naming a file that is missing or no tokenizer, and `CheckpointMismatchError` when it
    has more tokens than `vocab_size` (another model's tokenizer). Returns the names written.
    """
    tokenizer = FullTokenizer(vocab_file=None if spm_model_file else vocab_file, do_lower_case=do_lower_case,
                              spm_model_file=spm_model_file)  # one clear line for a missing or bad file
    _check_size(tokenizer, spm_model_file or vocab_file, vocab_size)
    config = {"do_lower_case": bool(do_lower_case), "model_max_length": int(model_max_length),
              "model_input_names": _MODEL_INPUTS}
    if spm_model_file:
        shutil.copyfile(spm_model_file, os.path.join(directory, SPM_NAME))
        _write_json(os.path.join(directory, TOKENIZER_JSON),
                    sentencepiece_tokenizer_json(spm_model_file, do_lower_case))
        config.update(tokenizer_class="AlbertTokenizer", keep_accents=False, remove_space=True, **SPM_SPECIAL)
        special = SPM_SPECIAL
    else:
        shutil.copyfile(vocab_file, os.path.join(directory, WORDPIECE_NAME))
        # The original's basic tokenizer strips accents exactly when it lowercases; Chinese characters are split.
        config.update(tokenizer_class="BertTokenizer", tokenize_chinese_chars=True, strip_accents=None,
                      **WORDPIECE_SPECIAL)
        special = WORDPIECE_SPECIAL
    _write_json(os.path.join(directory, TOKENIZER_CONFIG), config)
    _write_json(os.path.join(directory, SPECIAL_TOKENS_MAP), special)
    return tokenizer_files(spm_model_file, vocab_file)
