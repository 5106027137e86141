"""GLUE and CSV readers, the feature cache, and the dynamic-padding pipelines."""

import io
import logging
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import errors
from albert_tf.data import glue
from albert_tf.data.glue import cache as feature_cache
from albert_tf.data.records import read_meta, tokenizer_fingerprint
from albert_tf.text.tokenization import FullTokenizer, encode_pair
from tests.helpers import parallel_stage_orders

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE_GLUE = os.path.join(REPO_ROOT, "data", "glue")
SHARED_GLUE = os.path.join(os.path.dirname(REPO_ROOT), "shared", "data", "glue")
needs_shared = pytest.mark.skipif(not os.path.isdir(SHARED_GLUE),
                                  reason="the official GLUE files (../shared/data/glue) are not here (CI clone)")

# Official GLUE row counts (train, dev, test).
OFFICIAL_COUNTS = {"sst-2": (67349, 872, 1821), "cola": (8551, 1043, 1063), "mrpc": (3668, 408, 1725),
                   "rte": (2490, 277, 3000), "sts-b": (5749, 1500, 1379)}


# ------------------------------------------------------------------------------------------------ readers
@pytest.mark.parametrize("task", sorted(OFFICIAL_COUNTS))
def test_sample_counts(task):
    processor = glue.get_processor(task)
    assert [len(processor.get_examples(SAMPLE_GLUE, s)) for s in glue.SPLITS] == [200, 100, 50]


@needs_shared
@pytest.mark.parametrize("task", sorted(OFFICIAL_COUNTS))
def test_official_counts(task):
    processor = glue.get_processor(task)
    counts = tuple(len(processor.get_examples(SHARED_GLUE, s)) for s in glue.SPLITS)
    assert counts == OFFICIAL_COUNTS[task]


def test_layouts_and_labels():
    mrpc = glue.get_processor("MRPC")  # any case; the files start with a byte-order mark
    first = mrpc.get_train_examples(SAMPLE_GLUE)[0]
    assert first.label == "1" and first.text_a.startswith("Amrozi accused his brother")
    assert first.text_b.startswith("Referring to him as only \"the witness\"")  # bare quotes kept as text
    test = mrpc.get_test_examples(SAMPLE_GLUE)
    assert [e.guid for e in test[:3]] == ["0", "1", "2"] and test[0].label is None

    cola = glue.get_processor("cola")  # train/dev have no header row
    first = cola.get_train_examples(SAMPLE_GLUE)[0]
    assert first.line == 1 and first.label == "1" and first.text_a.startswith("Our friends won't buy")
    assert cola.get_test_examples(SAMPLE_GLUE)[0].text_a == "Bill whistled past the house."

    stsb = glue.get_processor("sts-b")
    assert stsb.is_regression and stsb.get_labels() == [None] and stsb.num_labels == 1
    first = stsb.get_train_examples(SAMPLE_GLUE)[0]
    assert (first.text_a, first.text_b, first.label) == ("A plane is taking off.", "An air plane is taking off.", 5.0)

    rte = glue.get_processor("rte")
    assert rte.get_labels() == ["entailment", "not_entailment"]
    assert {e.label for e in rte.get_dev_examples(SAMPLE_GLUE)} == {"entailment", "not_entailment"}
    assert glue.get_processor("mnli").get_labels() == ["contradiction", "entailment", "neutral"]
    assert glue.get_processor("mismnli").task.files[1:] == ("dev_mismatched.tsv", "test_mismatched.tsv")
    # data_dir may also be the task's folder itself
    assert len(glue.get_processor("sst-2").get_dev_examples(os.path.join(SAMPLE_GLUE, "SST-2"))) == 100


def _write(path, text, encoding="utf-8"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding=encoding, newline="") as f:
        f.write(text)
    return path


