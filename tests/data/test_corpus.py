"""albert_tf.data.corpus and prepare_corpus.py: readers (formats, compression, documents), sentence splitting
(English, Chinese, Japanese), cleaning counts and duplicates, shards (names, atomicity, determinism, read by
create_pretraining_data), and the script's summary and one-line errors."""

import bz2
import dataclasses
import gzip
import json
import os
import random
import sys

import pytest

from albert_tf import fileio
from albert_tf.data import corpus
from albert_tf.data.corpus import cleaning, readers, sentences, writer
from albert_tf.errors import DataError, UsageError
from tests.helpers import SPM, assert_one_line_error, run_script

TEXT = ("The first document starts here.\nIts second line is wrapped.\n\n"
        "The second document. It has two sentences.\n\n\n"
        "Third one.\n")
RECORDS = [{"text": "Paragraph one. Still one.\n\nParagraph two.", "id": 1},
           {"text": "Another document.", "id": 2}]


def _write(path, data, compression=None):
    data = data.encode("utf-8") if isinstance(data, str) else data
    opener = {None: open, "gz": gzip.open, "bz2": bz2.open}[compression]
    with opener(path, "wb") as f:
        f.write(data)
    return str(path)


def _jsonl(records):
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def _docs(path, **kwargs):
    return [(d.line, d.paragraphs) for d in readers.CorpusFile(str(path), **kwargs).documents()]


# Readers.

@pytest.mark.parametrize("compression", [None, "gz", "bz2"])
def test_text_documents_are_blank_line_blocks_in_any_compression(tmp_path, compression):
    name = "in.txt" + (f".{compression}" if compression else "")
    path = _write(tmp_path / name, TEXT, compression)
    assert _docs(path) == [(1, ["The first document starts here.\nIts second line is wrapped."]),
                           (4, ["The second document. It has two sentences."]), (7, ["Third one."])]


@pytest.mark.parametrize("compression", [None, "gz", "bz2"])
def test_jsonl_blank_line_in_a_text_is_a_paragraph_break(tmp_path, compression):
    name = "in.jsonl" + (f".{compression}" if compression else "")
    path = _write(tmp_path / name, _jsonl(RECORDS), compression)
    assert _docs(path) == [(1, ["Paragraph one. Still one.", "Paragraph two."]), (2, ["Another document."])]


def test_document_per_file_makes_blank_lines_paragraph_breaks(tmp_path):
    path = _write(tmp_path / "book.txt", TEXT)
    docs = _docs(path, document_per_file=True)
    assert len(docs) == 1 and docs[0][1] == [
        "The first document starts here.\nIts second line is wrapped.",
        "The second document. It has two sentences.", "Third one."]


def test_format_follows_the_extension_unless_given(tmp_path):
    json_text = _jsonl(RECORDS)
    assert _docs(_write(tmp_path / "a.json", json_text))[1] == (2, ["Another document."])
    as_text = _docs(_write(tmp_path / "b.txt", json_text))
    assert as_text[0][1][0].startswith('{"text"')  # .txt is text even if it holds JSON
    assert _docs(tmp_path / "b.txt", input_format_flag="jsonl")[1] == (2, ["Another document."])
    assert _docs(_write(tmp_path / "wiki_00", json_text))[1] == (2, ["Another document."])  # sniffed
    assert _docs(_write(tmp_path / "c.jsonl", "Plain.\n"), input_format_flag="text") == [(1, ["Plain."])]
    assert _docs(_write(tmp_path / "d.jsonl.gz", '{"body": "x y."}\n', "gz"), text_field="body") == [(1, ["x y."])]


