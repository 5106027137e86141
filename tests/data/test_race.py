"""RACE: reading the official layout (and all.txt), the original's features, record caches, metrics, and a tiny
model that trains, resumes, evaluates, predicts and exports end to end."""

import dataclasses
import json
import logging
import os
import types

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data import race, records
from albert_tf.evaluation import race as race_metrics
from albert_tf.text.tokenization import FullTokenizer
from tests.helpers import REPO as REPO_ROOT
from tests.helpers import SAMPLE_RACE as SAMPLE_DIR

SHARED_RACE = os.path.join(os.path.dirname(REPO_ROOT), "shared", "data", "race")
needs_shared = pytest.mark.skipif(not os.path.isdir(os.path.join(SHARED_RACE, "RACE", "dev")),
                                  reason="the official RACE dev set is not in ../shared/data/race")


def _article(article_id, questions, options, answers, article="The cat sat on the mat. It was happy."):
    return {"id": article_id, "article": article, "questions": questions, "options": options, "answers": answers}


def _write_race(root, split, level, files):
    directory = os.path.join(root, "RACE", split, level)
    os.makedirs(directory, exist_ok=True)
    for name, content in files.items():
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            f.write(content if isinstance(content, str) else json.dumps(content))
    return directory


# ---------------------------------------------------------------------------------------------------------------
# Reading


@needs_shared
def test_official_dev_counts():
    examples = race.read_race(SHARED_RACE, "dev")
    assert len(examples) == 4887
    assert sum(e.level == "middle" for e in examples) == 1436
    assert sum(e.level == "high" for e in examples) == 3451
    assert len({e.question_id for e in examples}) == 4887
    assert {e.label for e in examples} == {0, 1, 2, 3}
    assert all(len(e.options) == 4 for e in examples)
    assert examples[0].level == "middle" and examples[-1].level == "high"
    assert len(race.read_race(SHARED_RACE, "dev", high_only=True)) == 3451
    assert len(race.read_race(SHARED_RACE, "dev", middle_only=True)) == 1436
    # 368 middle + 1021 high article files
    assert len({e.question_id.rsplit("-", 1)[0] for e in examples if e.level == "middle"}) == 368
    assert len({e.question_id.rsplit("-", 1)[0] for e in examples if e.level == "high"}) == 1021


@needs_shared
@pytest.mark.slow
def test_official_dev_features(tokenizer, tmp_path):
    """Every dev question gives four well-formed 512-token sequences; the records round-trip."""
    examples = race.read_race(SHARED_RACE, "dev")
    path = str(tmp_path / "dev.tf_record")
    race.prepare_records(examples, tokenizer, path, 512, 128, "dev")
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    count = 0
    for serialized in tf.data.TFRecordDataset(path).batch(1000):
        x, labels = race._parse(serialized, 512)  # pylint: disable=protected-access
        ids, mask, seg = x["input_ids"].numpy(), x["input_mask"].numpy(), x["segment_ids"].numpy()
        lengths = mask.sum(-1)
        assert (ids[..., 0] == cls_id).all()
        assert ((ids == sep_id) & (mask == 1)).sum(-1).min() >= 2
        assert lengths.max() <= 512
        # the question+option segment is at most max_qa_length + 1 ([SEP]) long
        assert (seg.sum(-1) <= 129).all()
        assert ((labels.numpy() >= 0) & (labels.numpy() < 4)).all()
        count += len(labels)
    assert count == 4887


def test_sample_counts():
    counts = {split: len(race.read_race(SAMPLE_DIR, split)) for split in race.SPLITS}
    assert counts == {"train": 78, "dev": 72, "test": 71}
    dev = race.read_race(SAMPLE_DIR, "dev")
    assert sum(e.level == "middle" for e in dev) == 39 and sum(e.level == "high" for e in dev) == 33
    assert {e.level for e in race.read_race(SAMPLE_DIR, "dev", high_only=True)} == {"high"}
    assert {e.level for e in race.read_race(SAMPLE_DIR, "dev", middle_only=True)} == {"middle"}
    # data_dir may also be the RACE directory itself
    assert len(race.read_race(os.path.join(SAMPLE_DIR, "RACE"), "dev")) == 72
    with pytest.raises(ValueError, match="exclude each other"):
        race.read_race(SAMPLE_DIR, "dev", high_only=True, middle_only=True)