def test_errors(tmp_path):
    with pytest.raises(glue.UnknownTaskError, match="known tasks: cola, mismnli, mnli, mrpc, qnli, qqp, rte, "
                                                    "sst-2, sts-b, wnli"):
        glue.get_processor("sst2")
    with pytest.raises(glue.MissingSplitError, match=r"dev file dev.tsv is not in .*tried .*SST-2/dev.tsv"):
        glue.get_processor("sst-2").get_dev_examples(str(tmp_path))

    _write(str(tmp_path / "SST-2" / "train.tsv"), "sentence\tlabel\ngood film\t1\nno label here\nbad\t0\n")
    with pytest.raises(glue.MalformedRowError, match=r"SST-2/train.tsv, line 3: 1 fields") as info:
        glue.get_processor("sst-2").get_train_examples(str(tmp_path))
    assert info.value.line == 3 and info.value.path == str(tmp_path / "SST-2" / "train.tsv")

    _write(str(tmp_path / "SST-2" / "dev.tsv"), "sentence\tlabel\ngood film\t1\nodd\t2\n")
    with pytest.raises(glue.UnknownLabelError, match=r"dev.tsv, line 3: label '2' is not in the label set "
                                                     r"'0', '1' of task sst-2"):
        glue.get_processor("sst-2").get_dev_examples(str(tmp_path))

    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    _write(str(tmp_path / "STS-B" / "train.tsv"), header + "0\tg\tf\ty\to\ts\ts\ta\tb\thigh\n")
    with pytest.raises(glue.MalformedRowError, match="line 2: score 'high' is not a number"):
        glue.get_processor("sts-b").get_train_examples(str(tmp_path))

    with open(tmp_path / "bad.tsv", "wb") as f:
        f.write(b"sentence\tlabel\nfine\t1\n\xff\xfe bad bytes\t0\n")
    with pytest.raises(glue.MalformedRowError, match="not valid UTF-8"):
        glue.CsvProcessor(train_file=str(tmp_path / "bad.tsv")).get_train_examples(None)


def test_the_first_byte_that_is_not_utf8_is_found_by_line_and_character():
    find = glue.first_invalid_utf8
    assert find(io.BytesIO("\ufeffab\nc\u00e9d\n".encode())) is None
    assert find(io.BytesIO(b"\xef\xbb\xbfa\xffb")) == (1, 2, 0xFF, "invalid start byte")  # the mark not counted
    assert find(io.BytesIO(b"x\xef\xbb\xbf\xff")) == (1, 3, 0xFF, "invalid start byte")  # a mark inside is a char
    assert find(io.BytesIO("x\ry\r\n\u00e9z".encode() + b"\xfe")) == (3, 3, 0xFE, "invalid start byte")
    assert find(io.BytesIO(b"ok\n\xc3(")) == (2, 1, 0xC3, "invalid continuation byte")


def test_rows_of_local_and_remote_files_and_their_errors(tmp_path):
    tsv = _write(str(tmp_path / "a.tsv"), '\ufeffh1\th2\n\nsay "hi\tthere\r\nlast\trow\n')
    rows = list(glue.read_rows(tsv))
    assert rows == [(1, ["h1", "h2"]), (3, ['say "hi', "there"]), (4, ["last", "row"])]  # bare quotes kept
    remote = "ram://glue-rows/a.tsv"
    tf.io.gfile.makedirs("ram://glue-rows")
    with tf.io.gfile.GFile(remote, "wb") as f:
        f.write(open(tsv, "rb").read())
    assert list(glue.read_rows(remote)) == rows
    with tf.io.gfile.GFile("ram://glue-rows/bad.tsv", "wb") as f:
        f.write(b"a\tb\nc\xe9d\te\n")
    with pytest.raises(glue.MalformedRowError, match=r"^ram://glue-rows/bad.tsv, line 2: not valid UTF-8 \(byte "
                                                     r"0xe9 at column 2: invalid continuation byte\)$") as info:
        list(glue.read_rows("ram://glue-rows/bad.tsv"))
    assert (info.value.path, info.value.line) == ("ram://glue-rows/bad.tsv", 2)
    with open(tmp_path / "bad.tsv", "wb") as f:
        f.write(b"a\tb\n" * 3 + b"x\ty\xff\n")
    with pytest.raises(glue.MalformedRowError, match=r"bad.tsv, line 4: not valid UTF-8 \(byte 0xff at column 4: "):
        list(glue.read_rows(str(tmp_path / "bad.tsv")))
    csv_file = _write(str(tmp_path / "a.csv"), 'a,"b,c"\nd,"e"x\n')
    with pytest.raises(glue.MalformedRowError, match=r"a.csv, line 2: cannot parse the row: "):
        list(glue.read_rows(csv_file, delimiter=","))
    with pytest.raises(glue.MissingSplitError, match="^data file not found: .*nowhere.tsv$"):
        list(glue.read_rows(str(tmp_path / "nowhere.tsv")))