def test_bad_input_names_file_and_line(tmp_path):
    bad_json = _write(tmp_path / "bad.jsonl", _jsonl(RECORDS[:1]) + "{not json\n")
    with pytest.raises(DataError, match=r"bad\.jsonl:2: not a JSON object"):
        _docs(bad_json)
    no_field = _write(tmp_path / "nofield.jsonl", '{"body": "x"}\n')
    with pytest.raises(DataError, match=r"nofield\.jsonl:1: no 'text' field \(found: body\)"):
        _docs(no_field)
    binary = _write(tmp_path / "bin.txt", b"\x00\x01\x02" * 100)
    with pytest.raises(DataError, match=r"bin\.txt looks binary"):
        _docs(binary)
    late_nul = _write(tmp_path / "late.txt", "fine.\n" * 20000 + "bad\x00line\n")
    with pytest.raises(DataError, match=r"late\.txt:20001: binary data"):
        _docs(late_nul)
    broken_gz = _write(tmp_path / "broken.txt.gz", gzip.compress(TEXT.encode() * 1000)[:500])
    with pytest.raises(DataError, match=r"cannot read input file .*broken\.txt\.gz"):
        _docs(broken_gz)


# Sentences.

def test_english_splits_at_sentence_ends_not_abbreviations_or_numbers():
    text = ("Dr. Smith moved to the U.S. in 1990, e.g. for work. He paid $3.5 million for No. 7 Main Street. "
            "Was it worth it? Yes!")
    assert sentences.split_sentences(text) == [
        "Dr. Smith moved to the U.S. in 1990, e.g. for work.", "He paid $3.5 million for No. 7 Main Street.",
        "Was it worth it?", "Yes!"]


def test_chinese_and_japanese_split_at_their_own_sentence_ends():
    assert sentences.split_sentences("他问道：“你为什么不早点告诉我？”她低下头，没有回答。真好！我们走吧") == [
        "他问道：“你为什么不早点告诉我？”", "她低下头，没有回答。", "真好！", "我们走吧"]
    assert sentences.split_sentences("今日は晴れです。「はい。」そうです。") == ["今日は晴れです。", "「はい。」", "そうです。"]
    assert sentences.split_sentences("他来了。Then he left. 好。") == ["他来了。", "Then he left.", "好。"]


def _cjk_reference(text):
    """A character loop: cut after each run of 。！？｡ and the closing quotes or brackets after it, but at the end."""
    ends, closers = "。！？｡", "」』”’）》〉】〕\"')]"
    pieces, start, i = [], 0, 0
    while i < len(text):
        if text[i] not in ends:
            i += 1
            continue
        while i < len(text) and text[i] in ends:
            i += 1
        while i < len(text) and text[i] in closers:
            i += 1
        if i < len(text):
            pieces.append(text[start:i])
            start = i
    return pieces + [text[start:]]


def test_a_cjk_sentence_end_is_cut_wherever_it_is():
    """Next to the end of the text too: one character after it is a sentence of its own."""
    assert sentences.split_sentences("真好！我") == ["真好！", "我"]
    assert sentences.split_sentences("真好！”我") == ["真好！”", "我"]
    assert sentences.split_sentences("真好！") == ["真好！"] and sentences.split_sentences("真好！”") == ["真好！”"]
    assert sentences.split_sentences("！我") == ["！", "我"] and sentences.split_sentences("我") == ["我"]
    rng = random.Random(3)
    alphabet = "我们好。！？｡」”）'a "
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        assert sentences.cjk_pieces(text) == _cjk_reference(text), text
        assert sentences.split_sentences(text) == [p.strip() for p in _cjk_reference(text) if p.strip()], text


def test_pysbd_can_stand_in_for_bling_fire():
    pytest.importorskip("pysbd")
    split = sentences.splitter("pysbd")
    assert split("Dr. Smith arrived. He sat down. 他来了。好！") == [
        "Dr. Smith arrived.", "He sat down.", "他来了。", "好！"]
    # The sentences keep their characters (pysbd's clean=True would drop the tags).
    assert split("<b>Bold</b> text. Next one.") == ["<b>Bold</b> text.", "Next one."]


