"""Error messages point at the right place: a byte that is not UTF-8 in a GLUE/CSV file is reported on its own
line (not the first line of the chunk being decoded), and `predict.py` names the file and line of an input line
that is not UTF-8 or that is longer than the model accepts, as one line with exit status 1."""

import pytest

from tests.helpers import assert_one_line_error, run_script

BAD_LINE = 151


def _tsv_with_a_bad_byte(path, bad_line=BAD_LINE, lines=400, newline=b"\n"):
    """A SST-2 style TSV (header + rows) whose line `bad_line` holds a byte that is not UTF-8; rows long enough
    that the bad line is well past the first decode chunk."""
    rows = [b"sentence\tlabel"] + [b"a fine and rather long sentence number %d, written to fill the decoder's "
                                   b"buffer\t%d" % (i, i % 2) for i in range(2, lines + 1)]
    rows[bad_line - 1] = b"caf\xe9 au lait, in Latin-1\t1"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(newline.join(rows) + newline)
    return str(path)


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_glue_bad_byte_names_its_own_line(tmp_path, newline):
    from albert_tf.data import glue

    path = _tsv_with_a_bad_byte(tmp_path / "SST-2" / "dev.tsv", newline=newline)
    with pytest.raises(glue.MalformedRowError) as raised:
        glue.get_processor("sst-2").get_dev_examples(str(tmp_path))
    assert raised.value.line == BAD_LINE and raised.value.path == path
    assert f"{path}, line {BAD_LINE}: not valid UTF-8" in str(raised.value)
    assert "column 4" in str(raised.value)


def test_csv_processor_bad_byte_names_its_own_line(tmp_path):
    from albert_tf.data import glue

    path = _tsv_with_a_bad_byte(tmp_path / "train.tsv", bad_line=2, lines=3)
    with pytest.raises(glue.MalformedRowError, match=r"train.tsv, line 2: not valid UTF-8"):
        glue.CsvProcessor(train_file=path).get_train_examples(None)
    # on the first line, the column counts from the text, not from the byte-order mark
    bom = tmp_path / "bom.tsv"
    bom.write_bytes(b"\xef\xbb\xbfcaf\xe9\tlabel\nfine\t1\n")
    with pytest.raises(glue.MalformedRowError, match=r"bom.tsv, line 1: not valid UTF-8 \(byte 0xe9 at column 4:"):
        glue.CsvProcessor(train_file=str(bom)).get_train_examples(None)


def test_glue_bad_byte_from_a_gfile_path(tmp_path):
    """Paths with a scheme are read whole through tf.io.gfile: the same message, not a traceback."""
    from albert_tf.data import glue

    path = _tsv_with_a_bad_byte(tmp_path / "SST-2" / "dev.tsv")
    with pytest.raises(glue.MalformedRowError, match=rf", line {BAD_LINE}: not valid UTF-8"):
        list(glue.read_rows("file://" + path))


# ---------------------------------------------------------------------------------------------------------------
# predict.py

MAX_WORDS = 8


@pytest.fixture(scope="module")
def word_export(tmp_path_factory):
    """A tiny SavedModel with a `text` signature that, unlike this project's exports, does not truncate: it
    splits each text into words and refuses more than MAX_WORDS with the check the real exports use ("sequence
    length exceeds max_position_embeddings"). Returns its directory."""
    import tensorflow as tf

    from albert_tf.serving.savedmodel import checked_ids

    class Words(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def text(self, text):
            words = tf.strings.split(text)
            ids = checked_ids(tf.strings.to_hash_bucket_fast(words, 100).to_tensor(default_value=-1), MAX_WORDS)
            return {"words": tf.reduce_sum(tf.cast(ids >= 0, tf.int32), axis=1)}

    module = Words()
    directory = str(tmp_path_factory.mktemp("word_export") / "export")
    tf.saved_model.save(module, directory, signatures={"text": module.text})
    return directory


@pytest.mark.slow
def test_predict_names_a_line_that_is_not_utf8(word_export, tmp_path):
    path = tmp_path / "lines.txt"
    path.write_bytes(b"one\ntwo words\n\nfour\ncaf\xe9\nsix\n")
    result = run_script("predict.py", [f"--export_dir={word_export}", f"--input_file={path}",
                                       f"--output_file={tmp_path / 'out.jsonl'}"])
    line = assert_one_line_error(result, f"{path}:5:", "UTF-8", status=1)
    assert line.startswith("predict.py: error: ") and "column 4" in line
    assert not (tmp_path / "out.jsonl").exists()
    # a TF Serving request body too
    request = tmp_path / "request.json"
    request.write_bytes(b'{"instances":\r\n  ["caf\xe9"]}\r\n')
    result = run_script("predict.py", [f"--export_dir={word_export}", f"--request_json={request}"])
    assert_one_line_error(result, f"{request}:2:", "UTF-8", status=1)


@pytest.mark.slow
def test_predict_names_a_line_too_long_for_the_model(word_export, tmp_path):
    path = tmp_path / "lines.txt"
    lines = ["short one", "two", "", "a b c d e f g h i j k l", "fine again"]  # line 4: 12 words > MAX_WORDS
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run_script("predict.py", [f"--export_dir={word_export}", f"--input_file={path}", "--batch_size=4",
                                       f"--output_file={tmp_path / 'out.jsonl'}"])
    line = assert_one_line_error(result, f"{path}:4:", f"sequence length exceeds max_position_embeddings "
                                                        f"({MAX_WORDS})", status=1)
    assert line.startswith("predict.py: error: ")
    assert not (tmp_path / "out.jsonl").exists()


def test_predict_blames_the_export_when_it_refuses_even_an_empty_text():
    """A preprocessing export whose rows are longer than the encoder takes refuses every line: the message says
    so rather than naming the first line."""
    from albert_tf.serving import batch_prediction

    class RefusesAll:
        def predict(self, texts_a, texts_b=None):
            raise batch_prediction.InputRefused("sequence length exceeds max_position_embeddings (128)")

    class RefusesLong:
        def predict(self, texts_a, texts_b=None):
            if any(len(t) > 3 for t in texts_a + (texts_b or [])):
                raise batch_prediction.InputRefused("sequence length exceeds max_position_embeddings (3)")

    refused_example = batch_prediction._refused_example  # pylint: disable=protected-access
    refused = batch_prediction.InputRefused("sequence length exceeds max_position_embeddings (128)")
    error = refused_example(RefusesAll(), [("a",), ("b",)], [3, 5], "in.txt", "export/pre", refused)
    assert str(error) == ("export/pre refuses every input, even an empty text: sequence length exceeds "
                          "max_position_embeddings (128)")
    error = refused_example(RefusesLong(), [("a", "b"), ("c", "long")], [3, 5], "in.txt", "export/pre", refused)
    assert str(error) == "in.txt:5: sequence length exceeds max_position_embeddings (3)"
