"""The RACE SavedModel in-process (albert_tf/serving/race.py): the ids signature against the Keras model, the
`text` signature against `data.race.convert_example`'s features (blanks filled, options appended, a long
question cut from the front, the article cut to fit), and the lengths it refuses. In a process without albert_tf:
tests/tasks/test_race.py (slow)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import race
from albert_tf.serving import race as serving_race
from albert_tf.serving.race import export_race_model
from albert_tf.serving.savedmodel import ExportError
from albert_tf.tasks import race as race_task
from albert_tf.text.tokenization import FullTokenizer
from tests.helpers import DATA_DIR, SPM, tiny_config

ARTICLE = ("Tom ``walked'' home through the park after school. It rained all afternoon, so he stayed inside and "
           "read a book about ships, trains and the people who built them long ago.")
EXAMPLES = [
    race.RaceExample("q-0", "middle", ARTICLE, "Tom went home _ .", ["by bus", "ON FOOT", "by train", ""]),
    race.RaceExample("q-1", "high", ARTICLE, "What did Tom read about, according to the passage and to the long "
                                             "question that goes on and on?", ["ships", "cars", "planes", "dogs"]),
    race.RaceExample("q-2", "high", "Short.", "From _ to _ ?", ["Six", "  seven  eight ", "9", "ten"]),
]
SEQ, QA = 32, 12


@pytest.fixture(name="exported", scope="module")
def _exported(tmp_path_factory):
    model = race_task.build_model(tiny_config(), dropout_prob=0.0)
    kernel = model.output_layer.kernel  # a head large enough that every token moves the probabilities
    kernel.assign(np.random.default_rng(0).normal(0.0, 1000.0, kernel.shape).astype(np.float32))
    export_dir = export_race_model(model, str(tmp_path_factory.mktemp("export") / "race"), tokenizer_file=SPM,
                                   is_sentencepiece=True, max_seq_length=SEQ, max_qa_length=QA)
    return model, tf.saved_model.load(export_dir)


def test_text_and_ids_serve_what_the_model_gives_on_the_python_features(exported):
    model, loaded = exported
    assert sorted(loaded.signatures) == ["serving_default", "text", "tokenization_info"]
    features = [race.convert_example(e, FullTokenizer(spm_model_file=SPM), SEQ, QA) for e in EXAMPLES]
    assert any(len(f["tokens"][0]) == SEQ for f in features)  # the article was cut to fit
    ids = {k: tf.constant([f[k] for f in features], tf.int32) for k in ("input_ids", "input_mask", "segment_ids")}
    logits = model(ids, training=False).numpy()
    probabilities = tf.nn.softmax(logits, axis=-1).numpy()
    assert np.ptp(probabilities, axis=-1).min() > 0.01  # outputs that tell inputs apart
    served = loaded.signatures["serving_default"](**ids)
    np.testing.assert_allclose(served["logits"].numpy(), logits, atol=1e-3, rtol=1e-5)
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-4)  # graph vs eager
    text = loaded.signatures["text"](article=tf.constant([e.article for e in EXAMPLES]),
                                     question=tf.constant([e.question for e in EXAMPLES]),
                                     options=tf.constant([e.options for e in EXAMPLES]))
    np.testing.assert_allclose(text["probabilities"].numpy(), served["probabilities"].numpy(), atol=1e-5)
    expected = probabilities.argmax(axis=-1)
    for outputs in (served, text):
        np.testing.assert_array_equal(outputs["prediction"].numpy(), expected)
        assert [a.decode() for a in outputs["answer"].numpy()] == ["ABCD"[i] for i in expected]


def test_lengths_it_cannot_serve_are_refused(tmp_path):
    model = race_task.build_model(tiny_config())
    with pytest.raises(ExportError, match=r"^max_qa_length 30 must be between 1 and max_seq_length - 3 \(29\)$"):
        export_race_model(model, str(tmp_path / "a"), tokenizer_file=SPM, is_sentencepiece=True, max_seq_length=32,
                          max_qa_length=30)
    with pytest.raises(ExportError, match=r"between 1 and"):
        export_race_model(model, str(tmp_path / "b"), tokenizer_file=SPM, is_sentencepiece=True, max_seq_length=32,
                          max_qa_length=0)
    with pytest.raises(ValueError, match="max_seq_length"):
        export_race_model(model, str(tmp_path / "c"), tokenizer_file=SPM, is_sentencepiece=True, max_seq_length=256)
    assert not any((tmp_path / name).exists() for name in "abc")


def test_question_and_option_lengths_that_fit_are_accepted_and_the_defaults_are_run_races(tmp_path, monkeypatch):
    """max_qa_length from 1 up to max_seq_length - 3 ([CLS] and two [SEP]) builds the text signature (stood in
    here: only the check before it is under test), by default run_race.py's lengths."""
    built = []
    monkeypatch.setattr(serving_race, "_text_signature", lambda *args: built.append(args[-2:]) or "text")
    monkeypatch.setattr(serving_race, "save_module", lambda module, export_dir, signatures, overwrite: signatures)
    signatures = export_race_model(race_task.build_model(tiny_config()), str(tmp_path / "race"), tokenizer_file=SPM,
                                   is_sentencepiece=True, max_seq_length=32, max_qa_length=29)
    assert signatures["text"] == "text" and built == [(32, 29)]
    export_race_model(race_task.build_model(tiny_config()), str(tmp_path / "shortest"), tokenizer_file=SPM,
                      is_sentencepiece=True, max_seq_length=32, max_qa_length=1)
    assert built[-1] == (32, 1)  # the shortest
    model = race_task.build_model(tiny_config(max_position_embeddings=512))
    export_race_model(model, str(tmp_path / "defaults"), tokenizer_file=SPM, is_sentencepiece=True)
    assert built[-1] == (512, 128)  # run_race.py's --max_seq_length and --max_qa_length