def test_example_fields(tmp_path):
    _write_race(str(tmp_path), "dev", "middle", {
        "7.txt": _article("middle7.txt", ["Q1 _ ?", "Q2?"], [["a", "b", "c", "d"], ["e", "f", "g", "h"]],
                          ["B", "D"])})
    _write_race(str(tmp_path), "dev", "high", {})
    examples = race.read_race(str(tmp_path), "dev")
    assert [e.question_id for e in examples] == ["middle7.txt-0", "middle7.txt-1"]
    assert [e.label for e in examples] == [1, 3]
    assert examples[1].options == ["e", "f", "g", "h"] and examples[0].level == "middle"


def test_natural_file_order(tmp_path):
    files = {f"{n}.txt": _article(f"middle{n}.txt", ["q"], [["a", "b", "c", "d"]], ["A"]) for n in (10, 2, 1)}
    _write_race(str(tmp_path), "dev", "middle", files)
    _write_race(str(tmp_path), "dev", "high", {})
    ids = [e.question_id for e in race.read_race(str(tmp_path), "dev")]
    assert ids == ["middle1.txt-0", "middle2.txt-0", "middle10.txt-0"]


def test_all_txt_variant(tmp_path, caplog):
    """A directory whose files are concatenated into all.txt (one article per line) reads the same; the
    per-article files beside an all.txt are not read a second time."""
    articles = [_article(f"high{n}.txt", [f"question {n}?", "b _ c"], [["a", "b", "c", "d"]] * 2, ["C", "A"])
                for n in (1, 2, 3)]
    per_file = str(tmp_path / "per_file")
    _write_race(per_file, "dev", "high", {f"{n}.txt": a for n, a in zip((1, 2, 3), articles)})
    _write_race(per_file, "dev", "middle", {})
    combined = str(tmp_path / "combined")
    _write_race(combined, "dev", "high", {"all.txt": "".join(json.dumps(a) + "\n" for a in articles)})
    _write_race(combined, "dev", "middle", {})
    both = str(tmp_path / "both")
    _write_race(both, "dev", "high", {**{f"{n}.txt": a for n, a in zip((1, 2, 3), articles)},
                                      "all.txt": "".join(json.dumps(a) + "\n" for a in articles)})
    _write_race(both, "dev", "middle", {})
    pretty = str(tmp_path / "pretty")  # one object per file, spread over several lines
    _write_race(pretty, "dev", "high", {f"{n}.txt": json.dumps(a, indent=2) for n, a in zip((1, 2, 3), articles)})
    _write_race(pretty, "dev", "middle", {})
    expected = race.read_race(per_file, "dev")
    assert len(expected) == 6
    for root in (combined, both, pretty):
        got = race.read_race(root, "dev")
        assert [(e.question_id, e.question, e.options, e.label) for e in got] == \
               [(e.question_id, e.question, e.options, e.label) for e in expected]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        race.level_files(os.path.join(combined, "RACE", "dev", "high"))
        assert "other .txt files" not in caplog.text  # all.txt alone: nothing skipped
        race.level_files(os.path.join(both, "RACE", "dev", "high"))
    assert "reading only all.txt (one article per line); the 3 other .txt files beside it" in caplog.text


def test_both_levels_are_read_unless_one_is_chosen():
    assert race.levels_to_read() == ("middle", "high")
    assert race.levels_to_read(high_only=True) == ("high",) and race.levels_to_read(middle_only=True) == ("middle",)


def test_malformed_json_names_the_file(tmp_path):
    _write_race(str(tmp_path), "dev", "high", {})
    directory = _write_race(str(tmp_path), "dev", "middle", {
        "1.txt": _article("middle1.txt", ["q"], [["a", "b", "c", "d"]], ["A"]),
        "2.txt": '{"id": "middle2.txt", "article": "text", "questions": ["q"',
    })
    with pytest.raises(race.RaceFormatError, match=r"2\.txt.*malformed JSON") as info:
        race.read_race(str(tmp_path), "dev")
    assert os.path.join(directory, "2.txt") in str(info.value)