def test_a_glue_reader_is_made_for_glue_tasks_only_and_counts_every_column(tmp_path):
    assert glue.GlueProcessor("SST-2").task_name == "sst-2"
    for name in ("nope", "squad"):  # no task; a task whose files are not GLUE's
        with pytest.raises(glue.UnknownTaskError, match=f"^unknown task '{name}'; known tasks: cola, "):
            glue.GlueProcessor(name)
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    _write(str(tmp_path / "MRPC" / "train.tsv"), header + "1\t2\t3\tfirst\tsecond\n0\t4\t5\tonly four\n")
    with pytest.raises(glue.MalformedRowError, match=r"train.tsv, line 3: 4 fields, the mrpc train layout needs at "
                                                     r"least 5$"):
        glue.get_processor("mrpc").get_train_examples(str(tmp_path))
    _write(str(tmp_path / "RTE" / "train.tsv"), "index\tsentence1\tsentence2\tlabel\n0\ta\tb\n")  # label last
    with pytest.raises(glue.MalformedRowError, match=r"line 2: 3 fields, the rte train layout needs at least 4$"):
        glue.get_processor("rte").get_train_examples(str(tmp_path))


def test_a_label_is_read_without_its_spaces_and_a_missing_one_trains_as_the_first():
    processor = glue.get_processor("sst-2")
    assert processor.label_of(" 1 ", "f", 2) == "1"
    assert processor.label_index(None) == 0 and processor.label_index("1") == 1


def test_qqp_skips_short_rows_as_the_original(tmp_path, caplog):
    _write(str(tmp_path / "QQP" / "train.tsv"),
           "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n0\t1\t2\tq one?\tq two?\t0\n1\t3\t4\tcut short\n"
           "2\t5\t6\tq three?\tq four?\t1\n")
    examples = glue.get_processor("qqp").get_train_examples(str(tmp_path))
    assert [(e.guid, e.label) for e in examples] == [("0", "0"), ("2", "1")]
    assert [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()] == [
        f"{tmp_path}/QQP/train.tsv, line 3: skipped (4 fields, 6 needed)"]


def test_glue_data_error_keeps_its_old_name_in_the_family():
    assert glue.DataError is glue.GlueDataError and issubclass(glue.GlueDataError, errors.DataError)
    assert all(issubclass(e, glue.GlueDataError) for e in (glue.UnknownTaskError, glue.MissingSplitError,
                                                             glue.MalformedRowError, glue.UnknownLabelError))


def test_inferred_labels_numbers_by_value_then_text(tmp_path):
    """The label order is the model's output order, so it stays the one earlier releases inferred."""
    train = _write(str(tmp_path / "train.tsv"), "text\tlabel\n" + "".join(
        f"t\t{label}\n" for label in ("class10", "class2", "1.5", "-1", "b", "class1", "10")))
    assert glue.CsvProcessor(train_file=train).get_labels() == [
        "-1", "1.5", "10", "b", "class1", "class10", "class2"]


def test_inferred_labels_come_from_the_dev_file_without_a_train_file_and_are_logged(tmp_path, caplog):
    """Evaluating only (`--do_eval` with a dev file and no train file): the labels are the dev file's, and the
    log names the file and the list, since the list is the model's output order."""
    dev = _write(str(tmp_path / "dev.tsv"), "text\tlabel\nok\tpos\nmeh\tneg\n")
    caplog.set_level(logging.INFO)
    assert glue.CsvProcessor(dev_file=dev, task_name="mine").get_labels() == ["neg", "pos"]
    assert f"Task mine: labels inferred from {dev}: ['neg', 'pos']" in [r.getMessage() for r in caplog.records]
    with pytest.raises(glue.GlueDataError, match="task mine: no label list given and no train or dev file"):
        glue.CsvProcessor(test_file=dev, task_name="mine").get_labels()


