"""keras-hub out: `convert --output_format=keras_hub` writes a preset folder that keras-hub's own
`AlbertBackbone.from_preset`, `AlbertTokenizer.from_preset` and `AlbertTextClassifier.from_preset` open offline,
computing what this project computes (within 1e-5); keras-hub preset -> this project -> preset keeps every array;
bad input is one line and leaves no output folder."""

import json
import logging
import os
import shutil
import socket
import subprocess
import sys

import keras_hub
import numpy as np
import pytest

from albert_tf import fileio
from albert_tf.checkpoints import load_checkpoint, model_arrays, save_checkpoint
from albert_tf.checkpoints import conversion, keras_hub_writer, task_heads
from albert_tf.errors import UsageError
from albert_tf.model import AlbertForPretraining, AlbertModel, dummy_inputs
from albert_tf.tasks.classification import build_classifier
from albert_tf.text.tokenization import FullTokenizer, preprocess_text
from tests.helpers import (FIXTURES_DIR, REPO, SPM, assert_one_line_error, leftovers, padded_batch, randomize,
                           subprocess_env, tiny_config, written_entries)

TEXTS = ["the quick brown fox jumped over the lazy dog.", "Hello World, Héllo CAFÉ!", "  spaces   and\ttabs ",
         "it cost 1,000, then 2,500 more.", "ALBERT: A Lite BERT for Self-supervised Learning"]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No network: keras-hub must open the preset from the local folder alone."""
    def refuse(*args, **kwargs):
        raise OSError("network access in a test of offline loading")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def _release_folder(folder, model, config, spm=True):
    """A folder as the original's release tarballs hold one: a TF1 checkpoint, albert_config.json and the
    SentencePiece model beside it."""
    os.makedirs(folder, exist_ok=True)
    save_checkpoint(model, os.path.join(folder, "model.ckpt-best"), "original")
    config.to_json_file(os.path.join(folder, "albert_config.json"))
    if spm:
        shutil.copy(SPM, os.path.join(folder, "30k-clean.model"))
    return str(folder)


def _keras_hub_weights(model):
    return {w.path: np.asarray(w.numpy()) for w in model.weights}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """A random 2-group, 2-inner-layer model in an original release folder, converted by the converter."""
    root = tmp_path_factory.mktemp("keras_hub_out")
    config = tiny_config(num_hidden_groups=2, inner_group_num=2)
    model = AlbertModel(config)
    model(dummy_inputs(), training=False)
    randomize(model, seed=3)
    folder = _release_folder(root / "albert_tiny", model, config)
    output = str(root / "albert_tiny_keras_hub")
    conversion.convert(os.path.join(folder, "model.ckpt-best"), output, "keras_hub")
    return model, config, output


@pytest.mark.slow
def test_backbone_from_preset_computes_what_the_model_computes(converted):
    model, config, output = converted
    assert written_entries(output) == sorted(
        ["albert_config.json", "assets", "config.json", "metadata.json", "model.weights.h5", "tokenizer.json"])
    backbone = keras_hub.models.AlbertBackbone.from_preset(output)
    assert backbone.get_config()["num_groups"] == 2 and backbone.get_config()["num_inner_repetitions"] == 2
    for seed in (1, 2):
        ids, mask, segments = padded_batch(seed=seed)
        ours = model({"input_ids": ids, "input_mask": mask, "segment_ids": segments}, training=False)
        theirs = backbone({"token_ids": ids, "padding_mask": mask, "segment_ids": segments}, training=False)
        for key in ("sequence_output", "pooled_output"):
            np.testing.assert_allclose(np.asarray(theirs[key]), np.asarray(ours[key]), atol=1e-5, rtol=0)
    assert keras_hub_writer.CONFIG_NAME in os.listdir(output)
    with open(os.path.join(output, keras_hub_writer.CONFIG_NAME), encoding="utf-8") as f:
        assert json.load(f) == config.to_dict()


def test_tokenizer_from_preset_gives_the_ids_after_the_original_s_lowercasing(converted):
    """keras-hub's AlbertTokenizer runs SentencePiece on the raw text; on text lowercased and accent-stripped as
    the original's `do_lower_case` does (`preprocess_text(text, lower=True)`) its ids are FullTokenizer's."""
    output = converted[2]
    theirs = keras_hub.models.AlbertTokenizer.from_preset(output)
    ours = FullTokenizer(spm_model_file=SPM, do_lower_case=True)
    for text in TEXTS:
        expected = ours.convert_tokens_to_ids(ours.tokenize(text))
        assert [int(i) for i in np.asarray(theirs(preprocess_text(text, lower=True)))] == expected, text
    # The documented difference: on cased or accented raw text keras-hub's ids are not the model's.
    assert [int(i) for i in np.asarray(theirs(TEXTS[1]))] != ours.convert_tokens_to_ids(ours.tokenize(TEXTS[1]))
    assert theirs.vocabulary_size() == 30000
    assert theirs.token_to_id("[CLS]") == ours.token_id("[CLS]")


CODE = "Python: sorted([3, 1, 2]) == [1, 2, 3]."


def test_tokenizer_keeps_digit_comma_pieces_whole(converted):
    """keras-hub has no digit-comma re-split (docs/compatibility.md): where SentencePiece's best piece ends in a
    digit and a comma (`▁1,`) keras-hub keeps it, the original splits it (`▁1` `,`). Everywhere else in code
    (brackets, `3,` after a bracket, `1,2`) and on every line of the held-out sample, the ids are FullTokenizer's."""
    theirs = keras_hub.models.AlbertTokenizer.from_preset(converted[2])
    ours = FullTokenizer(spm_model_file=SPM, do_lower_case=True)

    def pieces(text):
        return [theirs.id_to_token(int(i)) for i in np.asarray(theirs(preprocess_text(text, lower=True)))]

    assert ours.tokenize(CODE) == ["▁python", ":", "▁sorted", "(", "[", "3", ",", "▁1", ",", "▁2", "]", ")", "▁=",
                                   "=", "▁[", "1", ",", "▁2", ",", "▁3", "]", "."]
    assert pieces(CODE) == ["▁python", ":", "▁sorted", "(", "[", "3", ",", "▁1,", "▁2", "]", ")", "▁=", "=", "▁[",
                            "1", ",", "▁2,", "▁3", "]", "."]
    assert (ours.tokenize("3, 1"), pieces("3, 1")) == (["▁3", ",", "▁1"], ["▁3,", "▁1"])
    with open(os.path.join(FIXTURES_DIR, "text_sample.txt"), encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    assert len(lines) > 300
    for text in lines + ["[10,", "x=[1,2,3],", "f(1,2)", "{1, 2}", "(3, 4)", "[1,"]:
        expected = ours.convert_tokens_to_ids(ours.tokenize(text))
        assert [int(i) for i in np.asarray(theirs(preprocess_text(text, lower=True)))] == expected, text


@pytest.mark.slow
def test_fine_tuned_classifier_opens_as_albert_text_classifier(tmp_path):
    """run_classifier's output folder (native checkpoint, task.json with the labels) -> AlbertTextClassifier
    whose logits are the classifier's, on token ids and on text through keras-hub's preprocessor."""
    config = tiny_config()
    classifier = build_classifier(config, 3)
    randomize(classifier, seed=5)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    save_checkpoint(classifier, str(run_dir / "ckpt-7"), "native")
    config.to_json_file(str(run_dir / "albert_config.json"))
    (run_dir / "task.json").write_text(json.dumps({"task_name": "mnli", "labels": ["a", "b", "c"],
                                                    "regression": False}))
    output = str(tmp_path / "preset")
    conversion.convert(str(run_dir / "ckpt-7"), output, "keras_hub", spm_model_file=SPM)
    assert {"task.json", "task.weights.h5", "preprocessor.json"} <= set(os.listdir(output))

    task = keras_hub.models.AlbertTextClassifier.from_preset(output)
    assert task.num_classes == 3
    ids, mask, segments = padded_batch(seed=4)
    ours = np.asarray(classifier({"input_ids": ids, "input_mask": mask, "segment_ids": segments}, training=False))
    theirs = np.asarray(task({"token_ids": ids, "padding_mask": mask, "segment_ids": segments}, training=False))
    np.testing.assert_allclose(theirs, ours, atol=1e-5, rtol=0)

    texts = [preprocess_text(t, lower=True) for t in TEXTS[:3]]
    features = task.preprocessor(texts)
    features = features[0] if isinstance(features, tuple) else features
    tokenizer = FullTokenizer(spm_model_file=SPM, do_lower_case=True)
    first = [2] + tokenizer.convert_tokens_to_ids(tokenizer.tokenize(TEXTS[0])) + [3]
    assert [int(i) for i in np.asarray(features["token_ids"][0])[:len(first)]] == first
    ours = np.asarray(classifier({"input_ids": np.asarray(features["token_ids"]),
                                  "input_mask": np.asarray(features["padding_mask"]).astype("int32"),
                                  "segment_ids": np.asarray(features["segment_ids"])}, training=False))
    np.testing.assert_allclose(task.predict(texts, verbose=0), ours, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_keras_hub_preset_round_trips_with_identical_arrays(tmp_path):
    """A preset keras-hub wrote -> load_checkpoint into this project -> preset again: every array the same. Reading
    and writing share one name table, so the model loaded is also checked on its own against keras-hub's backbone:
    the same outputs on the same inputs (a weight read transposed, or into another layer, and written back the
    same way would pass the round trip)."""
    source = keras_hub.models.AlbertBackbone(
        vocabulary_size=30000, num_layers=4, num_heads=4, embedding_dim=16, hidden_dim=32, intermediate_dim=64,
        num_groups=2, max_sequence_length=64)
    randomize(source, seed=9)
    source.save_to_preset(str(tmp_path / "theirs"))
    keras_hub.models.AlbertTokenizer(proto=SPM).save_to_preset(str(tmp_path / "theirs"))

    model = AlbertModel(tiny_config(num_hidden_layers=4, num_hidden_groups=2, max_position_embeddings=64))
    model(dummy_inputs(), training=False)
    result = load_checkpoint(model, str(tmp_path / "theirs"))
    assert not result.missing and not result.unused
    for seed in (1, 2):
        ids, mask, segments = padded_batch(seed=seed)
        ours = model({"input_ids": ids, "input_mask": mask, "segment_ids": segments}, training=False)
        theirs = source({"token_ids": ids, "padding_mask": mask, "segment_ids": segments}, training=False)
        for key in ("sequence_output", "pooled_output"):
            np.testing.assert_allclose(np.asarray(ours[key]), np.asarray(theirs[key]), atol=1e-5, rtol=0,
                                       err_msg=key)
    keras_hub_writer.write_preset(str(tmp_path / "again"), model.config, model_arrays(model),
                                  str(tmp_path / "theirs" / "assets" / "tokenizer" / "vocabulary.spm"))
    again = keras_hub.models.AlbertBackbone.from_preset(str(tmp_path / "again"))
    before, after = _keras_hub_weights(source), _keras_hub_weights(again)
    assert sorted(before) == sorted(after)
    for path, array in before.items():
        assert np.array_equal(after[path], array), path
    with open(tmp_path / "theirs" / "assets" / "tokenizer" / "vocabulary.spm", "rb") as a, \
            open(tmp_path / "again" / "assets" / "tokenizer" / "vocabulary.spm", "rb") as b:
        assert a.read() == b.read()

    # The converter does the same from the preset folder alone (its tokenizer found in assets/tokenizer/).
    conversion.convert(str(tmp_path / "theirs"), str(tmp_path / "converted"), "keras_hub")
    converted = _keras_hub_weights(keras_hub.models.AlbertBackbone.from_preset(str(tmp_path / "converted")))
    assert all(np.array_equal(converted[path], array) for path, array in before.items())


def test_a_failed_write_leaves_no_preset_folder(tmp_path, monkeypatch):
    """The preset is staged: a failure after the backbone's files were written leaves nothing at the output."""
    config = tiny_config()
    model = AlbertModel(config)
    model(dummy_inputs(), training=False)

    def fail(self, preset_dir):
        assert os.listdir(preset_dir)  # the backbone is there, in the staging folder
        raise RuntimeError("disk gone")

    monkeypatch.setattr(keras_hub.models.AlbertTokenizer, "save_to_preset", fail)
    with pytest.raises(RuntimeError, match="disk gone"):
        keras_hub_writer.write_preset(str(tmp_path / "out"), config, model_arrays(model), SPM)
    assert not os.path.exists(tmp_path / "out")
    assert leftovers(tmp_path) == []


def test_existing_output_needs_overwrite_and_is_replaced_whole(converted, tmp_path):
    model, config, _ = converted
    folder = _release_folder(tmp_path / "in", model, config)
    output = tmp_path / "out"
    conversion.convert(folder, str(output), "keras_hub")
    with pytest.raises(UsageError, match="--overwrite"):
        conversion.convert(folder, str(output), "keras_hub")
    stamp = os.stat(output / "model.weights.h5").st_mtime_ns
    conversion.convert(folder, str(output), "keras_hub", overwrite=True)  # its own output: replaced whole
    assert os.stat(output / "model.weights.h5").st_mtime_ns != stamp
    (output / "stale.txt").write_text("the user's")  # no longer only what albert_tf wrote: never replaced
    with pytest.raises(fileio.OutputError, match=r"did not write there \(stale.txt\)"):
        conversion.convert(folder, str(output), "keras_hub", overwrite=True)
    assert (output / "stale.txt").read_text() == "the user's" and "model.weights.h5" in os.listdir(output)
    assert leftovers(tmp_path) == []


def test_the_converter_says_what_a_preset_leaves_to_its_user(tmp_path, caplog):
    """A preset holds the backbone, so the input's pretraining heads are named as left out; and keras-hub's
    tokenizer neither lowercases nor strips accents, so the log says what the text needs, by `do_lower_case`."""
    config = tiny_config()
    model = AlbertForPretraining(config)
    model(dummy_inputs(num_predictions=1), training=False)
    folder = _release_folder(tmp_path / "in", model, config)
    caplog.set_level(logging.WARNING, logger="absl")
    text = ("keras-hub's AlbertTokenizer runs SentencePiece on the raw text: {}strip accents (NFKD, combining marks "
            "dropped) before it, as this model's tokenizer did (albert_tf.text.tokenization.preprocess_text(text, "
            "lower={}))")
    for do_lower_case, output in ((True, "lower"), (False, "cased")):
        caplog.clear()
        conversion.convert(folder, str(tmp_path / output), "keras_hub", do_lower_case=do_lower_case)
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert text.format("lowercase and " if do_lower_case else "", do_lower_case) in warnings
        heads = [m for m in warnings if m.startswith("The keras_hub preset holds the backbone; the heads are left "
                                                      "out: cls/")]
        assert len(heads) == 1 and "cls/predictions/" in heads[0] and "cls/seq_relationship/" in heads[0], warnings


def test_a_config_keras_hub_cannot_compute_is_refused(tmp_path, monkeypatch):
    config = tiny_config(hidden_act="relu")
    model = AlbertModel(config)
    model(dummy_inputs(), training=False)
    with pytest.raises(keras_hub_writer.CheckpointMismatchError, match="hidden_act"):
        keras_hub_writer.write_preset(str(tmp_path / "out"), config, model_arrays(model), SPM)
    assert not os.path.exists(tmp_path / "out")
    # The converter refuses it from the config alone, before it loads the input.
    folder = _release_folder(tmp_path / "in", model, config)
    monkeypatch.setattr(task_heads, "load_model", lambda *args: pytest.fail("the input was loaded first"))
    with pytest.raises(keras_hub_writer.CheckpointMismatchError, match="this model's config has 'relu'"):
        conversion.convert(folder, str(tmp_path / "out"), "keras_hub")
    assert not os.path.exists(tmp_path / "out")


# ---------------------------------------------------------------- bad input through the command line
def _convert(*args):
    return subprocess.run([sys.executable, "-m", "albert_tf.convert", *args], cwd=REPO, env=subprocess_env(),
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """An original release folder without its SentencePiece model (each test adds what it needs)."""
    config = tiny_config()
    model = AlbertModel(config)
    model(dummy_inputs(), training=False)
    return _release_folder(tmp_path_factory.mktemp("release") / "albert", model, config, spm=False)


def _assert_no_output(tmp_path):
    assert not os.path.exists(tmp_path / "out")
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_not_an_albert_folder_is_one_line(tmp_path):
    folder = tmp_path / "bert"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"class_name": "BertBackbone", "config": {}}))
    shutil.copy(SPM, folder / "30k-clean.model")
    result = _convert(f"--input_checkpoint={folder}", "--output_format=keras_hub", f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, folder, status=1)
    _assert_no_output(tmp_path)