def test_non_utf8_file_names_the_file(tmp_path):
    _write_race(str(tmp_path), "dev", "high", {})
    directory = _write_race(str(tmp_path), "dev", "middle", {})
    with open(os.path.join(directory, "9.txt"), "wb") as f:
        f.write(b'{"id": "middle9.txt", "article": "caf\xe9"}')
    with pytest.raises(race.RaceFormatError, match=r"9\.txt: not UTF-8"):
        race.read_race(str(tmp_path), "dev")


@pytest.mark.parametrize("article, message", [
    ({"id": "x", "article": "t", "questions": ["q"], "options": [["a", "b", "c"]], "answers": ["A"]},
     "has 3 options"),
    ({"id": "x", "article": "t", "questions": ["q"], "options": [["a", "b", "c", "d"]], "answers": ["E"]},
     "answer 'E'"),
    ({"id": "x", "questions": ["q"], "options": [["a", "b", "c", "d"]], "answers": ["A"]}, "no 'article'"),
    ({"id": "x", "article": "t", "questions": ["q", "r"], "options": [["a", "b", "c", "d"]], "answers": ["A"]},
     "same length"),
    (["not", "an", "object"], "expected a JSON object"),
    ({"id": "x", "article": "t", "questions": ["q"], "options": [["a", "b", "c", "d"]], "answers": "A"},
     r"'answers' must be a list with one letter per question \(1\)"),
    ({"id": "x", "article": "t", "questions": ["q"], "options": [["a", "b", "c", "d"]], "answers": ["A", "B"]},
     r"'answers' must be a list with one letter per question \(1\)"),
    ({"id": "x", "article": "t", "questions": ["q"], "options": ["a, b, c, d"], "answers": ["A"]},
     "question 0 has 0 options"),
])
def test_bad_articles_name_the_file(tmp_path, article, message):
    _write_race(str(tmp_path), "dev", "high", {"5.txt": article})
    _write_race(str(tmp_path), "dev", "middle", {})
    with pytest.raises(race.RaceFormatError, match=message) as info:
        race.read_race(str(tmp_path), "dev")
    assert str(info.value).startswith(os.path.join(str(tmp_path), "RACE", "dev", "high", "5.txt") + ": ")


def test_the_articles_of_a_file_of_lines_are_named_by_their_line(tmp_path):
    good = {"article": "t", "questions": ["q"], "options": [["a", "b", "c", "d"]], "answers": ["A"]}
    lines = json.dumps(good) + "\n\n" + json.dumps(good) + "\n"
    _write_race(str(tmp_path / "ok"), "dev", "high", {"7.txt": lines})
    _write_race(str(tmp_path / "ok"), "dev", "middle", {})
    assert [e.question_id for e in race.read_race(str(tmp_path / "ok"), "dev")] == ["high7.txt:1-0", "high7.txt:3-0"]
    bad = {key: value for key, value in good.items() if key != "article"}
    for first, line in ((bad, 1), (good, 2)):
        root = tmp_path / f"bad{line}"
        second = bad if first is good else good
        _write_race(str(root), "dev", "high", {"7.txt": json.dumps(first) + "\n" + json.dumps(second) + "\n"})
        _write_race(str(root), "dev", "middle", {})
        with pytest.raises(race.RaceFormatError, match=rf"7\.txt:{line}: no 'article' field"):
            race.read_race(str(root), "dev")


def test_missing_directories(tmp_path):
    with pytest.raises(FileNotFoundError, match="no RACE dev set"):
        race.read_race(str(tmp_path), "dev")
    _write_race(str(tmp_path), "dev", "high", {"1.txt": _article("high1.txt", ["q"], [["a", "b", "c", "d"]],
                                                                 ["A"])})
    with pytest.raises(FileNotFoundError, match="--high_only"):
        race.read_race(str(tmp_path), "dev")
    assert len(race.read_race(str(tmp_path), "dev", high_only=True)) == 1