def test_inferring_labels_names_a_row_without_the_label_column(tmp_path):
    train = _write(str(tmp_path / "train.tsv"), "text\tlabel\nok\tpos\nonly text\n")
    with pytest.raises(glue.MalformedRowError, match=r"train.tsv, line 3: 1 fields, no label column 1$"):
        glue.CsvProcessor(train_file=train).get_labels()


def test_a_column_named_but_not_in_the_header_is_named_in_the_error(tmp_path):
    train = _write(str(tmp_path / "train.tsv"), "text\tlabel\nok\tpos\n")
    error = r"train.tsv, line 1: no column named 'stars' for label \(header: \['text', 'label'\]\)$"
    with pytest.raises(glue.MalformedRowError, match=error):  # inferring the label list
        glue.CsvProcessor(train_file=train, label_column="stars").get_labels()
    with pytest.raises(glue.MalformedRowError, match=error):  # reading the examples
        glue.CsvProcessor(train_file=train, label_column="stars", labels=["pos"]).get_train_examples(None)


def test_a_row_short_of_a_needed_column_is_named(tmp_path):
    """Every column a split reads must be in every row (a test split's label need not be)."""
    train = _write(str(tmp_path / "train.tsv"), "text\tlabel\nok\tpos\nonly text\n")
    with pytest.raises(glue.MalformedRowError, match=r"train.tsv, line 3: 1 fields, column 1 is needed$"):
        glue.CsvProcessor(train_file=train, labels=["pos"]).get_train_examples(None)
    test = glue.CsvProcessor(test_file=train, labels=["pos"]).get_test_examples(None)
    assert [(e.text_a, e.label) for e in test] == [("ok", None), ("only text", None)]


def test_negative_columns_count_from_the_end_of_the_first_row(tmp_path):
    """As Python indexes: -1 is the last column, fixed by the first data row; a later row without it is named."""
    train = _write(str(tmp_path / "train.tsv"), "id\ttext\tlabel\n1\tok\tpos\n2\tbad\tneg\n")
    processor = glue.CsvProcessor(train_file=train, text_a_column=-2, label_column=-1, guid_column=0)
    assert processor.get_labels() == ["neg", "pos"]
    assert [(e.guid, e.text_a, e.label) for e in processor.get_train_examples(None)] == [
        ("1", "ok", "pos"), ("2", "bad", "neg")]
    short = _write(str(tmp_path / "short.tsv"), "id\ttext\tlabel\n1\tok\tpos\n2\tbad\n")
    with pytest.raises(glue.MalformedRowError, match=r"short.tsv, line 3: 2 fields, column 2 is needed$"):
        glue.CsvProcessor(train_file=short, text_a_column=-2, label_column=-1, labels=["pos"]).get_train_examples(
            None)


def test_train_or_dev_files_need_a_label_column(tmp_path):
    """Either labelled split alone needs the label column; test files alone do not."""
    for split in ("train_file", "dev_file"):
        with pytest.raises(glue.GlueDataError, match="label_column is required to read train or dev files"):
            glue.CsvProcessor(**{split: "x.tsv"}, label_column=None)
    assert glue.CsvProcessor(test_file="x.tsv", label_column=None).files["test"] == "x.tsv"


def test_inferred_labels_read_a_relative_train_file_in_data_dir(tmp_path):
    """`run_classifier.py --data_dir=task --train_file=train.csv`: the label list is inferred before any split is
    read, from the train file looked up in data_dir (as the splits are)."""
    os.makedirs(tmp_path / "task")
    _write(str(tmp_path / "task" / "train.csv"), "text,label\nfine,pos\nbad,neg\n")
    processor = glue.get_processor("mine", train_file="train.csv", delimiter=",", data_dir=str(tmp_path / "task"))
    assert processor.get_labels() == ["neg", "pos"]
    assert [e.label for e in processor.get_train_examples(None)] == ["pos", "neg"]
    with pytest.raises(glue.MissingSplitError, match="the train file train.csv does not exist"):
        glue.CsvProcessor(train_file="train.csv", delimiter=",").get_labels()