def test_without_the_tokenizers_kind_there_is_no_text_signature(tmp_path):
    model = race_task.build_model(tiny_config())
    loaded = tf.saved_model.load(export_race_model(model, str(tmp_path / "ids"), tokenizer_file=SPM))
    assert sorted(loaded.signatures) == ["serving_default", "tokenization_info"]


def test_the_defaults_inference_mode_and_the_length_check(tmp_path):
    """Exported with its defaults (lowercasing, 512 tokens of which at most 128 for question and option, no
    overwrite) from a model with dropout: the text signature serves the Keras model in inference mode on
    `convert_example`'s features, every call alike; the restored object keeps its functions; ids longer than
    the positions are refused in the graph."""
    config = tiny_config(max_position_embeddings=512, hidden_dropout_prob=0.5, attention_probs_dropout_prob=0.5)
    model = race_task.build_model(config, dropout_prob=0.5)
    kernel = model.output_layer.kernel
    kernel.assign(np.random.default_rng(1).normal(0.0, 1000.0, kernel.shape).astype(np.float32))
    export_dir = export_race_model(model, str(tmp_path / "race"), tokenizer_file=SPM, is_sentencepiece=True)
    loaded = tf.saved_model.load(export_dir)
    example = race.RaceExample("q", "high", ARTICLE * 20, "What did TOM read about, " * 40 + "_ ?",
                               ["Ships", "cars", "PLANES", "dogs"])
    features = race.convert_example(example, FullTokenizer(spm_model_file=SPM), 512, 128)
    assert len(features["tokens"][0]) == 512 and sum(features["segment_ids"][0]) == 129  # both parts cut
    ids = {k: tf.constant([features[k]], tf.int32) for k in ("input_ids", "input_mask", "segment_ids")}
    expected = model(ids, training=False).numpy()
    for _ in range(2):
        served = loaded.serve_text(article=tf.constant([example.article]), question=tf.constant([example.question]),
                                   options=tf.constant([example.options]))
        np.testing.assert_allclose(served["logits"].numpy(), expected, atol=1e-3, rtol=1e-5)
    np.testing.assert_allclose(loaded.serve(**ids)["logits"].numpy(), expected, atol=1e-3, rtol=1e-5)
    assert bool(loaded.signatures["tokenization_info"]()["do_lower_case"].numpy()) is True
    too_long = tf.ones([1, 4, 513], tf.int32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_position_embeddings"):
        loaded.signatures["serving_default"](input_ids=too_long, input_mask=too_long, segment_ids=too_long)
    with pytest.raises(ExportError, match="exists"):
        export_race_model(model, export_dir)


@pytest.mark.slow
def test_a_wordpiece_vocabulary_keeping_case_serves_the_python_features(tmp_path):
    """The text signature with a WordPiece vocabulary and `do_lower_case=False`: the same features as
    `convert_example` with that tokenizer (no SentencePiece preprocessing, letters' case kept: "The" and "ABC"
    are not pieces of this vocabulary, "the" and "abc" are)."""
    vocab = os.path.join(DATA_DIR, "vocab_chinese.txt")
    with open(vocab, encoding="utf-8") as f:
        model = race_task.build_model(tiny_config(vocab_size=sum(1 for _ in f)), dropout_prob=0.0)
    kernel = model.output_layer.kernel
    kernel.assign(np.random.default_rng(2).normal(0.0, 1000.0, kernel.shape).astype(np.float32))
    loaded = tf.saved_model.load(export_race_model(model, str(tmp_path / "race"), tokenizer_file=vocab,
                                                   do_lower_case=False, is_sentencepiece=False,
                                                   max_seq_length=SEQ, max_qa_length=QA))
    examples = [race.RaceExample("z-0", "high", "今天天气很好，The abc 我们去公园。" * 3, "他们去了 _ 。",
                                 ["公园", "ABC", "the 学校", "abc"]),
                race.RaceExample("z-1", "middle", "The ABC.", "the abc ?", ["我", "你", "The", "the"])]
    tokenizer = FullTokenizer(vocab_file=vocab, do_lower_case=False)
    features = [race.convert_example(e, tokenizer, SEQ, QA) for e in examples]
    assert "[UNK]" in features[0]["tokens"][1] and "abc" in features[0]["tokens"][3]  # case kept
    ids = {k: tf.constant([f[k] for f in features], tf.int32) for k in ("input_ids", "input_mask", "segment_ids")}
    expected = model(ids, training=False).numpy()
    served = loaded.signatures["text"](article=tf.constant([e.article for e in examples]),
                                       question=tf.constant([e.question for e in examples]),
                                       options=tf.constant([e.options for e in examples]))
    np.testing.assert_allclose(served["logits"].numpy(), expected, atol=1e-3, rtol=1e-5)
    assert bool(loaded.signatures["tokenization_info"]()["do_lower_case"].numpy()) is False
