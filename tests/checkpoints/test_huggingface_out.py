"""Hugging Face out: `convert --output_format=huggingface` (and `--export_huggingface_dir` of the fine-tuning
scripts) writes a folder that transformers opens offline with nothing else, for each head: `AutoModel`,
`AlbertForPreTraining`, `AutoModelForSequenceClassification` (label names round-trip) and
`AutoModelForQuestionAnswering` compute this project's outputs within 1e-5, and `AutoTokenizer` gives
`FullTokenizer`'s ids on the held-out sample text except where docs/compatibility.md says Hugging Face's rule
differs; bad input is one line and leaves no output folder.

torch and transformers are test-only (`requirements-hf.txt`, installed by CI); the module is skipped without them.
"""

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import types

import numpy as np
import pytest
import sentencepiece

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")  # transformers' own dependency

from albert_tf import fileio  # noqa: E402  (after the skips)
from albert_tf.checkpoints import conversion  # noqa: E402
from albert_tf.checkpoints.errors import CheckpointMismatchError  # noqa: E402
from albert_tf.errors import UsageError  # noqa: E402
from albert_tf.checkpoints import huggingface, huggingface_tokenizer, save_checkpoint  # noqa: E402
from albert_tf.text.tokenization import encode_pair  # noqa: E402
from albert_tf.model import AlbertForPretraining, AlbertForSquad, AlbertModel, dummy_inputs  # noqa: E402
from albert_tf.checkpoints import latest_checkpoint, load_checkpoint  # noqa: E402
from albert_tf.tasks import classification  # noqa: E402
from albert_tf.tasks.classification import ClassifierParams, build_classifier, run_classifier  # noqa: E402
from albert_tf.tasks.squad import SquadParams, TrainableSquad, run_squad  # noqa: E402
from albert_tf.text.tokenization import FullTokenizer  # noqa: E402
from tests.helpers import (DATA_DIR, FIXTURES_DIR, REPO, SAMPLE_GLUE, SPM, SQUAD_V1,  # noqa: E402
                           assert_one_line_error, leftovers, padded_batch, randomize, subprocess_env, tiny_config,
                           tiny_sentencepiece, written_entries)

SAMPLE = os.path.join(FIXTURES_DIR, "text_sample.txt")
ZH_SAMPLE = os.path.join(FIXTURES_DIR, "zh_corpus.txt")
WORDPIECE = os.path.join(DATA_DIR, "vocab_chinese.txt")
TEXTS = ["the quick brown fox jumped over the lazy dog.", "Hello World, Héllo CAFÉ!", "  spaces   and\ttabs ",
         "ALBERT: A Lite BERT for Self-supervised Learning", "ex-wife (and co.)",
         # the digit-comma rule
         "it cost 1,000, then 2,500 more.", "1,2,3", "2019,2020,", "10,000,000, and", "in 2010,and",
         # Unicode the normalisers meet: compatibility forms, odd spaces, controls, pieces not in the vocabulary
         "ﬁne ½ Ⅻ", "x\u00a0y", "tab\there\nnew", "İstanbul ß Straße", "zero\u200bwidth", "bell\x07ring",
         "emoji 👍🏽 ok", "ＷｉＦｉ １２０", "Ångström François", "a  \u3000 b"]