def test_own_files_read_the_first_two_columns_by_default_and_columns_given_as_text(tmp_path):
    path = _write(str(tmp_path / "t.tsv"), "text\tlabel\tnote\ngood film\tpos\tx\nbad one\tneg\ty\n")
    examples = glue.CsvProcessor(train_file=path, labels=["neg", "pos"]).get_train_examples(None)
    assert [(e.text_a, e.label) for e in examples] == [("good film", "pos"), ("bad one", "neg")]
    plain = _write(str(tmp_path / "p.tsv"), "x\tgood film\tpos\n")
    spaced = glue.CsvProcessor(train_file=plain, text_a_column=" 1 ", label_column="2 ", header=False,
                               labels=["neg", "pos"])
    assert [(e.text_a, e.label) for e in spaced.get_train_examples(None)] == [("good film", "pos")]


def test_csv_processor(tmp_path):
    train = _write(str(tmp_path / "train.csv"),
                   'id,review,stars\n1,"Great, really great",10\n2,"He said ""meh""",2\n3,fine,10\n')
    dev = _write(str(tmp_path / "dev.csv"), 'id,review,stars\n7,"ok, ok",2\n')
    test = _write(str(tmp_path / "test.csv"), "id,review\n9,unlabelled\n")
    processor = glue.get_processor("Reviews", train_file=train, dev_file=dev, test_file=test, delimiter="comma",
                                   text_a_column="review", label_column="stars", guid_column="id")
    assert processor.task_name == "reviews"
    assert processor.get_labels() == ["2", "10"]  # inferred from the train file, sorted numerically
    examples = processor.get_train_examples(None)
    assert [(e.guid, e.text_a, e.label) for e in examples] == [
        ("1", "Great, really great", "10"), ("2", 'He said "meh"', "2"), ("3", "fine", "10")]
    assert processor.label_index("10") == 1
    assert [(e.guid, e.text_a, e.label) for e in processor.get_test_examples(None)] == [("9", "unlabelled", None)]

    # Positions, no header, a given label list, pairs; relative paths are looked up in data_dir.
    _write(str(tmp_path / "pairs.tsv"), "a one\tb one\tyes\na two\tb two\tmaybe\n")
    pairs = glue.CsvProcessor(train_file="pairs.tsv", text_a_column=0, text_b_column="1", label_column=2,
                              header=False, labels=["no", "yes"])
    with pytest.raises(glue.UnknownLabelError, match="line 2: label 'maybe' is not in the label set 'no', 'yes'"):
        pairs.get_train_examples(str(tmp_path))
    with pytest.raises(glue.MissingSplitError, match="no dev file given"):
        pairs.get_dev_examples(str(tmp_path))
    with pytest.raises(glue.GlueDataError, match="by name only when the files have a header"):
        glue.CsvProcessor(train_file=train, text_a_column="review", header=False)
    with pytest.raises(glue.MalformedRowError, match="no column named 'text'"):
        glue.CsvProcessor(train_file=train, delimiter=",", text_a_column="text", label_column="stars") \
            .get_train_examples(None)
    regression = glue.CsvProcessor(train_file=train, delimiter=",", text_a_column=1, label_column=2,
                                   regression=True)
    assert [e.label for e in regression.get_train_examples(None)] == [10.0, 2.0, 10.0]
    assert regression.num_labels == 1


# ------------------------------------------------------------------------------------------ feature cache
@pytest.fixture(scope="module")
def tok():
    return FullTokenizer(spm_model_file=os.path.join(REPO_ROOT, "data", "30k-clean.model"), do_lower_case=True)


def _records(path, max_seq_length, regression=False):
    spec = glue.record_spec(max_seq_length, regression)
    return [{k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()}
            for r in tf.data.TFRecordDataset(path)]