def test_a_missing_splitter_is_a_usage_error_before_any_work(monkeypatch):
    monkeypatch.setattr(sentences, "_breakers", {})
    monkeypatch.setitem(sys.modules, "blingfire", None)  # `import blingfire` raises ImportError
    with pytest.raises(UsageError, match="Bling Fire is not available.*--sentence_splitter=pysbd"):
        sentences.splitter("blingfire")  # when the splitter is chosen, not at the first paragraph
    with pytest.raises(UsageError, match="--sentence_splitter=spacy: must be one of blingfire, pysbd"):
        sentences.splitter("spacy")


# Cleaning.

def test_cleaning_counts_and_drops_empty_short_and_duplicate_documents():
    cleaner = cleaning.Cleaner(cleaning.CleaningOptions(min_document_chars=10))
    kept = [cleaner.clean(p) for p in (["A  long\tenough\u00a0document."], ["  \n "], ["short"],
                                       ["A long\nenough  document."], ["Another long document."])]
    assert kept == [["A long enough document."], None, None, None, ["Another long document."]]
    assert dict(cleaner.counts) == {"read": 5, "empty": 1, "short": 1, "duplicate": 1, "kept": 2}
    assert all(isinstance(d, bytes) and len(d) == 16 for d in cleaner._seen)  # pylint: disable=protected-access


def test_each_cleaning_step_can_be_turned_off():
    docs = (["A  spaced\x07 doc."], ["A  spaced\x07 doc."], ["x"])
    cleaner = cleaning.Cleaner(cleaning.CleaningOptions(normalize_whitespace=False, deduplicate=False))
    assert [cleaner.clean(d) for d in docs] == [["A  spaced\x07 doc."], ["A  spaced\x07 doc."], ["x"]]
    assert cleaning.normalize("a\nb\u2028c", normalize_whitespace=False) == "a b c"  # never a line break


# Pipeline and shards.

def _corpus(tmp_path):
    docs = [{"text": f"Document {i} opens here. It says {i * 7} things.\n\nA second paragraph {i}."}
            for i in range(12)]
    docs.insert(5, dict(docs[2]))  # a duplicate
    _write(tmp_path / "a.jsonl.gz", _jsonl(docs), "gz")
    _write(tmp_path / "b.txt.bz2", "Short.\n\n" + "".join(f"Plain doc {i}. Two sentences.\n\n" for i in range(5)),
           "bz2")
    return [str(tmp_path / "a.jsonl.gz"), str(tmp_path / "b.txt.bz2")]


def _read(paths):
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            out.append(f.read())
    return out


def test_prepare_corpus_writes_documents_round_robin_and_counts(tmp_path):
    inputs = _corpus(tmp_path)
    seen = []
    stats = corpus.prepare_corpus(inputs, str(tmp_path / "out" / "c.txt"), num_shards=3, progress_every=1,
                                  cleaning=corpus.CleaningOptions(min_document_chars=10), progress=seen.append)
    names = [f"c-0000{i}-of-00003.txt" for i in range(3)]
    assert sorted(os.listdir(tmp_path / "out")) == names  # no staging folder left
    assert stats.outputs == [str(tmp_path / "out" / n) for n in names]
    assert (stats.documents_read, stats.dropped_short, stats.dropped_duplicate, stats.documents_written) == (
        19, 1, 1, 17)
    shards = _read(stats.outputs)
    assert shards[0].startswith("Document 0 opens here.\nIt says 0 things.\nA second paragraph 0.\n\n"
                                "Document 3 opens here.\n")
    assert sum(s.count("\n\n") + 1 for s in shards) == 17 and not any(s.endswith("\n\n") for s in shards)
    assert stats.sentences_written == sum(len(s.splitlines()) - s.count("\n\n") for s in shards)
    assert seen[-1].files_done == 2 and seen[-1].bytes_done == seen[-1].bytes_total > 0