def test_duplicate_question_ids(tmp_path):
    article = _article("same.txt", ["q"], [["a", "b", "c", "d"]], ["A"])
    _write_race(str(tmp_path), "dev", "high", {"1.txt": article, "2.txt": article})
    _write_race(str(tmp_path), "dev", "middle", {})
    with pytest.raises(race.RaceFormatError, match="appears twice"):
        race.read_race(str(tmp_path), "dev")


def test_unlabelled_test_set(tmp_path):
    _write_race(str(tmp_path), "test", "high", {"1.txt": {"id": "high1.txt", "article": "t", "questions": ["q"],
                                                          "options": [["a", "b", "c", "d"]]}})
    _write_race(str(tmp_path), "test", "middle", {})
    (example,) = race.read_race(str(tmp_path), "test")
    assert example.label is None


# ---------------------------------------------------------------------------------------------------------------
# Features


def test_blank_substitution_and_appending(tokenizer):
    assert race.question_with_option("John is a great _ singer.", "English") == "John is a great English singer."
    assert race.question_with_option("Which sentence is right?", "He sings.") == "Which sentence is right? He sings."
    # as the original: every "_" takes the option
    assert race.question_with_option("from _ to _ .", "six") == "from six to six ."
    example = race.RaceExample("x-0", "middle", "An article.", "John Denver is a great  _  singer.",
                               ["English", "Japanese", "American", "Chinese"], 0)
    # the original's preprocessing (whitespace folded, lowercased) comes first, then the substitution
    assert race.qa_texts(tokenizer, example)[0] == "john denver is a great english singer."
    appended = race.RaceExample("x-1", "middle", "An article.", ".Which sentence is right?",
                                ["Country music is from jazz.", "b", "c", "d"], 0)
    assert race.qa_texts(tokenizer, appended)[0] == ".which sentence is right? country music is from jazz."
    features = race.convert_example(example, tokenizer, 32, 16)
    tokens = features["tokens"][1]
    assert tokens[:5] == ["[CLS]", "▁an", "▁article", ".", "[SEP]"]
    assert tokens[5:] == tokenizer.tokenize("john denver is a great japanese singer.") + ["[SEP]"]


def test_last_qa_tokens_kept_and_article_truncated(tokenizer):
    question = "In the long story about the farmer and his clever dog that lived by the river, what did they find _"
    example = race.RaceExample("x-0", "high", "word " * 300, question, ["gold", "a boat", "nothing", "fish"], 2)
    max_seq_length, max_qa_length = 64, 8
    features = race.convert_example(example, tokenizer, max_seq_length, max_qa_length)
    assert features["label"] == 2
    for choice, option in enumerate(example.options):
        full = tokenizer.tokenize(question.replace("_", option))
        assert len(full) > max_qa_length
        tokens = features["tokens"][choice]
        sep = tokens.index("[SEP]")
        assert tokens[sep + 1:-1] == full[-max_qa_length:]  # the LAST max_qa_length tokens
        assert len(tokens) == max_seq_length  # the article fills the rest exactly
        assert tokens[1:sep] == tokenizer.tokenize("word " * 300)[:max_seq_length - 3 - max_qa_length]
        ids, mask, segments = (features[k][choice] for k in ("input_ids", "input_mask", "segment_ids"))
        assert ids == tokenizer.convert_tokens_to_ids(tokens)
        assert mask == [1] * max_seq_length
        assert segments == [0] * (sep + 1) + [1] * (max_qa_length + 1)
    # short sequences are padded with zeros
    short = race.convert_example(race.RaceExample("y-0", "high", "Hi.", "Why?", ["a", "b", "c", "d"], 0),
                                 tokenizer, 32, 8)
    length = len(short["tokens"][0])
    assert short["input_ids"][0][length:] == [0] * (32 - length)
    assert short["input_mask"][0] == [1] * length + [0] * (32 - length)