def test_features_and_cache_keys(tmp_path, tok):
    data_dir = tmp_path / "glue"
    shutil.copytree(os.path.join(SAMPLE_GLUE, "MRPC"), data_dir / "MRPC")
    processor = glue.get_processor("mrpc")
    cache = str(tmp_path / "cache")
    first = glue.cached_features(processor, str(data_dir), "dev", tok, 48, cache)
    assert first.written and first.num_examples == 100 and first.max_length == 48
    records = _records(first.path, 48)
    assert len(records) == 100
    example = first.examples[5]
    ids, mask, segments = encode_pair(tok, example.text_a, example.text_b, 48)
    np.testing.assert_array_equal(records[5]["input_ids"], ids)
    np.testing.assert_array_equal(records[5]["input_mask"], mask)
    np.testing.assert_array_equal(records[5]["segment_ids"], segments)
    assert records[5]["label_ids"] == int(example.label) and records[5]["is_real_example"] == 1
    assert os.path.basename(first.path).startswith("mrpc_dev_48_")

    again = glue.cached_features(processor, str(data_dir), "dev", tok, 48, cache)
    assert not again.written and again.path == first.path
    # Sequence length, casing, tokenizer and data each give a new file; nothing stale is reused.
    assert glue.cached_features(processor, str(data_dir), "dev", tok, 40, cache).path != first.path
    cased = FullTokenizer(spm_model_file=tok.spm_model_file, do_lower_case=False)
    assert glue.cached_features(processor, str(data_dir), "dev", cased, 48, cache).path != first.path
    with open(data_dir / "MRPC" / "dev.tsv", "a", encoding="utf-8") as f:
        f.write("0\t1\t2\tan added row\tanother\n")
    changed = glue.cached_features(processor, str(data_dir), "dev", tok, 48, cache)
    assert changed.written and changed.path != first.path and changed.num_examples == 101
    assert not [f for f in os.listdir(cache) if ".tmp" in f]
    # A record file whose description does not match is rewritten, not trusted.
    with open(changed.path + ".json", "w", encoding="utf-8") as f:
        f.write('{"key": "something else"}')
    assert glue.cached_features(processor, str(data_dir), "dev", tok, 48, cache).written
    # The tokenizer part of the key is the one every task's cache uses.
    assert read_meta(changed.path)["key"]["tokenizer"] == tokenizer_fingerprint(tok)


def test_the_cache_records_the_longest_example_and_names_its_file_safely(tmp_path, tok, caplog):
    processor = glue.get_processor("mrpc")
    with caplog.at_level("INFO"):
        first = glue.cached_features(processor, SAMPLE_GLUE, "dev", tok, 128, str(tmp_path))
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("Writing")] == [
        "Writing mrpc dev example 0 of 100"]  # progress every 10,000 examples
    longest = max(int(r["input_mask"].sum()) for r in _records(first.path, 128))
    assert first.max_length == longest < 128
    assert glue.cached_features(processor, SAMPLE_GLUE, "dev", tok, 128, str(tmp_path)).max_length == longest
    assert feature_cache._safe("my task/v2:é") == "my_task_v2_"  # pylint: disable=protected-access


def test_a_processor_without_a_regression_flag_classifies(tmp_path):
    class Labels(glue.DataProcessor):
        labels = ("x", "y", "z")

    class Scores(glue.DataProcessor):
        is_regression = True

    assert Labels.task_name is None and Labels().get_labels() == ["x", "y", "z"] and Labels().num_labels == 3
    assert Scores().get_labels() == [None] and Scores().num_labels == 1


def test_regression_records_and_texts_helper(tmp_path, tok):
    features = glue.cached_features(glue.get_processor("sts-b"), SAMPLE_GLUE, "train", tok, 32, str(tmp_path))
    record = _records(features.path, 32, regression=True)[0]
    assert record["label_ids"].dtype == np.float32 and record["label_ids"] == 5.0
    arrays = glue.features_from_texts(tok, ["A plane is taking off."], ["An air plane is taking off."], 32)
    np.testing.assert_array_equal(arrays["input_ids"][0], record["input_ids"])
    np.testing.assert_array_equal(arrays["segment_ids"][0], record["segment_ids"])
    single = glue.features_from_texts(tok, ["A plane is taking off.", "Fine."])  # one text each, 128 tokens
    assert single["input_ids"].shape == (2, 128) and single["input_ids"].dtype == np.int32
    np.testing.assert_array_equal(single["input_ids"][1], encode_pair(tok, "Fine.", None, 128)[0])
    assert not single["segment_ids"].any()


# ------------------------------------------------------------------------------------------- pipelines
@pytest.fixture(scope="module")
def sst2_records(tmp_path_factory, tok):
    cache = str(tmp_path_factory.mktemp("sst2_cache"))
    processor = glue.get_processor("sst-2")
    return {split: glue.cached_features(processor, SAMPLE_GLUE, split, tok, 64, cache) for split in ("train", "dev")}


