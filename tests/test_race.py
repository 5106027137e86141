"""RACE: reading the official layout (and all.txt), the original's features, record caches, metrics, and a tiny
model that trains, resumes, evaluates, predicts and exports end to end."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import race

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_DIR = os.path.join(REPO_ROOT, "data", "race")
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
    race.write_records(examples, tokenizer, path, 512, 128, log_examples=0)
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


def test_all_txt_variant(tmp_path):
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
])
def test_bad_articles_name_the_file(tmp_path, article, message):
    _write_race(str(tmp_path), "dev", "high", {"5.txt": article})
    _write_race(str(tmp_path), "dev", "middle", {})
    with pytest.raises(race.RaceFormatError, match=message) as info:
        race.read_race(str(tmp_path), "dev")
    assert "5.txt" in str(info.value)


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


def test_wordpiece_tokenizer_features():
    from albert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(vocab_file=os.path.join(REPO_ROOT, "data", "vocab_chinese.txt"))
    example = race.RaceExample("x-0", "high", "今天天气很好。", "天气 _ ？", ["好", "坏", "冷", "热"], 0)
    features = race.convert_example(example, tokenizer, 24, 8)
    assert features["tokens"][0][0] == "[CLS]" and features["tokens"][0][-1] == "[SEP]"
    assert "好" in features["tokens"][0][features["tokens"][0].index("[SEP]"):]


# ---------------------------------------------------------------------------------------------------------------
# Records and metrics


def test_records_cache_reuse_rebuild_and_foreign_files(tokenizer, tmp_path):
    examples = race.read_race(SAMPLE_DIR, "dev")
    path = str(tmp_path / "eval.tf_record")
    race.prepare_records(examples, tokenizer, path, 64, 16, "dev")
    stamp = os.stat(path).st_mtime_ns
    _, ordered = race.prepare_records(examples, tokenizer, path, 64, 16, "dev")
    assert os.stat(path).st_mtime_ns == stamp and ordered == examples  # reused
    race.prepare_records(examples, tokenizer, path, 64, 24, "dev")  # max_qa_length changed: rebuilt
    assert race._stored_key(race.first_record(path)) == race.cache_key(  # pylint: disable=protected-access
        examples, tokenizer, 64, 24, "read")
    assert not [f for f in os.listdir(tmp_path) if ".tmp" in f]
    x, labels, index = next(iter(race.inference_dataset(path, 64, len(examples), 16)))
    assert x["input_ids"].shape == (16, 4, 64) and labels.shape == (16,) and index.numpy().tolist() == list(range(16))
    assert labels.numpy().tolist() == [e.label for e in examples[:16]]

    # a file written by another program (the original's features only)
    foreign = str(tmp_path / "foreign.tf_record")
    with tf.io.TFRecordWriter(foreign) as writer:
        feature = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))  # noqa: E731
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            "input_ids": feature([1] * 256), "input_mask": feature([1] * 256), "segment_ids": feature([0] * 256),
            "label_ids": feature([1]), "is_real_example": feature([1])})).SerializeToString())
    assert race.prepare_records(examples, tokenizer, foreign, 64, 16, "train") == (foreign, None)
    with pytest.raises(ValueError, match="length 256"):
        race.prepare_records(examples, tokenizer, foreign, 128, 16, "train")
    with pytest.raises(ValueError, match="not written by albert_tf"):
        race.prepare_records(examples, tokenizer, foreign, 64, 16, "dev")
    # a corrupt file is rebuilt
    corrupt = str(tmp_path / "corrupt.tf_record")
    with open(corrupt, "wb") as f:
        f.write(b"\x00" * 40)
    race.prepare_records(examples[:3], tokenizer, corrupt, 64, 16, "dev")
    assert race._stored_key(race.first_record(corrupt)) is not None  # pylint: disable=protected-access


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
    results = race.accuracy_by_level(examples, logits)
    assert results["accuracy"] == results["eval_accuracy"] == 0.75
    assert results["accuracy_middle"] == 0.5 and results["accuracy_high"] == 1.0
    assert results["num_examples"] == 4 and results["num_examples_middle"] == 2 and results["num_examples_high"] == 2
    expected_loss = np.mean([-np.log(np.exp(5) / (np.exp(5) + 3))] * 3 + [-np.log(1 / (np.exp(5) + 3))])
    assert results["eval_loss"] == pytest.approx(expected_loss)
    preds = race.predictions(examples, logits)
    assert preds["q1"]["answer"] == "A" and preds["q1"]["label"] == "B"
    assert preds["q4"]["answer"] == "B" and "label" not in preds["q4"]
    assert sum(preds["q0"]["probabilities"]) == pytest.approx(1.0, abs=1e-5)


def test_init_from_an_original_checkpoint(tiny_config, tmp_path):
    """A pretrained (original TF1 format) checkpoint initialises the encoder of an unbuilt RACE model; the
    output head (output_weights [1, H], output_bias [1]) is reported missing and keeps its initial values."""
    from albert_tf.checkpoints import load_checkpoint, save_checkpoint
    from albert_tf.modeling import AlbertForMultipleChoice, AlbertForPretraining, dummy_inputs

    pretrained = AlbertForPretraining(tiny_config)
    pretrained(dummy_inputs(num_predictions=1), training=False)
    save_checkpoint(pretrained, str(tmp_path / "ckpt" / "model.ckpt"), fmt="original")
    model = AlbertForMultipleChoice(tiny_config)
    result = load_checkpoint(model, str(tmp_path / "ckpt" / "model.ckpt"))
    assert sorted(result.missing) == ["output_bias", "output_weights"]
    for ours, theirs in zip(model.albert.weights, pretrained.albert.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert model.output_layer.kernel.shape == (tiny_config.hidden_size, 1)


# ---------------------------------------------------------------------------------------------------------------
# End to end


def _params(tiny_config, tmp_path, **overrides):
    values = dict(albert_config=tiny_config, data_dir=SAMPLE_DIR, output_dir=str(tmp_path / "out"),
                  spm_model_file=os.path.join(REPO_ROOT, "data", "30k-clean.model"), max_seq_length=64,
                  max_qa_length=24, train_batch_size=4, eval_batch_size=8, predict_batch_size=8,
                  learning_rate=1e-3, train_step=3, warmup_step=1, save_checkpoints_steps=3, iterations_per_loop=3,
                  do_predict=True, export_dir=str(tmp_path / "export"), log_every=0)
    values.update(overrides)
    return race.RaceParams(**values)


def test_train_resume_evaluate_predict_export(tiny_config, tmp_path):
    from albert_tf.checkpoints import save_checkpoint
    from albert_tf.modeling import AlbertModel, dummy_inputs

    encoder = AlbertModel(tiny_config)
    encoder(dummy_inputs(), training=False)
    save_checkpoint(encoder, str(tmp_path / "pretrained" / "model.ckpt"), fmt="original")

    out = tmp_path / "out"
    outcome = race.run_race(_params(tiny_config, tmp_path, do_eval=False, do_predict=False, export_dir=None,
                                    init_checkpoint=str(tmp_path / "pretrained" / "model.ckpt")))
    assert outcome["step"] == 3 and tf.train.latest_checkpoint(str(out)).endswith("ckpt-3")
    train_cache = out / "train.tf_record"
    stamp = train_cache.stat().st_mtime_ns

    # resumes at step 3, runs to 5, evaluates, predicts, exports
    outcome = race.run_race(_params(tiny_config, tmp_path, train_step=5, save_checkpoints_steps=2,
                                    iterations_per_loop=1))
    assert outcome["step"] == 5 and tf.train.latest_checkpoint(str(out)).endswith("ckpt-5")
    assert train_cache.stat().st_mtime_ns == stamp  # the cache was reused

    results = dict(line.split(" = ") for line in (out / "eval_results.txt").read_text().splitlines())
    for key in ("accuracy", "accuracy_middle", "accuracy_high", "eval_accuracy", "eval_loss"):
        assert 0.0 <= float(results[key]) <= (1.0 if "accuracy" in key else 10.0)
    assert results["global_step"] == "5" and results["num_examples"] == "72"
    assert results["num_examples_middle"] == "39" and results["num_examples_high"] == "33"

    predictions = json.loads((out / "test_predictions.json").read_text())
    test_examples = race.read_race(SAMPLE_DIR, "test")
    assert list(predictions) == sorted(e.question_id for e in test_examples)
    for entry in predictions.values():
        assert entry["answer"] in "ABCD" and sum(entry["probabilities"]) == pytest.approx(1.0, abs=1e-4)
        assert entry["answer"] == "ABCD"[int(np.argmax(entry["probabilities"]))]
    tsv = (out / "test_predictions.tsv").read_text().splitlines()
    assert tsv[0].split("\t") == ["question_id", "level", "answer", "prob_A", "prob_B", "prob_C", "prob_D", "label"]
    assert len(tsv) == 72
    assert (out / "predict_results.txt").exists()  # the sample's test set has answers

    # the export runs in a fresh process with only tensorflow (+ tensorflow_text, whose ops the `text` signature
    # uses), and agrees with the in-process predictions
    from albert_tf.tokenization import FullTokenizer

    tokenizer = FullTokenizer(spm_model_file=os.path.join(REPO_ROOT, "data", "30k-clean.model"))
    chosen = test_examples[:5]
    feats = [race.convert_example(e, tokenizer, 64, 24) for e in chosen]
    np.savez(tmp_path / "inputs.npz", **{k: np.array([f[k] for f in feats], np.int32)
                                        for k in ("input_ids", "input_mask", "segment_ids")})
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the ops of the `text` signature)
        try:
            import albert_tf
            sys.exit("albert_tf should not be importable here")
        except ImportError:
            pass
        model = tf.saved_model.load({str(outcome['export_dir'])!r})
        inputs = dict(np.load({str(tmp_path / 'inputs.npz')!r}))
        out = model.signatures["serving_default"](**{{k: tf.constant(v) for k, v in inputs.items()}})
        info = model.signatures["tokenization_info"]()
        assert tf.io.gfile.exists(info["vocab_file"].numpy().decode()), info
        np.savez({str(tmp_path / 'outputs.npz')!r}, probabilities=out["probabilities"].numpy(),
                 answer=np.array([a.decode() for a in out["answer"].numpy()]), prediction=out["prediction"].numpy())
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    run = subprocess.run([sys.executable, "-c", script], cwd=str(tmp_path), env=env, capture_output=True,
                         text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    served = np.load(tmp_path / "outputs.npz")
    expected = np.array([predictions[e.question_id]["probabilities"] for e in chosen])
    np.testing.assert_allclose(served["probabilities"], expected, atol=2e-6)
    assert served["answer"].tolist() == [predictions[e.question_id]["answer"] for e in chosen]


def test_text_signature_matches_python_features(tiny_config, tmp_path):
    """The export's `text` signature (raw article, question, options) gives the probabilities `serving_default`
    gives on `convert_example`'s features, in a process with only tensorflow and tensorflow_text."""
    from albert_tf.tokenization import FullTokenizer

    spm_model_file = os.path.join(REPO_ROOT, "data", "30k-clean.model")
    tokenizer = FullTokenizer(spm_model_file=spm_model_file)
    examples = race.read_race(SAMPLE_DIR, "dev")
    # blanks and appended options; the second question is long enough for max_qa_length to cut it
    chosen = [examples[i] for i in (0, 1, 2, 8)]
    chosen.append(race.RaceExample("x-0", "middle", "Tom ``walked'' home.  It rained.", "From _ to _ ?",
                                   ["Six", "SEVEN", "", "  eight  nine "], 0))
    assert any("_" not in e.question for e in chosen) and any("_" in e.question for e in chosen)
    model = race.build_model(tiny_config, dropout_prob=0.0)
    # a head large enough that the probabilities depend visibly on every token (at init they are all ~0.25)
    kernel = model.output_layer.kernel
    kernel.assign(np.random.default_rng(0).normal(0.0, 1000.0, kernel.shape).astype(np.float32))
    export_dir = race.export_race_model(model, str(tmp_path / "export"), tokenizer_file=spm_model_file,
                                        is_sentencepiece=True, max_seq_length=64, max_qa_length=24)
    feats = [race.convert_example(e, tokenizer, 64, 24) for e in chosen]
    assert any(len(f["tokens"][0]) == 64 for f in feats)  # articles were cut to fit
    np.savez(tmp_path / "inputs.npz", **{k: np.array([f[k] for f in feats], np.int32)
                                        for k in ("input_ids", "input_mask", "segment_ids")})
    texts = {"article": [e.article for e in chosen], "question": [e.question for e in chosen],
             "options": [e.options for e in chosen]}
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    script = textwrap.dedent(f"""
        import json
        import sys
        import numpy as np
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the ops)
        try:
            import albert_tf
            sys.exit("albert_tf should not be importable here")
        except ImportError:
            pass
        model = tf.saved_model.load({export_dir!r})
        inputs = dict(np.load({str(tmp_path / 'inputs.npz')!r}))
        ids = model.signatures["serving_default"](**{{k: tf.constant(v) for k, v in inputs.items()}})
        with open({str(tmp_path / 'texts.json')!r}) as f:
            texts = json.load(f)
        text = model.signatures["text"](**{{k: tf.constant(v) for k, v in texts.items()}})
        np.savez({str(tmp_path / 'outputs.npz')!r}, ids=ids["probabilities"].numpy(),
                 text=text["probabilities"].numpy(), ids_prediction=ids["prediction"].numpy(),
                 text_prediction=text["prediction"].numpy(),
                 text_answer=np.array([a.decode() for a in text["answer"].numpy()]))
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    run = subprocess.run([sys.executable, "-c", script], cwd=str(tmp_path), env=env, capture_output=True,
                         text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    served = np.load(tmp_path / "outputs.npz")
    assert served["text"].shape == (len(chosen), race.NUM_CHOICES)
    assert np.ptp(served["ids"], axis=-1).min() > 0.01, served["ids"]  # the comparison below can tell apart
    np.testing.assert_allclose(served["text"], served["ids"], atol=1e-5, rtol=0)
    np.testing.assert_array_equal(served["text_prediction"], served["ids_prediction"])
    assert served["text_answer"].tolist() == ["ABCD"[p] for p in served["ids_prediction"]]


def test_run_race_rejects_bad_settings(tiny_config, tmp_path):
    with pytest.raises(ValueError, match="max_position_embeddings|only trained up to"):
        race.run_race(_params(tiny_config, tmp_path, max_seq_length=256))
    with pytest.raises(ValueError, match="leaves no room"):
        race.run_race(_params(tiny_config, tmp_path, max_qa_length=62))
    with pytest.raises(ValueError, match="exclude each other"):
        race.run_race(_params(tiny_config, tmp_path, high_only=True, middle_only=True))
    with pytest.raises(ValueError, match="At least one"):
        race.run_race(_params(tiny_config, tmp_path, do_train=False, do_eval=False, do_predict=False))


@pytest.mark.slow
def test_inference_under_mirrored_strategy_matches_single_device(tiny_config, tmp_path):
    """predict_logits gathers across replicas and keeps file order (2 logical CPUs, MirroredStrategy)."""
    config_file = tmp_path / "config.json"
    tiny_config.to_json_file(str(config_file))
    script = textwrap.dedent(f"""
        import numpy as np
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        import keras
        from albert_tf import race
        from albert_tf.config import AlbertConfig
        from albert_tf.tokenization import FullTokenizer
        config = AlbertConfig.from_json_file({str(config_file)!r})
        tokenizer = FullTokenizer(spm_model_file={os.path.join(REPO_ROOT, "data", "30k-clean.model")!r})
        examples = race.read_race({SAMPLE_DIR!r}, "dev")[:13]
        path = {str(tmp_path / "dev.tf_record")!r}
        race.write_records(examples, tokenizer, path, 32, 8)
        keras.utils.set_random_seed(0)
        single = race.build_model(config)
        expected = race.predict_logits(single, path, len(examples), 32, 4)
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        with strategy.scope():
            mirrored = race.build_model(config)
        mirrored.set_weights(single.get_weights())
        got = race.predict_logits(mirrored, path, len(examples), 32, 4, strategy)
        np.testing.assert_allclose(got, expected, atol=1e-5)
        assert np.abs(expected).sum() > 0
        print("OK", strategy.num_replicas_in_sync)
    """)
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "OK 2" in run.stdout


def _defined_flags(path):
    """{name: default} of the `flags.DEFINE_*("name", default, ...)` calls in a source file (no import needed:
    absl flags are global to a process and importing run_race.py would load TensorFlow)."""
    import ast  # pylint: disable=import-outside-toplevel

    found = {}
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr.startswith("DEFINE_") and len(node.args) >= 2:
            found[ast.literal_eval(node.args[0])] = ast.literal_eval(node.args[1])
    return found


def test_cli_flags_and_defaults_match_the_original():
    defaults = _defined_flags(os.path.join(REPO_ROOT, "run_race.py"))
    defaults.update(_defined_flags(os.path.join(REPO_ROOT, "albert_tf", "flags.py")))
    original = {
        "data_dir": None, "albert_config_file": None, "task_name": "race", "vocab_file": None, "train_file": None,
        "eval_file": None, "predict_file": None, "spm_model_file": None, "output_dir": None, "init_checkpoint": None,
        "albert_hub_module_handle": None, "do_lower_case": True, "dropout_prob": 0.1, "max_seq_length": 512,
        "max_qa_length": 128, "num_keep_checkpoint": 5, "high_only": False, "middle_only": False,
        "do_train": True, "do_eval": True, "do_predict": False, "train_batch_size": 32, "eval_batch_size": 8,
        "predict_batch_size": 8, "learning_rate": 1e-5, "train_step": 12000, "warmup_step": 1000,
        "save_checkpoints_steps": 100, "iterations_per_loop": 1000, "use_tpu": False, "tpu_name": None,
        "tpu_zone": None, "gcp_project": None, "master": None, "num_tpu_cores": 8,
    }
    assert {name: defaults.get(name, "MISSING") for name in original} == original
    for name in ("strategy", "mixed_precision", "export_dir"):
        assert name in defaults
    with open(os.path.join(REPO_ROOT, "run_race.py"), encoding="utf-8") as f:
        source = f.read()
    assert "define_tpu_flags()" in source and "define_runtime_flags()" in source
    # RaceParams' defaults are the flags' defaults
    params = race.RaceParams(albert_config=None, data_dir="d", output_dir="o")
    for name in ("max_seq_length", "max_qa_length", "train_batch_size", "eval_batch_size", "predict_batch_size",
                 "learning_rate", "train_step", "warmup_step", "save_checkpoints_steps", "iterations_per_loop",
                 "do_train", "do_eval", "do_predict", "dropout_prob", "num_keep_checkpoint", "do_lower_case"):
        assert getattr(params, name) == original[name], name