def test_qa_length_must_leave_room(tokenizer):
    example = race.RaceExample("x-0", "high", "a", "q", ["a", "b", "c", "d"], 0)
    with pytest.raises(ValueError, match="max_qa_length 128 leaves no room"):
        race.convert_example(example, tokenizer, 128, 128)
    race.check_lengths(128, 1)
    race.check_lengths(128, 125)  # [CLS] question+option [SEP] one article piece [SEP]
    with pytest.raises(ValueError, match="max_qa_length 126 leaves no room .* use --max_qa_length <= 125"):
        race.check_lengths(128, 126)
    with pytest.raises(ValueError, match="--max_qa_length must be positive, got 0"):
        race.check_lengths(128, 0)


def test_wordpiece_tokenizer_features():
    tokenizer = FullTokenizer(vocab_file=os.path.join(REPO_ROOT, "data", "vocab_chinese.txt"))
    example = race.RaceExample("x-0", "high", "今天天气很好。", "天气 _ ？", ["好", "坏", "冷", "热"], 0)
    features = race.convert_example(example, tokenizer, 24, 8)
    assert features["tokens"][0][0] == "[CLS]" and features["tokens"][0][-1] == "[SEP]"
    assert "好" in features["tokens"][0][features["tokens"][0].index("[SEP]"):]


# ---------------------------------------------------------------------------------------------------------------
# Records and metrics


def test_an_articles_pieces_are_encoded_once_for_its_questions_in_a_row(tokenizer, monkeypatch):
    encoded, encode = [], race.encode_article

    def counting(tokenizer_, article):
        encoded.append(article)
        return encode(tokenizer_, article)

    monkeypatch.setattr(race, "encode_article", counting)
    examples = [race.RaceExample(f"x-{i}", "high", article, "q?", ["a", "b", "c", "d"], 0)
                for i, article in enumerate(["one text", "one text", "another text", "one text"])]
    written = []
    assert race.write_records(examples, tokenizer, types.SimpleNamespace(write=written.append), 64, 16) == 4
    assert encoded == ["one text", "another text", "one text"] and len(written) == 4
    fields = tf.train.Example.FromString(written[1]).features.feature
    assert (fields["question_id"].bytes_list.value, fields["level"].bytes_list.value) == ([b"x-1"], [b"high"])
    assert fields["is_real_example"].int64_list.value == [1] and fields["label_ids"].int64_list.value == [0]


def test_the_examples_digest_tells_any_change_apart():
    examples = race.read_race(SAMPLE_DIR, "dev")
    digest = race.examples_digest(examples)
    assert digest == race.examples_digest(race.read_race(SAMPLE_DIR, "dev")) and len(digest) == 16
    relabelled = [dataclasses.replace(e) for e in examples]
    relabelled[0].label = (relabelled[0].label + 1) % 4
    assert race.examples_digest(relabelled) != digest
    assert race.examples_digest(examples[::-1]) != digest


