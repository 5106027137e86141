"""The tokenizer a converted folder gets (albert_tf/checkpoints/input_tokenizer.py): the flag's file, else the one
found beside the input checkpoint or in its assets/, a keras-hub preset's vocabulary.spm, and one line for a
missing file, several candidates or a WordPiece vocabulary where keras-hub takes SentencePiece only."""

import logging
import os

import pytest

from albert_tf.checkpoints import input_tokenizer
from albert_tf.errors import MissingDataError, UsageError
from tests.helpers import make_files


def test_huggingface_takes_the_flag_else_the_one_file_beside_the_input(tmp_path, caplog):
    run = make_files(tmp_path / "run", "model.ckpt.index", "assets/30k-clean.model", "notes.txt")
    prefix = os.path.join(run, "model.ckpt")
    assert input_tokenizer.huggingface_tokenizer(prefix) == (os.path.join(run, "assets", "30k-clean.model"), None)
    assert input_tokenizer.huggingface_tokenizer(run) == (os.path.join(run, "assets", "30k-clean.model"), None)
    given = make_files(tmp_path / "given", "spm.model", "vocab.txt")
    assert input_tokenizer.huggingface_tokenizer(prefix, spm_model_file=f"{given}/spm.model",
                                                 vocab_file=f"{given}/vocab.txt") == (f"{given}/spm.model", None)
    assert input_tokenizer.huggingface_tokenizer(prefix, vocab_file=f"{given}/vocab.txt") == \
        (None, f"{given}/vocab.txt")
    zh = make_files(tmp_path / "zh", "ckpt.index", "vocab_chinese.txt")
    assert input_tokenizer.huggingface_tokenizer(os.path.join(zh, "ckpt")) == \
        (None, os.path.join(zh, "vocab_chinese.txt"))
    odd = make_files(tmp_path / "run[1]", "ckpt.index", "30k.model")  # a folder name that is a glob pattern
    assert input_tokenizer.huggingface_tokenizer(os.path.join(odd, "ckpt")) == (os.path.join(odd, "30k.model"), None)
    bare = make_files(tmp_path / "bare", "ckpt.index")
    with caplog.at_level(logging.WARNING):
        assert input_tokenizer.huggingface_tokenizer(os.path.join(bare, "ckpt")) == (None, None)
    assert any("No tokenizer beside the input" in r.getMessage() for r in caplog.records)


def test_a_missing_flag_file_or_several_candidates_is_one_line(tmp_path):
    run = make_files(tmp_path / "run", "ckpt.index", "a.model", "assets/b.model", "vocab.txt", "vocab-2.txt")
    prefix = os.path.join(run, "ckpt")
    with pytest.raises(MissingDataError, match=r"^--spm_model_file: no such file: /nowhere.model$"):
        input_tokenizer.huggingface_tokenizer(prefix, spm_model_file="/nowhere.model")
    with pytest.raises(MissingDataError, match=r"^--vocab_file: no such file: "):
        input_tokenizer.huggingface_tokenizer(prefix, vocab_file=run)  # a folder is no file
    with pytest.raises(UsageError, match=r"^several SentencePiece models beside the input \(.*a\.model, .*b\.model\); "
                                         r"pass --spm_model_file to say which is the model's$"):
        input_tokenizer.huggingface_tokenizer(prefix)
    vocabs = make_files(tmp_path / "vocabs", "ckpt.index", "vocab.txt", "vocab-2.txt")
    with pytest.raises(UsageError, match=r"^several WordPiece vocabularies .*; pass --vocab_file"):
        input_tokenizer.huggingface_tokenizer(os.path.join(vocabs, "ckpt"))


def test_keras_hub_takes_sentencepiece_only(tmp_path):
    preset = make_files(tmp_path / "preset", "config.json", "assets/tokenizer/vocabulary.spm")
    assert input_tokenizer.keras_hub_tokenizer(preset) == os.path.join(preset, "assets", "tokenizer",
                                                                       "vocabulary.spm")
    both = make_files(tmp_path / "both", "ckpt.index", "30k.model", "assets/tokenizer/vocabulary.spm")
    assert input_tokenizer.keras_hub_tokenizer(os.path.join(both, "ckpt")) == os.path.join(both, "30k.model")
    assert input_tokenizer.keras_hub_tokenizer(both, spm_model_file=os.path.join(both, "30k.model")) == \
        os.path.join(both, "30k.model")
    with pytest.raises(UsageError, match=r"^--vocab_file v.txt: keras-hub's AlbertTokenizer is SentencePiece only"):
        input_tokenizer.keras_hub_tokenizer(both, vocab_file="v.txt")
    zh = make_files(tmp_path / "zh", "ckpt.index", "vocab_chinese.txt")
    with pytest.raises(UsageError, match=r"^the tokenizer beside the input is the WordPiece vocabulary .*"
                                         r"vocab_chinese.txt; keras-hub's AlbertTokenizer is SentencePiece only"):
        input_tokenizer.keras_hub_tokenizer(os.path.join(zh, "ckpt"))
    bare = make_files(tmp_path / "bare", "ckpt.index")
    with pytest.raises(MissingDataError, match=r"^no tokenizer for the keras_hub preset: no SentencePiece "
                                               r"\*\.model beside the input .*ckpt \(or in its assets/\); pass "
                                               r"--spm_model_file$"):
        input_tokenizer.keras_hub_tokenizer(os.path.join(bare, "ckpt"))