@pytest.mark.slow
def test_missing_tokenizer_is_one_line(release, tmp_path):
    result = _convert(f"--input_checkpoint={release}", "--output_format=keras_hub", f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, "--spm_model_file", "SentencePiece", status=1)
    _assert_no_output(tmp_path)
    missing = tmp_path / "nope.model"
    result = _convert(f"--input_checkpoint={release}", "--output_format=keras_hub", f"--spm_model_file={missing}",
                      f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, missing, status=1)
    _assert_no_output(tmp_path)


@pytest.mark.slow
def test_a_wordpiece_vocabulary_is_refused_for_keras_hub(release, tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
    result = _convert(f"--input_checkpoint={release}", "--output_format=keras_hub", f"--vocab_file={vocab}",
                      f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, "--vocab_file", "SentencePiece only", status=2)
    _assert_no_output(tmp_path)


@pytest.mark.slow
def test_labels_that_do_not_match_num_labels_are_one_line(release, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(release, run_dir)
    shutil.copy(SPM, run_dir / "30k-clean.model")
    (run_dir / "task.json").write_text(json.dumps({"labels": ["0", "1"], "regression": False}))
    result = _convert(f"--input_checkpoint={run_dir}", "--output_format=keras_hub", "--num_labels=3",
                      f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, "--num_labels=3", "task.json", status=2)
    _assert_no_output(tmp_path)
    # The labels agree, but the checkpoint (an encoder) has no classifier head to write.
    result = _convert(f"--input_checkpoint={run_dir}", "--output_format=keras_hub",
                      f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, "classifier head", status=1)
    _assert_no_output(tmp_path)