def test_records_cache_reuse_rebuild_and_foreign_files(tokenizer, tmp_path, caplog):
    examples = race.read_race(SAMPLE_DIR, "dev")
    path = str(tmp_path / "eval.tf_record")
    race.prepare_records(examples, tokenizer, path, 64, 16, "dev")
    stamp = os.stat(path).st_mtime_ns
    _, ordered = race.prepare_records(examples, tokenizer, path, 64, 16, "dev")
    assert os.stat(path).st_mtime_ns == stamp and ordered == examples  # reused
    race.prepare_records(examples, tokenizer, path, 64, 24, "dev")  # max_qa_length changed: rebuilt
    assert records.read_meta(path)["key"] == race.cache_key(examples, tokenizer, 64, 24, "read")
    assert records.read_meta(path)["key"]["tokenizer"] == records.tokenizer_fingerprint(tokenizer)  # as every task
    stamp = os.stat(path).st_mtime_ns
    cased = FullTokenizer(spm_model_file=tokenizer.spm_model_file, do_lower_case=False)
    race.prepare_records(examples, cased, path, 64, 24, "dev")  # the casing changed: rebuilt
    assert os.stat(path).st_mtime_ns != stamp
    assert not [f for f in os.listdir(tmp_path) if ".tmp" in f]
    x = next(iter(race.inference_dataset(path, 64, len(examples), 16)))
    labels, index = x["label_ids"], x["example_index"]
    assert x["input_ids"].shape == (16, 4, 64) and labels.shape == (16,) and index.numpy().tolist() == list(range(16))
    assert labels.numpy().tolist() == [e.label for e in examples[:16]]

    # a file written by another program (the original's features only)
    foreign = str(tmp_path / "foreign.tf_record")
    with tf.io.TFRecordWriter(foreign) as writer:
        feature = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))  # noqa: E731
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            "input_ids": feature([1] * 256), "input_mask": feature([1] * 256), "segment_ids": feature([0] * 256),
            "label_ids": feature([1]), "is_real_example": feature([1])})).SerializeToString())
    with caplog.at_level(logging.WARNING):
        assert race.prepare_records(examples, tokenizer, foreign, 64, 16, "train") == (foreign, None)
    assert f"Reusing {foreign}, written by another program" in caplog.text
    with pytest.raises(ValueError, match="length 256"):
        race.prepare_records(examples, tokenizer, foreign, 128, 16, "train")
    with pytest.raises(ValueError, match="not written by albert_tf"):
        race.prepare_records(examples, tokenizer, foreign, 64, 16, "dev")
    # a corrupt file is rebuilt
    corrupt = str(tmp_path / "corrupt.tf_record")
    with open(corrupt, "wb") as f:
        f.write(b"\x00" * 40)
    with caplog.at_level(logging.WARNING):
        race.prepare_records(examples[:3], tokenizer, corrupt, 64, 16, "dev")
    assert records.read_meta(corrupt) is not None
    assert f"{corrupt} cannot be read as TFRecords of tf.train.Example" in caplog.text


def test_training_records_are_shuffled_deterministically(tokenizer, tmp_path):
    examples = race.read_race(SAMPLE_DIR, "train")
    _, first = race.prepare_records(examples, tokenizer, str(tmp_path / "a"), 64, 16, "train", shuffle_seed=3)
    _, second = race.prepare_records(examples, tokenizer, str(tmp_path / "b"), 64, 16, "train", shuffle_seed=3)
    assert [e.question_id for e in first] == [e.question_id for e in second] != [e.question_id for e in examples]
    batches = [[b[1].numpy().tolist() for b in race.train_dataset(str(tmp_path / "a"), 64, 8, seed=1).take(12)]
               for _ in range(2)]
    assert batches[0] == batches[1]  # the same stream for every iterator (resuming relies on it)
    skipped = [b[1].numpy().tolist() for b in race.train_dataset(str(tmp_path / "a"), 64, 8, seed=1,
                                                                  skip_batches=5).take(7)]
    assert skipped == batches[0][5:]


def test_accuracy_by_level_and_predictions():
    examples = [race.RaceExample(f"q{i}", level, "a", "q", ["a", "b", "c", "d"], label)
                for i, (level, label) in enumerate([("middle", 0), ("middle", 1), ("high", 2), ("high", 3),
                                                    ("high", None)])]
    logits = np.array([[5, 0, 0, 0], [5, 0, 0, 0], [0, 0, 5, 0], [0, 0, 0, 5], [0, 5, 0, 0]], np.float32)
    results = race_metrics.accuracy_by_level(examples, logits)
    assert results["accuracy"] == results["eval_accuracy"] == 0.75
    assert results["accuracy_middle"] == 0.5 and results["accuracy_high"] == 1.0
    assert results["num_examples"] == 4 and results["num_examples_middle"] == 2 and results["num_examples_high"] == 2
    expected_loss = np.mean([-np.log(np.exp(5) / (np.exp(5) + 3))] * 3 + [-np.log(1 / (np.exp(5) + 3))])
    assert results["eval_loss"] == pytest.approx(expected_loss)
    preds = race_metrics.predictions(examples, logits)
    assert preds["q1"]["answer"] == "A" and preds["q1"]["label"] == "B"
    assert preds["q4"]["answer"] == "B" and "label" not in preds["q4"]
    assert sum(preds["q0"]["probabilities"]) == pytest.approx(1.0, abs=1e-5)
