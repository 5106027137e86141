"""The in-graph tokenizer as a SavedModel of its own, in-process (albert_tf/serving/text_module.py): every function
against the Python tokenizer, restored from the export. In a fresh process without albert_tf, on many texts:
tests/text/test_preprocessor.py (slow)."""

import os

import pytest
import tensorflow as tf

from albert_tf.serving.text_module import TextPreprocessorModule, export_text_preprocessor
from albert_tf.text.preprocessor import AlbertTextPreprocessor
from albert_tf.text.tokenization import FullTokenizer, encode_pair
from tests.helpers import SPM

TEXTS_A, TEXTS_B = ["Hello WORLD, again.", "A lite BERT"], ["Second text.", ""]


@pytest.fixture(name="exported", scope="module")
def _exported(tmp_path_factory):
    export_dir = str(tmp_path_factory.mktemp("text") / "preprocessor")
    layer = AlbertTextPreprocessor(spm_model_file=SPM, max_seq_length=16)
    assert export_text_preprocessor(layer, export_dir) == export_dir
    return tf.saved_model.load(export_dir)


def test_the_exported_tokenizer_gives_the_python_tokenizers_ids(exported):
    tokenizer = FullTokenizer(spm_model_file=SPM)
    pair = exported.signatures["encode_pair"](text_a=tf.constant(TEXTS_A), text_b=tf.constant(TEXTS_B))
    single = exported.signatures["serving_default"](text=tf.constant(TEXTS_A))
    for i, (a, b) in enumerate(zip(TEXTS_A, TEXTS_B)):
        expected_pair, expected_single = encode_pair(tokenizer, a, b or None, 16), encode_pair(tokenizer, a, None, 16)
        assert [pair[k].numpy()[i].tolist() for k in ("input_ids", "input_mask", "segment_ids")] == \
            [list(x) for x in expected_pair]
        assert [single[k].numpy()[i].tolist() for k in ("input_ids", "input_mask", "segment_ids")] == \
            [list(x) for x in expected_single]
    tokens = exported.tokenize(tf.constant(TEXTS_A)).to_list()
    assert [[t.decode() for t in row] for row in tokens] == [tokenizer.tokenize(t) for t in TEXTS_A]
    assert exported.tokenize_to_ids(tf.constant(TEXTS_A)).to_list() == [
        tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t)) for t in TEXTS_A]
    both = exported.tokenize_with_ids(tf.constant(TEXTS_A[:1]))
    assert both["ids"].to_list() == [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(TEXTS_A[0]))]


def test_the_export_carries_its_tokenizer_file_and_settings(exported):
    info = exported.tokenization_info()
    assert os.path.basename(info["vocab_file"].numpy().decode()) == os.path.basename(SPM)
    assert bool(info["do_lower_case"].numpy()) is True
    assert int(exported.max_seq_length.numpy()) == 16 and bool(exported.is_sentencepiece.numpy()) is True
    assert [v.name for v in (exported.do_lower_case, exported.max_seq_length, exported.is_sentencepiece)
            if v.trainable] == []


def test_the_module_takes_the_name_it_is_given():
    layer = AlbertTextPreprocessor(spm_model_file=SPM, max_seq_length=16)
    assert TextPreprocessorModule(layer, name="tokenizer").name == "tokenizer"