def test_shard_size_and_single_file(tmp_path):
    inputs = _corpus(tmp_path)
    single = corpus.prepare_corpus(inputs, str(tmp_path / "one.txt"))
    assert single.outputs == [str(tmp_path / "one.txt")]
    sized = corpus.prepare_corpus(inputs, str(tmp_path / "s"), num_shards=0, shard_bytes=300)
    assert len(sized.outputs) > 2 and sized.outputs[0].endswith(f"s-00000-of-{len(sized.outputs):05d}.txt")
    assert "\n".join(_read(sized.outputs)) == _read(single.outputs)[0]  # same documents, same order
    assert all(len(s.encode()) < 300 + 120 for s in _read(sized.outputs))


def test_output_is_deterministic_for_any_number_of_workers(tmp_path, monkeypatch):
    from albert_tf.data.corpus import pipeline  # pylint: disable=import-outside-toplevel

    monkeypatch.setattr(pipeline, "_BATCH_DOCUMENTS", 2)  # several batches in flight
    inputs = _corpus(tmp_path)
    first = _read(corpus.prepare_corpus(inputs, str(tmp_path / "x" / "c"), num_shards=2).outputs)
    second = _read(corpus.prepare_corpus(inputs, str(tmp_path / "y" / "c"), num_shards=2).outputs)
    parallel = corpus.prepare_corpus(inputs, str(tmp_path / "z" / "c"), num_shards=2, num_workers=2)
    assert first == second == _read(parallel.outputs)
    assert parallel.documents_written == 18 and parallel.dropped_duplicate == 1


def test_a_failed_run_leaves_no_shard(tmp_path):
    inputs = _corpus(tmp_path) + [_write(tmp_path / "z_bad.jsonl", "{oops\n")]
    with pytest.raises(DataError, match="z_bad.jsonl:1"):
        corpus.prepare_corpus(inputs, str(tmp_path / "out" / "c"), num_shards=2)
    assert not os.path.exists(tmp_path / "out") or os.listdir(tmp_path / "out") == []  # nor a staging folder


def test_shards_are_read_by_create_pretraining_data(tmp_path):
    from albert_tf.data.pretraining import PretrainingConfig, create_pretraining_data  # pylint: disable=import-outside-toplevel

    stats = corpus.prepare_corpus(_corpus(tmp_path), str(tmp_path / "c"), num_shards=2)
    records = create_pretraining_data(str(tmp_path / "c-*"), [str(tmp_path / "r.tfrecord")], spm_model_file=SPM,
                                      config=PretrainingConfig(max_seq_length=32, max_predictions_per_seq=5,
                                                               dupe_factor=1), num_workers=1)
    assert records.files == 2 and records.documents == stats.documents_written and records.instances > 0


def test_writer_names(tmp_path):
    assert writer.shard_paths("/d/c.txt", 1) == ["/d/c.txt"]
    assert writer.shard_paths("/d/c.txt", 2) == ["/d/c-00000-of-00002.txt", "/d/c-00001-of-00002.txt"]
    assert writer.shard_pattern("/d/c.txt").match("c-00007-of-00010.txt")


def test_shards_are_checked_together_so_a_refused_one_leaves_none_published(tmp_path):
    """A shard that would replace a protected input is refused before any shard is published: no half corpus."""
    second = tmp_path / "c-00001-of-00002.txt"
    second.write_text("the user's file")
    with fileio.inputs_protected([("--input_file", str(second))]), \
            pytest.raises(UsageError, match="would overwrite the input --input_file"), \
            writer.ShardWriter(str(tmp_path / "c.txt"), num_shards=2) as shards:
        shards.write(["One."])
        shards.write(["Two."])
    assert sorted(os.listdir(tmp_path)) == ["c-00001-of-00002.txt"] and second.read_text() == "the user's file"


# The script (each run is a fresh process).