LABELS = ["contradiction", "entailment", "neutral"]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No network and one torch thread: transformers must open the folder alone, beside TensorFlow in one
    process (two pytest-xdist workers share 2 cores)."""
    def refuse(*args, **kwargs):
        raise OSError("network access in a test of offline loading")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(1)


def _torch_inputs(ids, mask, segments):
    return {"input_ids": torch.tensor(ids, dtype=torch.long), "attention_mask": torch.tensor(mask, dtype=torch.long),
            "token_type_ids": torch.tensor(segments, dtype=torch.long)}


def _ours(model, ids, mask, segments, **extra):
    return model({"input_ids": ids, "input_mask": mask, "segment_ids": segments, **extra}, training=False)


def _theirs(cls, folder, ids, mask, segments):
    model = cls.from_pretrained(folder, local_files_only=True)
    model.eval()
    assert model.dtype == torch.float32
    with torch.no_grad():
        return model, model(**_torch_inputs(ids, mask, segments))


def _close(theirs, ours):
    np.testing.assert_allclose(theirs.detach().numpy(), np.asarray(ours), atol=1e-5, rtol=0)


def _built(model, **call):
    model(dummy_inputs(**call), training=False)
    return randomize(model, seed=3)


def _release_folder(folder, model, config, fmt="original", spm=True):
    """A folder as the original's release tarballs hold one (a checkpoint, albert_config.json, the SentencePiece
    model); returns the checkpoint path."""
    os.makedirs(folder, exist_ok=True)
    prefix = os.path.join(folder, "model.ckpt-best" if fmt == "original" else "ckpt-7")
    save_checkpoint(model, prefix, fmt)
    config.to_json_file(os.path.join(folder, "albert_config.json"))
    if spm:
        shutil.copy(SPM, os.path.join(folder, "30k-clean.model"))
    return prefix


def _architectures(folder):
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        return json.load(f)["architectures"]


@pytest.fixture(scope="module")
def encoder_folder(tmp_path_factory):
    """A random 2-group encoder in a release folder, converted (the tokenizer found beside it)."""
    root = tmp_path_factory.mktemp("hf_encoder")
    config = tiny_config(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2)
    model = _built(AlbertModel(config))
    prefix = _release_folder(str(root / "albert"), model, config)
    output = str(root / "hf")
    conversion.convert(prefix, output, "huggingface")
    return model, output


@pytest.mark.slow
def test_encoder_opens_as_auto_model(encoder_folder):
    model, output = encoder_folder
    assert written_entries(output) == sorted(huggingface.MODEL_FILES + huggingface_tokenizer.SPM_FILES)
    assert _architectures(output) == ["AlbertModel"]
    ids, mask, segments = padded_batch()
    hf_model, theirs = _theirs(transformers.AutoModel, output, ids, mask, segments)
    assert type(hf_model).__name__ == "AlbertModel"
    ours = _ours(model, ids, mask, segments)
    _close(theirs.last_hidden_state, ours["sequence_output"])
    _close(theirs.pooler_output, ours["pooled_output"])


def test_pretraining_heads_open_as_albert_for_pretraining(tmp_path):
    config = tiny_config()
    model = _built(AlbertForPretraining(config), num_predictions=1)
    prefix = _release_folder(str(tmp_path / "albert"), model, config)
    output = str(tmp_path / "hf")
    conversion.convert(prefix, output, "huggingface")
    assert _architectures(output) == ["AlbertForPreTraining"]
    ids, mask, segments = padded_batch(seed=2)
    positions = np.array([[1, 4, 7], [2, 3, 11], [0, 1, 4]], "int32")
    _, theirs = _theirs(transformers.AlbertForPreTraining, output, ids, mask, segments)
    ours = _ours(model, ids, mask, segments, masked_lm_positions=positions)
    gathered = np.take_along_axis(theirs.prediction_logits.numpy(), positions[..., None].astype("int64"), axis=1)
    np.testing.assert_allclose(gathered.reshape(-1, config.vocab_size),
                               np.asarray(ours["mlm_logits"]).reshape(-1, config.vocab_size), atol=1e-5, rtol=0)
    _close(theirs.sop_logits, ours["sop_logits"])


def _classifier_run(folder, labels=LABELS, regression=False):
    """run_classifier's output folder: a native checkpoint, albert_config.json, task.json with the labels, and the
    SentencePiece model beside it."""
    config = tiny_config()
    classifier = _built(build_classifier(config, 1 if regression else len(labels)))
    prefix = _release_folder(str(folder), classifier, config, fmt="native")
    with open(os.path.join(folder, "task.json"), "w", encoding="utf-8") as f:
        json.dump({"task_name": "mnli", "labels": labels, "regression": regression}, f)
    return classifier, prefix


def test_classifier_opens_with_its_label_names(tmp_path):
    classifier, prefix = _classifier_run(tmp_path / "run")
    output = str(tmp_path / "hf")
    conversion.convert(prefix, output, "huggingface")
    assert _architectures(output) == ["AlbertForSequenceClassification"]
    ids, mask, segments = padded_batch(seed=4)
    hf_model, theirs = _theirs(transformers.AutoModelForSequenceClassification, output, ids, mask, segments)
    assert hf_model.config.num_labels == 3
    assert hf_model.config.id2label == dict(enumerate(LABELS))
    assert hf_model.config.label2id == {name: i for i, name in enumerate(LABELS)}
    _close(theirs.logits, _ours(classifier, ids, mask, segments))


def test_regression_head_is_one_output_with_its_problem_type(tmp_path):
    classifier, prefix = _classifier_run(tmp_path / "run", labels=[None], regression=True)
    output = str(tmp_path / "hf")
    conversion.convert(prefix, output, "huggingface")
    ids, mask, segments = padded_batch(seed=5)
    hf_model, theirs = _theirs(transformers.AutoModelForSequenceClassification, output, ids, mask, segments)
    assert hf_model.config.num_labels == 1 and hf_model.config.problem_type == "regression"
    _close(theirs.logits, _ours(classifier, ids, mask, segments))


def test_the_problem_type_is_regression_only_for_one_output_asked_to_be():
    config = tiny_config()
    one, three = ({"output_weights": np.zeros([n, config.hidden_size]), "output_bias": np.zeros([n])} for n in (1, 3))
    assert "problem_type" not in huggingface.hf_config(config, one)
    assert huggingface.hf_config(config, one, regression=True)["problem_type"] == "regression"
    values = huggingface.hf_config(config, three, regression=True)
    assert "problem_type" not in values and values["num_labels"] == 3
    assert values["id2label"] == {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}


def test_squad_v1_head_opens_as_question_answering(tmp_path):
    config = tiny_config()
    squad = _built(AlbertForSquad(config), seq_length=4)
    prefix = _release_folder(str(tmp_path / "squad"), squad, config)
    output = str(tmp_path / "hf")
    conversion.convert(prefix, output, "huggingface")
    assert _architectures(output) == ["AlbertForQuestionAnswering"]
    ids, mask, segments = padded_batch(seed=6)
    _, theirs = _theirs(transformers.AutoModelForQuestionAnswering, output, ids, mask, segments)
    ours = _ours(squad, ids, mask, segments)
    _close(theirs.start_logits, ours["start_logits"])
    _close(theirs.end_logits, ours["end_logits"])


# ---------------------------------------------------------------- the tokenizer
def _sample_lines():
    with open(SAMPLE, encoding="utf-8") as f:
        return [line for line in f.read().splitlines() if line.strip()] + TEXTS


def _has_latex_quotes(text):
    return "``" in text or "''" in text


def test_auto_tokenizer_gives_full_tokenizer_ids(encoder_folder):
    """Every held-out line: FullTokenizer's ids, except the LaTeX quotes, where Hugging Face's rule (`` and ''
    become ") is FullTokenizer's `map_latex_quotes=True`; pairs get the original's segment ids."""
    theirs = transformers.AutoTokenizer.from_pretrained(encoder_folder[1], local_files_only=True)
    assert type(theirs).__name__ == "AlbertTokenizer"
    ours = FullTokenizer(spm_model_file=SPM, do_lower_case=True)
    hf_quotes = FullTokenizer(spm_model_file=SPM, do_lower_case=True, map_latex_quotes=True)
    lines = _sample_lines()
    quoted = [line for line in lines if _has_latex_quotes(line)]
    assert quoted and len(lines) > 300
    for text in lines:
        expected = (hf_quotes if _has_latex_quotes(text) else ours).tokenize(text)
        got = theirs(text, add_special_tokens=False)["input_ids"]
        assert got == ours.convert_tokens_to_ids(expected), text
    assert theirs(quoted[0], add_special_tokens=False)["input_ids"] != ours.convert_tokens_to_ids(
        ours.tokenize(quoted[0]))  # the documented difference is real
    # tokenizer.json alone (the `tokenizers` library, as other readers use it) gives FullTokenizer's ids too.
    raw = tokenizers.Tokenizer.from_file(os.path.join(encoder_folder[1], huggingface_tokenizer.TOKENIZER_JSON))
    for text in lines:
        expected = (hf_quotes if _has_latex_quotes(text) else ours).tokenize(text)
        assert raw.encode(text, add_special_tokens=False).ids == ours.convert_tokens_to_ids(expected), text
    ids, _, segments = encode_pair(ours, lines[0], lines[1], max_seq_length=128)
    pair = theirs(lines[0], lines[1])
    length = len(pair["input_ids"])
    assert pair["input_ids"] == ids[:length] and pair["token_type_ids"] == segments[:length]
    assert not any(ids[length:])
    for texts in [(lines[0], lines[1]), (lines[2],)]:  # tokenizer.json's own template: the same ids and segments
        ids, _, segments = encode_pair(ours, *texts, max_seq_length=128)
        encoded = raw.encode(*texts)
        assert encoded.ids == ids[:len(encoded.ids)] and encoded.type_ids == segments[:len(encoded.ids)]
        assert not any(ids[len(encoded.ids):])


def test_special_tokens_in_text_are_one_id_each_and_skipped_in_decoding(encoder_folder):
    """The SentencePiece model's control and unknown pieces (read with sentencepiece, not from our file) are the
    added tokens: written in a text, "[MASK]" is the mask id (a fill-mask prompt), wherever it stands and whatever
    the case folding, the rest of the text FullTokenizer's ids; `skip_special_tokens` drops each of them."""
    processor = sentencepiece.SentencePieceProcessor(model_file=SPM)
    special = {processor.id_to_piece(i) for i in range(processor.get_piece_size())
               if processor.is_control(i) or processor.is_unknown(i)}
    with open(os.path.join(encoder_folder[1], huggingface_tokenizer.TOKENIZER_JSON), encoding="utf-8") as f:
        added = json.load(f)["added_tokens"]
    assert {token["content"] for token in added} == special == {"<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"}
    theirs = transformers.AutoTokenizer.from_pretrained(encoder_folder[1], local_files_only=True)
    ours = FullTokenizer(spm_model_file=SPM, do_lower_case=True)
    mask = ours.convert_tokens_to_ids(["[MASK]"])[0]
    for before, after in [("Paris is the", "of France."), ("Paris is the", ". of France"), ("x", "y"),
                          ("\U0001F600 \u2603x", "\U0001F600")]:  # pieces the model does not have: <unk>
        for joined in (f"{before} [MASK] {after}", f"{before}[MASK]{after}"):
            want = (ours.convert_tokens_to_ids(ours.tokenize(before)) + [mask]
                    + ours.convert_tokens_to_ids(ours.tokenize(after)))
            assert theirs(joined, add_special_tokens=False)["input_ids"] == want, joined
    ids = theirs("paris is the [MASK] of france.")["input_ids"]
    assert theirs.decode(ids, skip_special_tokens=True) == "paris is the of france."
    assert theirs.decode(ids).startswith("[CLS] paris")
    raw = tokenizers.Tokenizer.from_file(os.path.join(encoder_folder[1], huggingface_tokenizer.TOKENIZER_JSON))
    assert raw.encode("paris is the [MASK] of france.").ids == ids  # tokenizer.json alone marks them special too
    assert raw.decode(ids, skip_special_tokens=True) == "paris is the of france."


def test_a_tokenizer_fits_a_vocabulary_of_its_size_or_more_and_not_less(tmp_path):
    """The 30,000 pieces of `30k-clean.model` fit a vocab_size of 30000 (or a padded 30008), not 29999."""
    for vocab_size in (30000, 30008):
        folder = tmp_path / str(vocab_size)
        folder.mkdir()
        huggingface_tokenizer.write_tokenizer(str(folder), spm_model_file=SPM, vocab_size=vocab_size)
    with pytest.raises(CheckpointMismatchError, match="30k-clean.model has 30000 tokens but the model's vocab_size "
                       "is 29999"):
        huggingface_tokenizer.write_tokenizer(str(tmp_path), spm_model_file=SPM, vocab_size=29999)


def test_a_byte_fallback_model_gives_its_byte_pieces_too(tmp_path):
    """A user's SentencePiece model trained with byte fallback spells characters it has no piece for in byte
    pieces (`<0xF0>` ...), in FullTokenizer and in the exported tokenizer.json alike, not `<unk>`; transformers'
    AlbertTokenizer builds its own model without byte fallback (docs/compatibility.md): `<unk>` there only."""
    with open(os.path.join(DATA_DIR, "corpus", "sample_text.txt"), encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    model = tiny_sentencepiece(tmp_path / "bytes.model", lines, vocab_size=400, byte_fallback=True)
    folder = tmp_path / "hf"
    folder.mkdir()
    huggingface_tokenizer.write_tokenizer(str(folder), spm_model_file=model)
    raw = tokenizers.Tokenizer.from_file(str(folder / huggingface_tokenizer.TOKENIZER_JSON))
    theirs = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    ours = FullTokenizer(spm_model_file=model)
    for text in ["the quick fox", "Zebra q\u00fc \U0001F600 \u2603x", "\u65e5\u672c"]:
        expected = ours.convert_tokens_to_ids(ours.tokenize(text))
        assert raw.encode(text, add_special_tokens=False).ids == expected, text
    assert ours.tokenize("the \U0001F600") == ["\u2581the", "\u2581", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    assert theirs("the \U0001F600", add_special_tokens=False)["input_ids"] == ours.convert_tokens_to_ids(
        ["\u2581the", "\u2581", "<unk>"])


def test_tokenizer_files_are_the_files_written(tmp_path):
    """`tokenizer_files` names exactly the files `write_tokenizer` writes (and returns), for each kind of
    tokenizer, and nothing for none."""
    for kind, arguments in [("spm", {"spm_model_file": SPM}), ("wordpiece", {"vocab_file": WORDPIECE})]:
        folder = tmp_path / kind
        folder.mkdir()
        written = huggingface_tokenizer.write_tokenizer(str(folder), **arguments)
        assert sorted(written) == sorted(os.listdir(folder)) == sorted(huggingface_tokenizer.tokenizer_files(
            **arguments))
    assert huggingface_tokenizer.tokenizer_files() == ()
    with open(tmp_path / "spm" / huggingface_tokenizer.TOKENIZER_CONFIG, encoding="utf-8") as f:
        config = json.load(f)  # the defaults: uncased, as 30k-clean.model; ALBERT's 512 positions
    assert (config["do_lower_case"], config["model_max_length"]) == (True, 512)
    assert (config["tokenizer_class"], config["keep_accents"], config["remove_space"]) == ("AlbertTokenizer", False,
                                                                                          True)
    assert {k: config[k] for k in huggingface_tokenizer.SPM_SPECIAL} == huggingface_tokenizer.SPM_SPECIAL
    with open(tmp_path / "wordpiece" / huggingface_tokenizer.TOKENIZER_CONFIG, encoding="utf-8") as f:
        config = json.load(f)
    assert (config["tokenizer_class"], config["tokenize_chinese_chars"], config["strip_accents"]) == (
        "BertTokenizer", True, None)
    assert {k: config[k] for k in huggingface_tokenizer.WORDPIECE_SPECIAL} == huggingface_tokenizer.WORDPIECE_SPECIAL


def test_the_digit_comma_rule_is_the_originals():
    """A piece ending in a digit and a comma, as the original's `encode_pieces` re-splits them (its length over 1,
    the comma last, a digit before it): those pieces' scores are lowered in tokenizer.json."""
    rule = huggingface_tokenizer._digit_comma
    assert [piece for piece in ["1,", "\u25811,", "a1,", "12,", ",", "a,", "1", "1,2", "\u2581,"] if rule(piece)] == [
        "1,", "\u25811,", "a1,", "12,"]


# Code: brackets around numbers and commas (docs/compatibility.md, "Where Hugging Face's AlbertTokenizer differs").
CODE = "Python: sorted([3, 1, 2]) == [1, 2, 3]."
CODE_PIECES = ["▁python", ":", "▁sorted", "(", "[", "3", ",", "▁1", ",", "▁2", "]", ")", "▁=", "=", "▁[", "1", ",",
               "▁2", ",", "▁3", "]", "."]
CODE_TEXTS = [CODE, "[3, 1, 2]", "3, 1", "[1, 2, 3].", "x=[1,2,3],", "f(1,2)", "{1, 2}", "(3, 4)", "[10,"]


def test_tokenizer_json_splits_code_as_full_tokenizer(encoder_folder):
    """Brackets, digits and commas: the exported tokenizer (transformers, and tokenizer.json read by `tokenizers`)
    gives FullTokenizer's ids, the digit-comma pieces split as the original splits them (`▁1` `,`, not `▁1,`)."""
    theirs = transformers.AutoTokenizer.from_pretrained(encoder_folder[1], local_files_only=True)
    raw = tokenizers.Tokenizer.from_file(os.path.join(encoder_folder[1], huggingface_tokenizer.TOKENIZER_JSON))
    ours = FullTokenizer(spm_model_file=SPM, do_lower_case=True)
    assert ours.tokenize(CODE) == CODE_PIECES
    for text in CODE_TEXTS:
        expected = ours.convert_tokens_to_ids(ours.tokenize(text))
        assert theirs(text, add_special_tokens=False)["input_ids"] == expected, text
        assert raw.encode(text, add_special_tokens=False).ids == expected, text
    assert theirs.convert_ids_to_tokens(theirs(CODE, add_special_tokens=False)["input_ids"]) == CODE_PIECES


def test_tokenizer_json_is_what_keeps_the_ids(encoder_folder, tmp_path):
    """Built from spiece.model alone, transformers 5 splits the text at the model's user-defined pieces first
    (docs/compatibility.md): most lines get other ids. The day it does not, the tokenizer.json may go."""
    folder = tmp_path / "spm_only"
    shutil.copytree(encoder_folder[1], folder)
    os.remove(folder / huggingface_tokenizer.TOKENIZER_JSON)
    theirs = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    ours = FullTokenizer(spm_model_file=SPM, do_lower_case=True, map_latex_quotes=True)
    lines = _sample_lines()
    differing = [text for text in lines if theirs(text, add_special_tokens=False)["input_ids"]
                 != ours.convert_tokens_to_ids(ours.tokenize(text))]
    assert len(differing) > len(lines) / 2


def test_cased_tokenizer_keeps_case(tmp_path):
    config = tiny_config()
    prefix = _release_folder(str(tmp_path / "albert"), _built(AlbertModel(config)), config)
    output = str(tmp_path / "hf")
    conversion.convert(prefix, output, "huggingface", do_lower_case=False)
    theirs = transformers.AutoTokenizer.from_pretrained(output, local_files_only=True)
    ours = FullTokenizer(spm_model_file=SPM, do_lower_case=False)
    for text in TEXTS + _sample_lines()[300:]:
        assert theirs(text, add_special_tokens=False)["input_ids"] == ours.convert_tokens_to_ids(
            ours.tokenize(text)), text


def test_wordpiece_vocabulary_opens_as_bert_tokenizer(tmp_path):
    """A Chinese (WordPiece) model: vocab.txt + BertTokenizer, the original's ids on the Chinese sample."""
    config = tiny_config(vocab_size=21128)
    folder = tmp_path / "albert_zh"
    prefix = _release_folder(str(folder), _built(AlbertModel(config)), config, spm=False)
    shutil.copy(WORDPIECE, folder / "vocab_chinese.txt")
    output = str(tmp_path / "hf")
    conversion.convert(prefix, output, "huggingface")  # the vocab*.txt beside the input
    assert written_entries(output) == sorted(huggingface.MODEL_FILES + huggingface_tokenizer.WORDPIECE_FILES)
    theirs = transformers.AutoTokenizer.from_pretrained(output, local_files_only=True)
    ours = FullTokenizer(vocab_file=WORDPIECE, do_lower_case=True)
    with open(ZH_SAMPLE, encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    for text in lines:
        assert theirs(text, add_special_tokens=False)["input_ids"] == ours.convert_tokens_to_ids(
            ours.tokenize(text)), text


# ---------------------------------------------------------------- --export_huggingface_dir of the scripts
def _classifier_params(tmp_path, **overrides):
    values = dict(albert_config=tiny_config(), output_dir=str(tmp_path / "run"), task_name="sst-2",
                  data_dir=SAMPLE_GLUE, spm_model_file=SPM, max_seq_length=32, train_batch_size=8, train_step=2,
                  save_checkpoints_steps=2, iterations_per_loop=2, log_every=0, do_train=True,
                  export_huggingface_dir=str(tmp_path / "hf"))
    values.update(overrides)
    return ClassifierParams(**values)


@pytest.mark.slow
def test_run_classifier_exports_the_trained_model(tmp_path):
    params = _classifier_params(tmp_path)
    outcome = run_classifier(params)
    output = outcome["export_huggingface_dir"]
    assert output == str(tmp_path / "hf") and _architectures(output) == ["AlbertForSequenceClassification"]
    classifier = build_classifier(params.albert_config, 2)
    assert not load_checkpoint(classifier, latest_checkpoint(params.output_dir)).missing  # the trained weights
    ids, mask, segments = padded_batch(seed=7)
    hf_model, theirs = _theirs(transformers.AutoModelForSequenceClassification, output, ids, mask, segments)
    assert hf_model.config.id2label == {0: "0", 1: "1"}  # SST-2's labels
    _close(theirs.logits, _ours(classifier, ids, mask, segments))
    tokenizer = transformers.AutoTokenizer.from_pretrained(output, local_files_only=True)
    assert tokenizer.model_max_length == 32
    # Run again: the earlier export is replaced whole, with nothing left over.
    (tmp_path / "hf" / "model.safetensors").write_bytes(b"stale")
    run_classifier(dataclasses.replace(params, do_train=False, do_eval=True))
    _, again = _theirs(transformers.AutoModelForSequenceClassification, output, ids, mask, segments)
    _close(again.logits, theirs.logits.numpy())
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_only_the_chief_exports(tmp_path, monkeypatch):
    # A worker other than the chief of a multi-worker run trains along but writes no Hugging Face folder.
    asked = []
    monkeypatch.setattr(classification, "distribution",
                        types.SimpleNamespace(is_chief=lambda strategy: asked.append(strategy) or False))
    outcome = run_classifier(_classifier_params(tmp_path))
    assert asked and "export_huggingface_dir" not in outcome and not (tmp_path / "hf").exists()
    assert latest_checkpoint(str(tmp_path / "run"))  # it did run


def test_export_dir_of_other_files_is_refused_before_training(tmp_path):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="--export_huggingface_dir .*not a Hugging Face export"):
        run_classifier(_classifier_params(tmp_path))
    assert not (tmp_path / "run").exists() or not any(p.name.startswith("ckpt") for p in (tmp_path / "run").iterdir())
    assert os.listdir(tmp_path / "hf") == ["notes.txt"]


def test_run_squad_exports_the_trained_v1_model(tmp_path):
    with open(SQUAD_V1, encoding="utf-8") as f:
        data = json.load(f)
    article = data["data"][0]
    train = tmp_path / "train.json"
    train.write_text(json.dumps({"version": "1.1", "data": [{"title": article["title"],
                                                              "paragraphs": article["paragraphs"][:1]}]}))
    params = SquadParams(albert_config=tiny_config(), spm_model_file=SPM, output_dir=str(tmp_path / "run"),
                         train_file=str(train), do_train=True, max_seq_length=96, doc_stride=48,
                         max_query_length=24, train_batch_size=4, num_train_epochs=1.0, save_checkpoints_steps=100,
                         log_every=0, export_huggingface_dir=str(tmp_path / "hf"))
    output = run_squad(params)["export_huggingface_dir"]
    assert _architectures(output) == ["AlbertForQuestionAnswering"]
    squad = TrainableSquad(params.albert_config)
    squad(dummy_inputs(seq_length=4), training=False)
    assert not load_checkpoint(squad, latest_checkpoint(params.output_dir)).missing
    ids, mask, segments = padded_batch(seed=8)
    _, theirs = _theirs(transformers.AutoModelForQuestionAnswering, output, ids, mask, segments)
    ours = _ours(squad, ids, mask, segments)
    _close(theirs.start_logits, ours["start_logits"])
    _close(theirs.end_logits, ours["end_logits"])
    # The converter finds the head of the run's native checkpoint by the task.json run_squad.py left beside it.
    converted = str(tmp_path / "converted")
    conversion.convert(latest_checkpoint(params.output_dir), converted, "huggingface", spm_model_file=SPM)
    assert _architectures(converted) == ["AlbertForQuestionAnswering"]
    with pytest.raises(UsageError, match="SQuAD 2.0"):
        run_squad(dataclasses.replace(params, output_dir=str(tmp_path / "v2"), version_2_with_negative=True))
    assert not (tmp_path / "v2").exists() or not os.listdir(tmp_path / "v2")


@pytest.mark.slow
def test_run_squad_script_exports_a_fine_tuned_checkpoint(tmp_path):
    """The flag through the script: a SQuAD v1.1 checkpoint fine-tuned elsewhere (--init_checkpoint), exported
    with nothing else asked for."""
    config = tiny_config()
    squad = _built(AlbertForSquad(config), seq_length=4)
    prefix = _release_folder(str(tmp_path / "squad"), squad, config)
    output = tmp_path / "hf"
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "run_squad.py"),
         f"--albert_config_file={tmp_path / 'squad' / 'albert_config.json'}", f"--spm_model_file={SPM}",
         f"--init_checkpoint={prefix}", f"--output_dir={tmp_path / 'run'}",
         "--max_seq_length=96", f"--export_huggingface_dir={output}"],
        cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Hugging Face folder: {output}" in result.stdout
    ids, mask, segments = padded_batch(seed=9)
    _, theirs = _theirs(transformers.AutoModelForQuestionAnswering, str(output), ids, mask, segments)
    _close(theirs.start_logits, _ours(squad, ids, mask, segments)["start_logits"])


# ---------------------------------------------------------------- staging and bad input
def test_a_failed_write_leaves_no_folder(tmp_path, monkeypatch):
    config = tiny_config()
    prefix = _release_folder(str(tmp_path / "albert"), _built(AlbertModel(config)), config)

    def fail(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(huggingface, "save_file", fail)
    with pytest.raises(fileio.OutputError, match="No space left"):
        conversion.convert(prefix, str(tmp_path / "out"), "huggingface")
    assert not os.path.exists(tmp_path / "out")
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_existing_output_needs_overwrite_and_is_replaced_whole(encoder_folder, tmp_path):
    config = tiny_config()
    prefix = _release_folder(str(tmp_path / "albert"), _built(AlbertModel(config)), config)
    output = tmp_path / "out"
    conversion.convert(prefix, str(output), "huggingface")
    with pytest.raises(UsageError, match="--overwrite"):
        conversion.convert(prefix, str(output), "huggingface")
    stamp = os.stat(output / "model.safetensors").st_mtime_ns
    conversion.convert(prefix, str(output), "huggingface", overwrite=True)  # its own output: replaced whole
    assert os.stat(output / "model.safetensors").st_mtime_ns != stamp
    (output / "stale.txt").write_text("the user's")  # no longer only what albert_tf wrote: never replaced
    with pytest.raises(fileio.OutputError, match=r"did not write there \(stale.txt\)"):
        conversion.convert(prefix, str(output), "huggingface", overwrite=True)
    assert (output / "stale.txt").read_text() == "the user's" and "model.safetensors" in os.listdir(output)
    assert leftovers(tmp_path) == []


def _convert(*args):
    return subprocess.run([sys.executable, "-m", "albert_tf.convert", "--output_format=huggingface", *args],
                          cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=600, check=False)


def _assert_no_output(tmp_path):
    assert not os.path.exists(tmp_path / "out")
    assert leftovers(tmp_path) == []


@pytest.mark.slow
def test_not_an_albert_folder_is_one_line(tmp_path):
    folder = tmp_path / "bert"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 32}))
    (folder / "model.safetensors").write_bytes(b"")
    shutil.copy(SPM, folder / "spiece.model")
    result = _convert(f"--input_checkpoint={folder}", f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, folder, status=1)
    _assert_no_output(tmp_path)