@pytest.mark.parametrize("max_seq_length", [7, 8, 64, 65, 128, 512])
def test_length_buckets_step_by_8_to_64_then_by_a_quarter_rounded_to_8(max_seq_length):
    buckets = glue.length_buckets(max_seq_length)
    assert buckets == sorted(set(buckets)) and all(b % 8 == 0 for b in buckets)
    small = [b for b in buckets if b <= 64]
    assert small == list(range(8, min(64, max_seq_length) + 1, 8))  # the edge itself included
    for before, after in zip(buckets[len(small) - 1:], buckets[len(small):]):
        assert after == int(before * 1.25) // 8 * 8
    following = (buckets[-1] + 8 if buckets[-1] < 64 else int(buckets[-1] * 1.25) // 8 * 8) if buckets else 8
    assert following > max_seq_length
    if max_seq_length == 128:
        assert buckets[-3:] == [80, 96, 120]


def test_train_batches_are_padded_to_their_longest(sst2_records):
    path = sst2_records["train"].path
    dataset = glue.train_dataset(path, 64, 8, regression=False, seed=3)
    widths = []
    for features, labels in dataset.take(30):
        mask = features["input_mask"].numpy()
        assert mask.shape[0] == 8 and labels.shape == (8,)
        assert mask.sum(axis=1).max() == mask.shape[1]  # the longest example fills the batch exactly
        lengths = mask.sum(axis=1)
        bucket = np.searchsorted(glue.length_buckets(64), lengths, side="right")
        assert len(set(bucket)) == 1  # one length bucket per batch
        widths.append(mask.shape[1])
    assert max(widths) < 64 and len(set(widths)) > 3
    # Every iterator gives the same batches (resuming skips batches), and seeds matter.
    again = [f["input_ids"].numpy() for f, _ in glue.train_dataset(path, 64, 8, False, seed=3).skip(5).take(2)]
    first = [f["input_ids"].numpy() for f, _ in dataset.skip(5).take(2)]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    other = next(iter(glue.train_dataset(path, 64, 8, False, seed=4)))[0]["input_ids"].numpy()
    assert other.shape != first[0].shape or not np.array_equal(other, first[0])
    # TPU layout: padded to max_seq_length, full batches.
    static = next(iter(glue.train_dataset(path, 64, 8, False, seed=3, static_shapes=True)))[0]
    assert static["input_ids"].shape == (8, 64)


def test_train_batches_without_bucketing_or_padding_and_after_a_resume(sst2_records):
    path = sst2_records["train"].path
    first = [f["input_ids"].numpy() for f, _ in glue.train_dataset(path, 64, 8, False, seed=3).take(4)]
    explicit = next(iter(glue.train_dataset(path, 64, 8, False, seed=3, skip_batches=0)))[0]["input_ids"].numpy()
    np.testing.assert_array_equal(explicit, first[0])
    resumed = next(iter(glue.train_dataset(path, 64, 8, False, seed=3, skip_batches=3)))[0]["input_ids"].numpy()
    np.testing.assert_array_equal(resumed, first[3])
    assert b"false" not in parallel_stage_orders(glue.train_dataset(path, 64, 8, False, seed=3))
    # without bucketing: the shuffled order's consecutive examples, each batch padded to its longest
    fixed = [f["input_ids"].numpy() for f, _ in glue.train_dataset(path, 64, 8, False, seed=3,
                                                                   dynamic_padding=False).take(5)]
    assert all(batch.shape == (8, 64) for batch in fixed)
    unbucketed = list(glue.train_dataset(path, 64, 8, False, seed=3, bucketing=False).take(5))
    for (features, labels), full in zip(unbucketed, fixed):
        width = features["input_ids"].shape[1]
        assert width == features["input_mask"].numpy().sum(axis=1).max() < 64 and labels.shape == (8,)
        np.testing.assert_array_equal(features["input_ids"].numpy(), full[:, :width])
    assert sorted(glue.model_inputs({**unbucketed[0][0], "label_ids": unbucketed[0][1]})) == [
        "input_ids", "input_mask", "segment_ids"]


def test_eval_batches_cover_every_example_once(sst2_records):
    features = sst2_records["dev"]
    dataset = glue.eval_dataset(features.path, 64, 16, False, features.num_examples, window_batches=2)
    assert int(dataset.cardinality()) == 7
    assert parallel_stage_orders(dataset) and b"false" not in parallel_stage_orders(dataset)  # file order kept
    indices = []
    for batch in dataset:
        lengths = batch["input_mask"].numpy().sum(axis=1)
        assert lengths.max() == batch["input_mask"].shape[1]
        indices.extend(batch["example_index"].numpy())
    assert sorted(i for i in indices if i >= 0) == list(range(100)) and indices.count(-1) == 12
    widths = [b["input_ids"].shape[1] for b in glue.eval_dataset(features.path, 64, 16, False, 100)]
    assert max(widths) < 64  # padded to each batch's longest by default
    static = list(glue.eval_dataset(features.path, 64, 16, False, 100, dynamic_padding=False))
    assert len(static) == 7 and all(b["input_ids"].shape == (16, 64) for b in static)
    last = static[-1]
    assert list(last["example_index"].numpy()[4:]) == [-1] * 12
    assert list(last["is_real_example"].numpy()[4:]) == [0] * 12


@pytest.mark.slow
def test_predictions_identical_with_and_without_dynamic_padding(sst2_records, tiny_config, tmp_path):
    """A classifier trained until its logits depend on the text (so reading the padding would show) predicts the
    same with batches padded to their longest example, to max_seq_length (the TPU layout) and one unpadded example
    at a time; attending to the padding (input_mask all ones), the negative control, changes the logits a lot."""
    # pylint: disable=import-outside-toplevel
    from albert_tf.tasks.classification import ClassifierParams, build_classifier, run_classifier
    from albert_tf.train.ordered_prediction import predict_in_order

    out = tmp_path / "trained"
    run_classifier(ClassifierParams(
        albert_config=tiny_config, output_dir=str(out), task_name="sst-2", data_dir=SAMPLE_GLUE,
        spm_model_file=os.path.join(REPO_ROOT, "data", "30k-clean.model"), max_seq_length=64, do_train=True,
        train_batch_size=16, learning_rate=1e-3, train_step=300, warmup_step=30, save_checkpoints_steps=300,
        iterations_per_loop=100, log_every=0))
    model = build_classifier(tiny_config, 2)
    tf.train.Checkpoint(model=model).read(str(out / "ckpt-300")).assert_existing_objects_matched().expect_partial()

    features = sst2_records["dev"]
    outputs = {}
    for name, options in {"dynamic": {}, "max_length": {"dynamic_padding": False}}.items():
        outputs[name] = predict_in_order(
            model, lambda context, options=options: glue.eval_dataset(
                features.path, 64, 16, False, features.num_examples, window_batches=2, input_context=context,
                **options),
            features.num_examples, 16, glue.FEATURE_NAMES)
    records = [{k: v.astype(np.int32) for k, v in r.items()} for r in _records(features.path, 64)]
    lengths = [int(r["input_mask"].sum()) for r in records]
    assert min(lengths) < 32 and max(lengths) < 64  # every batch of max_seq_length has padding to ignore
    unpadded = np.concatenate([model({k: r[k][None, :n] for k in glue.FEATURE_NAMES}, training=False).numpy()
                               for r, n in zip(records, lengths)])
    ones = model({"input_ids": np.stack([r["input_ids"] for r in records]),
                  "input_mask": np.ones((len(records), 64), np.int32),
                  "segment_ids": np.stack([r["segment_ids"] for r in records])}, training=False).numpy()
    change = np.abs(ones - unpadded).max(axis=-1)
    assert change.max() > 0.5 and np.median(change) > 1e-2  # >> the 1e-5 tolerance: the padding would show
    assert np.ptp(unpadded, axis=0).min() > 1.0  # a trained model: its logits vary with the text
    for name, logits in outputs.items():
        assert logits.shape == (100, 2)
        np.testing.assert_allclose(logits, unpadded, rtol=0, atol=1e-5, err_msg=name)
        np.testing.assert_array_equal(logits.argmax(-1), unpadded.argmax(-1), err_msg=name)