def test_script_writes_shards_and_reports_counts(tmp_path):
    inputs = _corpus(tmp_path)
    result = run_script("prepare_corpus.py", [f"--input_file={tmp_path}/*.gz,{tmp_path}/*.bz2",
                                              f"--output_file={tmp_path}/out/c", "--num_output_shards=2",
                                              "--min_document_chars=10"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(os.listdir(tmp_path / "out")) == ["c-00000-of-00002.txt", "c-00001-of-00002.txt", "c.settings.json"]
    assert "dropped 0 empty, 1 shorter than --min_document_chars, 1 exact duplicates" in result.stderr
    assert "wrote 17 documents" in result.stderr
    library = corpus.prepare_corpus(inputs, str(tmp_path / "lib" / "c"), num_shards=2,
                                    cleaning=corpus.CleaningOptions(min_document_chars=10))
    assert _read(library.outputs) == _read(fileio.expand_globs(f"{tmp_path}/out/*"))  # a glob skips the record


def test_script_defaults_by_what_they_do(tmp_path):
    """prepare_corpus.py's own defaults, none of its optional flags given (docs/corpus.md's table): documents under
    50 characters after normalising dropped (--min_document_chars=50), whitespace runs made one space, exact
    duplicates dropped, the input format by extension, one output file; the library's own default keeps short
    documents (min_document_chars 0)."""
    short = "Too short by one. It has 49 characters, no more!!"
    kept = "Just long enough. It has fifty characters, exactly"
    assert (len(short), len(kept)) == (49, 50)
    spaced = kept.replace("Just long", "Just \t  long")
    text = _write(tmp_path / "in.txt", f"{short}\n\n{spaced}\n\n{kept}\n")
    lines = _write(tmp_path / "more.jsonl", _jsonl([{"text": "From JSON Lines, chosen by its name. Long enough too."}]))
    result = run_script("prepare_corpus.py", [f"--input_file={text},{lines}", f"--output_file={tmp_path}/out/c.txt"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "dropped 0 empty, 1 shorter than --min_document_chars, 1 exact duplicates" in result.stderr
    assert sorted(os.listdir(tmp_path / "out")) == ["c.txt", "c.txt.settings.json"]
    assert _read([tmp_path / "out" / "c.txt"]) == [
        "Just long enough.\nIt has fifty characters, exactly\n\nFrom JSON Lines, chosen by its name.\nLong enough too.\n"]
    library = corpus.prepare_corpus([text], str(tmp_path / "lib.txt"))
    assert library.documents_written == 2 and _read([tmp_path / "lib.txt"])[0].startswith("Too short by one.\n")


def test_script_bad_json_line_is_one_line_naming_file_and_line(tmp_path):
    bad = _write(tmp_path / "dump.jsonl", _jsonl(RECORDS) + '{"title": "no text"}\n')
    result = run_script("prepare_corpus.py", [f"--input_file={bad}", f"--output_file={tmp_path}/out.txt"])
    assert_one_line_error(result, "dump.jsonl:3", "'text'", status=1)
    assert not os.path.exists(tmp_path / "out.txt")


def test_script_refuses_an_output_that_is_an_input(tmp_path):
    path = _write(tmp_path / "in.txt", TEXT)
    result = run_script("prepare_corpus.py", [f"--input_file={path}", f"--output_file={path}"])
    assert_one_line_error(result, "--output_file", "in.txt", status=2)
    assert _read([path]) == [TEXT]


def test_cleaning_defaults_normalise_and_blank_paragraphs_go():
    """The project's own defaults, pinned by what they do: whitespace normalised and controls dropped unless asked
    otherwise; a paragraph left blank by cleaning is dropped from its document, not kept as an empty line."""
    assert cleaning.normalize("a \t b\x01 ") == "a b"
    assert cleaning.Cleaner().clean(["x  y\x01", "   ", "\ufeff", "z"]) == ["x y", "z"]
    kept_as_is = cleaning.Cleaner(cleaning.CleaningOptions(normalize_whitespace=False))
    assert kept_as_is.clean(["x  y", "", "z\nw"]) == ["x  y", "z w"]


# The readers' edges (readers.py's mutation survivors).

def test_the_extension_under_the_compression_decides_the_format(tmp_path):
    line = json.dumps({"text": "A braced line."})
    assert _docs(_write(tmp_path / "a.txt.gz", line + "\n", "gz")) == [(1, [line])]  # .txt: text, braces or not
    assert readers.input_format("b.jsonl.bz2", b"plain words") == "jsonl"
    assert readers.input_format("c.data.gz", b"  {") == "jsonl" and readers.input_format("c.data", b"x") == "text"


@pytest.mark.parametrize("body, binary", [
    (b"\t\n\x0b\x0c\r" * 200 + b"words", False),  # tabs, line and page breaks are text
    (b"\x01" * 6 + b"a" * 94, True),  # 6 % control bytes
    (b"\x1f" * 6 + b"a" * 94, True),
    (b"\x08" * 6 + b"a" * 94, True),
    (b"\x0e" * 6 + b"a" * 94, True),
    (b"\x7f" * 6 + b"a" * 94, True),
    (b"\x01" * 5 + b"a" * 95, False),  # 5 % is still text
    (b"\x01" + b"a" * 99, False),
])
def test_text_with_more_than_5_percent_control_bytes_is_refused_as_binary(tmp_path, body, binary):
    path = _write(tmp_path / "in.txt", body)
    if binary:
        with pytest.raises(DataError, match=r"looks binary \(6 control bytes in the first 100\)"):
            _docs(path)
    else:
        assert _docs(path)


def test_progress_is_zero_before_and_after_reading_and_grows_while_reading(tmp_path):
    path = _write(tmp_path / "in.txt", TEXT * 2000)
    corpus_file = readers.CorpusFile(path)
    assert corpus_file.format is None and corpus_file.bytes_read == 0
    documents = corpus_file.documents()
    next(documents)
    assert corpus_file.format == "text" and corpus_file.bytes_read > 0
    assert sum(1 for _ in documents) == 4000 and corpus_file.bytes_read == 0  # copies join at their seams


def test_damaged_input_and_a_json_array_say_what_is_wrong(tmp_path):
    whole = gzip.compress(TEXT.encode() * 50)
    path = _write(tmp_path / "cut.txt.gz", whole[:len(whole) // 2])
    with pytest.raises(DataError, match=r"cannot read input file .*cut.txt.gz: Compressed file ended before"):
        _docs(path)
    array = _write(tmp_path / "a.jsonl", '[\n  {"text": "x"}\n]\n')  # a pretty-printed JSON array
    with pytest.raises(DataError, match=r"a.jsonl:1: not a JSON object: .*\(a JSON array\? give JSON Lines"):
        _docs(array)
    assert _docs(_write(tmp_path / "b.jsonl", '{"text": "x"}\n')) == [(1, ["x"])]


def test_a_remote_corpus_file_is_read_through_tensorflows_file_system():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    path = "ram://corpus-reader/in.txt"
    with tf.io.gfile.GFile(path, "wb") as f:
        f.write(TEXT.encode())
    assert readers.file_size(path) == len(TEXT.encode())
    assert [d.line for d in readers.CorpusFile(path).documents()] == [1, 4, 7]


# The shard writer (writer.py's mutation survivors).

def test_one_shard_by_default_and_documents_round_robin_over_a_fixed_count(tmp_path):
    single = writer.ShardWriter(str(tmp_path / "one.txt"))
    assert single.paths == []  # nothing published before the block ends
    with single as shards:
        shards.write(["A.", "B."])
        shards.write(["C."])
    assert single.paths == [str(tmp_path / "one.txt")] and (tmp_path / "one.txt").read_text() == "A.\nB.\n\nC.\n"
    with writer.ShardWriter(str(tmp_path / "rr.txt"), num_shards=3) as shards:
        for k in range(7):
            shards.write([f"Doc {k}.", "End."])
    texts = [open(p, encoding="utf-8").read() for p in shards.paths]
    assert texts == ["Doc 0.\nEnd.\n\nDoc 3.\nEnd.\n\nDoc 6.\nEnd.\n", "Doc 1.\nEnd.\n\nDoc 4.\nEnd.\n",
                     "Doc 2.\nEnd.\n\nDoc 5.\nEnd.\n"]
    assert (shards.documents, shards.sentences) == (7, 14)
    assert shards.bytes_written == sum(len(t.encode()) for t in texts)


def test_a_size_capped_shard_closes_once_it_holds_the_size(tmp_path):
    with writer.ShardWriter(str(tmp_path / "s.txt"), num_shards=0, shard_bytes=10) as shards:
        shards.write(["12345678."])  # 10 bytes: the shard holds the size, the next document starts a new one
        shards.write(["1234."])  # 6 bytes
        shards.write(["12."])  # 1 + 4 bytes: 11 in all, reached by the document that passes the size
        shards.write(["Last."])
    assert [os.path.basename(p) for p in shards.paths] == ["s-00000-of-00003.txt", "s-00001-of-00003.txt",
                                                           "s-00002-of-00003.txt"]
    assert [open(p, encoding="utf-8").read() for p in shards.paths] == ["12345678.\n", "1234.\n\n12.\n", "Last.\n"]
    with writer.ShardWriter(str(tmp_path / "t.txt"), num_shards=0, shard_bytes=10) as shards:
        shards.write(["1234567."])  # 9 bytes: one short of the size, so the next document joins it
        shards.write(["X."])
    assert [open(p, encoding="utf-8").read() for p in shards.paths] == ["1234567.\n\nX.\n"]


def test_shards_reach_a_remote_file_system_whole_or_not_at_all():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    base = "ram://corpus-writer"
    with writer.ShardWriter(f"{base}/ok.txt", num_shards=2) as shards:
        shards.write(["One."])
        shards.write(["Two."])
    assert [tf.io.gfile.GFile(p).read() for p in shards.paths] == ["One.\n", "Two.\n"]
    with writer.ShardWriter(f"{base}/ok.txt", num_shards=2) as shards:  # replaced; the second shard empty
        shards.write(["Three."])
    assert [tf.io.gfile.GFile(p).read() for p in shards.paths] == ["Three.\n", ""]
    renames = []
    rename = tf.io.gfile.rename
    with pytest.MonkeyPatch.context() as patch:  # on GCS the staging placeholder exists: it must be replaced
        patch.setattr(tf.io.gfile, "rename", lambda a, b, overwrite=False: (renames.append(overwrite),
                                                                              rename(a, b, overwrite)))
        with writer.ShardWriter(f"{base}/placeholder.txt") as shards:
            shards.write(["One."])
    assert renames == [True, True]  # the shard onto its placeholder, then the placeholder into place
    with pytest.raises(RuntimeError), writer.ShardWriter(f"{base}/failed.txt", num_shards=2) as shards:
        shards.write(["One."])
        raise RuntimeError("stopped")
    assert not [name for _, _, names in tf.io.gfile.walk(base) for name in names if "failed" in name]



class _FailingClose:
    """A shard's handle whose close fails as a full disk's does (the last buffered bytes not written)."""

    def __init__(self, handle):
        self.handle = handle

    def write(self, data):
        return self.handle.write(data)

    def close(self):
        self.handle.close()
        raise OSError(28, "No space left on device")


def test_a_shard_that_fails_to_close_is_an_error_unless_another_error_is_already_on_its_way(tmp_path):
    """A close that fails loses the shard's last bytes: the writer refuses to publish it (one line naming the
    output); when the block already failed, that first error is the one the user sees."""
    with pytest.raises(fileio.OutputError, match=r"cannot write .*c\.txt: .*No space left"):
        with writer.ShardWriter(str(tmp_path / "c.txt")) as shards:
            shards.write(["One."])
            shards._staged[0][1] = _FailingClose(shards._staged[0][1])
    with pytest.raises(RuntimeError, match="stopped"):
        with writer.ShardWriter(str(tmp_path / "c.txt")) as shards:
            shards.write(["One."])
            shards._staged[0][1] = _FailingClose(shards._staged[0][1])
            raise RuntimeError("stopped")
    assert os.listdir(tmp_path) == []


# The pipeline's progress and summary (pipeline.py's mutation survivors).

def test_progress_is_reported_every_n_documents_after_each_file_and_at_the_end(tmp_path):
    inputs = _corpus(tmp_path)  # 13 documents in the first file, 6 in the second
    seen = []
    stats = corpus.prepare_corpus(inputs, str(tmp_path / "c.txt"), progress_every=5,
                                  progress=lambda s: seen.append(dataclasses.replace(s)))
    assert [(s.files_done, s.documents_read) for s in seen] == [(0, 5), (0, 10), (1, 13), (1, 15), (2, 19)]
    first_size = os.path.getsize(inputs[0])
    done = [s.bytes_done for s in seen]
    assert done == sorted(done) and 0 < done[0] <= first_size == done[2] and done[-1] == stats.bytes_total
    elapsed = [s.elapsed_seconds for s in seen]
    assert elapsed == sorted(elapsed) and 0 < elapsed[-1] <= stats.elapsed_seconds < 600


def test_progress_defaults_to_every_thousand_documents(tmp_path):
    path = _write(tmp_path / "many.txt", "".join(f"Document number {i}.\n\n" for i in range(2001)))
    seen = []
    corpus.prepare_corpus([path], str(tmp_path / "c.txt"), progress=lambda s: seen.append(s.documents_read))
    assert seen == [1000, 2000, 2001]


def test_the_summary_lists_up_to_four_outputs_and_elides_more():
    four = corpus.CorpusStats(outputs=["a", "b", "c", "d"]).summary().splitlines()[-1]
    five = corpus.CorpusStats(outputs=["a", "b", "c", "d", "e"]).summary().splitlines()[-1]
    assert four.endswith("into 4 file(s): a, b, c, d") and five.endswith("into 5 file(s): a ... e")
    assert corpus.CorpusStats().summary().splitlines()[0] == "read 0 files, 0.0 MB, 0 documents in 0.0 s (0.00 MB/s)"


def test_no_document_left_is_one_error_with_the_counts_and_one_document_is_enough(tmp_path):
    path = _write(tmp_path / "in.txt", "Short.\n\n\n\nShort.\n")
    options = corpus.CleaningOptions(min_document_chars=10)
    with pytest.raises(DataError, match=r"no document to write from 1 input file\(s\) \(2 read: 0 empty, 2 short, "
                                        r"0 duplicate\); nothing was written"):
        corpus.prepare_corpus([path], str(tmp_path / "out.txt"), cleaning=options)
    assert os.listdir(tmp_path) == ["in.txt"]
    one = _write(tmp_path / "one.txt", "Just one document here.\n")
    assert corpus.prepare_corpus([one], str(tmp_path / "out.txt")).documents_written == 1


@pytest.mark.parametrize("shards, name", [("--num_output_shards=2", "c-00001-of-00002.txt"),
                                          ("--shard_size_mb=1", "c-00007-of-00009.txt")])
def test_script_refuses_shards_over_an_input_before_reading(tmp_path, shards, name):
    """--output_file's declared check: the shards it names (any count of them with --shard_size_mb) are
    compared with the inputs, which the guard alone (seeing --output_file) cannot."""
    path = _write(tmp_path / name, TEXT)
    result = run_script("prepare_corpus.py", [f"--input_file={path}", f"--output_file={tmp_path}/c.txt", shards])
    assert_one_line_error(result, "--output_file", name, status=2)
    assert _read([path]) == [TEXT] and sorted(os.listdir(tmp_path)) == [name]