@pytest.mark.slow
def test_a_missing_tokenizer_file_is_one_line(tmp_path):
    config = tiny_config()
    prefix = _release_folder(str(tmp_path / "albert"), _built(AlbertModel(config)), config, spm=False)
    for flag in ("--spm_model_file", "--vocab_file"):
        missing = tmp_path / "nope.model"
        result = _convert(f"--input_checkpoint={prefix}", f"{flag}={missing}", f"--output_path={tmp_path / 'out'}")
        assert_one_line_error(result, flag, missing, status=1)
        _assert_no_output(tmp_path)


@pytest.mark.slow
def test_another_model_s_tokenizer_is_one_line(tmp_path):
    config = tiny_config(vocab_size=1000)
    prefix = _release_folder(str(tmp_path / "albert"), _built(AlbertModel(config)), config)
    result = _convert(f"--input_checkpoint={prefix}", f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, "30000", "vocab_size", status=1)
    _assert_no_output(tmp_path)


@pytest.mark.slow
def test_label_names_that_do_not_match_the_head_are_one_line(tmp_path):
    _, prefix = _classifier_run(tmp_path / "run")
    result = _convert(f"--input_checkpoint={prefix}", "--num_labels=2", f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, "--num_labels=2", "task.json", status=2)
    _assert_no_output(tmp_path)
    result = _convert(f"--input_checkpoint={prefix}", "--label_list=a,b", f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, "--label_list=a,b", "task.json", status=2)
    _assert_no_output(tmp_path)
    os.remove(tmp_path / "run" / "task.json")
    result = _convert(f"--input_checkpoint={prefix}", "--num_labels=2", "--label_list=a,b,c",
                      f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, "--num_labels=2", "--label_list", status=2)
    _assert_no_output(tmp_path)
    result = _convert(f"--input_checkpoint={prefix}", "--label_list=a,b", f"--output_path={tmp_path / 'out'}")
    assert_one_line_error(result, "shape mismatch", "[32, 3]", "[32, 2]", status=1)  # 2 labels, a 3-output head
    _assert_no_output(tmp_path)
