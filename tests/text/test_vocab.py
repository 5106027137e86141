"""Vocabulary training (`albert_tf.text.vocab`, `create_vocab.py`): the original's recipe and special ids, lowercasing,
the bounded seeded sample, identical bytes for identical inputs, WordPiece read by `FullTokenizer`, one-line errors,
and a vocabulary carried through records -> pretraining -> export -> predict.py."""

import bz2
import collections
import glob
import gzip
import json
import os
import re
import time

import pytest
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2

from albert_tf import fileio, guard
from albert_tf.errors import DataError, UsageError
from albert_tf.text import vocab
from albert_tf.text.tokenization import FullTokenizer
from tests.helpers import (DATA_DIR, SPM, assert_one_line_error, assert_recorded, run_script, tiny_config,
                           write_config)

CORPUS = os.path.join(DATA_DIR, "corpus", "*.txt")
SMALL = {"vocab_size": 800}
SAMPLE = 2000


def _proto(path_or_bytes):
    proto = sentencepiece_model_pb2.ModelProto()
    if isinstance(path_or_bytes, bytes):
        proto.ParseFromString(path_or_bytes)
    else:
        with open(path_or_bytes, "rb") as f:
            proto.ParseFromString(f.read())
    return proto


def _corpus_lines():
    lines = []
    for path in sorted(glob.glob(CORPUS)):
        with open(path, "rb") as f:
            lines += [t for t in (b.decode("utf-8", "ignore").strip() for b in f.read().split(b"\n")) if t]
    return lines


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    prefix = str(tmp_path_factory.mktemp("vocab") / "small")
    result = vocab.create_vocab(CORPUS, prefix, vocab.SentencePieceOptions(**SMALL), input_sentence_size=SAMPLE)
    return prefix, result


# ----------------------------------------------------------------- the recipe
def test_the_defaults_are_the_recipe_stored_in_30k_clean():
    original = _proto(SPM)
    spec = original.trainer_spec
    options = vocab.SentencePieceOptions()
    assert options.vocab_size == spec.vocab_size == 30000
    assert options.model_type.upper() == sentencepiece_model_pb2.TrainerSpec.ModelType.Name(spec.model_type)
    assert options.character_coverage == pytest.approx(spec.character_coverage)
    assert vocab.DEFAULT_INPUT_SENTENCE_SIZE == spec.input_sentence_size and spec.shuffle_input_sentence
    assert (options.pad_id, options.unk_id, options.bos_id, options.eos_id) == (
        spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id)
    assert options.control_symbols == tuple(spec.control_symbols)
    assert options.user_defined_symbols == tuple(spec.user_defined_symbols)
    assert (options.num_threads, options.max_sentence_length, options.max_sentencepiece_length) == (
        spec.num_threads, spec.max_sentence_length, spec.max_sentencepiece_length)


def test_a_trained_model_has_the_special_ids_of_30k_clean(trained):
    prefix, result = trained
    original, ours = _proto(SPM), _proto(prefix + ".model")
    head = len(vocab.USER_DEFINED_SYMBOLS) + 5
    assert [(p.piece, p.type) for p in ours.pieces[:head]] == [(p.piece, p.type) for p in original.pieces[:head]]
    assert [p.piece for p in ours.pieces[:5]] == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert len(ours.pieces) == SMALL["vocab_size"] == result.size
    assert ours.normalizer_spec.name == original.normalizer_spec.name == "nmt_nfkc"
    assert ours.trainer_spec.input_sentence_size == SAMPLE and ours.trainer_spec.model_prefix == "small"
    assert ours.trainer_spec.shuffle_input_sentence  # as spm_train records its sampled input
    assert list(ours.trainer_spec.input) == sorted(glob.glob(CORPUS))
    tokenizer = FullTokenizer(spm_model_file=prefix + ".model")
    assert [tokenizer.token_id(t) for t in ("[CLS]", "[SEP]", "[MASK]")] == [2, 3, 4] and tokenizer.pad_id == 0
    assert "<unk>" not in tokenizer.tokenize("The captain's whale, 1,000 miles away.")
    with open(prefix + ".vocab", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    assert [r[0] for r in rows] == [p.piece for p in ours.pieces]
    assert [float(r[1]) for r in rows] == pytest.approx([p.score for p in ours.pieces], rel=1e-5)
    assert "learned from 2000 of" in result.summary() and prefix + ".model" in result.summary()


def test_the_special_layout_check_names_a_wrong_layout():
    proto = _proto(SPM)
    proto.pieces[2].piece, proto.pieces[3].piece = "[SEP]", "[CLS]"
    with pytest.raises(DataError, match="first pieces"):
        vocab.check_special_layout(proto.SerializeToString())
    vocab.check_special_layout(_proto(SPM).SerializeToString())


def test_the_vocabulary_is_learned_on_lowercased_text(trained, tmp_path):
    prefix, _ = trained
    pieces = [p.piece for p in _proto(prefix + ".model").pieces if p.type == p.NORMAL]
    assert len(pieces) > 700 and not [p for p in pieces if p != p.lower()]
    cased = vocab.create_vocab(CORPUS, str(tmp_path / "cased"), vocab.SentencePieceOptions(vocab_size=400),
                               input_sentence_size=500, do_lower_case=False)
    assert [p.piece for p in _proto(cased.paths["model"]).pieces if p.piece != p.piece.lower()]


def test_the_script_lowercases_by_default(tmp_path):
    """create_vocab.py without --do_lower_case learns lower-case pieces only (the library on the same sample with
    do_lower_case=False learns cased ones, test above); --nodo_lower_case keeps the case."""
    pieces = {}
    for name, args in (("default", []), ("cased", ["--nodo_lower_case"])):
        result = run_script("create_vocab.py", [f"--input_file={CORPUS}", f"--model_prefix={tmp_path}/{name}",
                                                "--vocab_size=400", "--input_sentence_size=500", *args])
        assert result.returncode == 0, result.stderr[-3000:]
        pieces[name] = [p.piece for p in _proto(f"{tmp_path}/{name}.model").pieces if p.type == p.NORMAL]
    assert len(pieces["default"]) > 300 and not [p for p in pieces["default"] if p != p.lower()]
    assert [p for p in pieces["cased"] if p != p.lower()]


def test_sentences_are_preprocessed_as_the_tokenizer_does():
    assert vocab.preprocess_sentences(["  Caf\u00e9   DÉJÀ vu ", "\u0301"]) == ["cafe deja vu"]
    assert vocab.preprocess_sentences(["Café"], do_lower_case=False) == ["Cafe"]


# ----------------------------------------------------------------- the sample
def test_the_reservoir_holds_at_most_its_capacity_and_is_seeded():
    sampler = vocab.ReservoirSampler(10, seed=1)
    for i in range(1000):
        sampler.add(i)
        assert len(sampler.items) <= 10
    assert sampler.seen == 1000 and len(set(sampler.items)) == 10
    again = vocab.ReservoirSampler(10, seed=1)
    other = vocab.ReservoirSampler(10, seed=2)
    for i in range(1000):
        again.add(i)
        other.add(i)
    assert again.sample() == sampler.sample() and other.items != sampler.items
    with pytest.raises(UsageError):
        vocab.ReservoirSampler(0)


def test_the_reservoir_sample_is_uniform():
    n, k, trials = 50, 5, 4000
    counts = collections.Counter()
    for seed in range(trials):
        sampler = vocab.ReservoirSampler(k, seed=seed)
        for i in range(n):
            sampler.add(i)
        counts.update(sampler.items)
    expected = trials * k / n  # 400 per item
    chi2 = sum((counts[i] - expected) ** 2 / expected for i in range(n))
    assert chi2 < 95  # 49 degrees of freedom: p < 1e-4 for a uniform sample
    first, last = sum(counts[i] for i in range(10)), sum(counts[i] for i in range(n - 10, n))
    assert abs(first - last) < 0.1 * first


def test_the_sample_skips_blank_lines_and_reads_compressed_files(tmp_path):
    text = "One sentence.\nTwo sentences.\n\n   \nA new document.\n"
    (tmp_path / "a.txt").write_text(text, encoding="utf-8")
    with gzip.open(tmp_path / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write(text.upper())
    with bz2.open(tmp_path / "c.txt.bz2", "wt", encoding="utf-8") as f:
        f.write(text.replace("One", "Third"))
    files = fileio.expand_globs(f"{tmp_path}/*.txt,{tmp_path}/*.gz,{tmp_path}/*.bz2")
    sample, stats = vocab.sample_sentences(files, 100, seed=0)
    assert stats.sentences_seen == 9 and stats.files == 3 and len(sample) == 9
    assert "ONE SENTENCE." in sample and "Third sentence." in sample and "" not in sample
    bounded, stats = vocab.sample_sentences(files, 4, seed=0)
    assert len(bounded) == 4 and stats.sentences_seen == 9 and set(bounded) <= set(sample)


def test_the_corpus_sample_is_bounded_and_seeded():
    files = fileio.expand_globs(CORPUS)
    lines = _corpus_lines()
    sample, stats = vocab.sample_sentences(files, 100, seed=7)
    assert len(sample) == 100 and stats.sentences_seen == len(lines) and set(sample) <= set(lines)
    assert vocab.sample_sentences(files, 100, seed=7)[0] == sample
    assert vocab.sample_sentences(files, 100, seed=8)[0] != sample


def test_the_same_input_and_seed_give_the_same_model_bytes(tmp_path):
    def train(name, seed):
        result = vocab.create_vocab(CORPUS, str(tmp_path / name / "v"), vocab.SentencePieceOptions(vocab_size=400),
                                    input_sentence_size=800, seed=seed)
        with open(result.paths["model"], "rb") as f:
            return f.read()

    first = train("a", 5)
    assert train("b", 5) == first
    assert train("c", 6) != first


# ----------------------------------------------------------------- WordPiece
@pytest.mark.slow
def test_a_wordpiece_vocabulary_is_read_by_full_tokenizer_as_by_tensorflow_text(tmp_path):
    import tensorflow as tf
    import tensorflow_text as tf_text

    result = vocab.create_vocab(CORPUS, str(tmp_path / "wp"), vocab.SentencePieceOptions(
        vocab_size=1000, model_type="wordpiece"), input_sentence_size=1500)
    path = result.paths["vocab"]
    assert path == str(tmp_path / "wp.txt") and os.path.exists(path)
    with open(path, encoding="utf-8") as f:
        tokens = f.read().splitlines()
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and len(tokens) == result.size
    assert any(t.startswith("##") for t in tokens) and not [t for t in tokens[5:] if t != t.lower()]
    ours = FullTokenizer(vocab_file=path, do_lower_case=True)
    theirs = tf_text.BertTokenizer(path, lower_case=True, token_out_type=tf.string, unknown_token="[UNK]")
    texts = ["The Whale, said Captain Ahab!", "Miss Woodhouse was 21 years old; Émile wasn't.",
             "unbelievably-long_words and (parentheses)"]
    for text in texts:
        expected = [t.decode("utf-8") for t in theirs.tokenize([text]).merge_dims(1, 2).to_list()[0]]
        assert ours.tokenize(text) == expected, text
    assert ours.pad_id == 0 and ours.token_id("[MASK]") == 4


# ----------------------------------------------------------------- the script's errors
@pytest.mark.slow
def test_bad_inputs_are_one_line(tmp_path):
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\x00\x01\x02" * 100)
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("just a few words\n", encoding="utf-8")
    mine = tmp_path / "mine.vocab"
    mine.write_text("my own vocabulary\n", encoding="utf-8")
    cases = [
        ([f"--input_file={tmp_path}/none-*.txt", f"--model_prefix={tmp_path}/v"], ["none-*.txt"]),
        ([f"--input_file={binary}", f"--model_prefix={tmp_path}/v"], [str(binary), "binary"]),
        ([f"--input_file={tiny}", f"--model_prefix={tmp_path}/v", "--vocab_size=1000"],
         ["Vocabulary size", "--vocab_size"]),
        ([f"--input_file={mine}", f"--model_prefix={tmp_path}/mine"], ["--model_prefix", str(mine)]),
        ([f"--input_file={tiny}", f"--model_prefix={tmp_path}/v", "--input_sentence_size=0"],
         ["--input_sentence_size"]),
        ([f"--model_prefix={tmp_path}/v"], ["--input_file"]),
    ]
    for args, names in cases:
        result = run_script("create_vocab.py", args)
        assert_one_line_error(result, *names)
    assert sorted(os.listdir(tmp_path)) == ["binary.txt", "mine.vocab", "tiny.txt"]
    assert mine.read_text(encoding="utf-8") == "my own vocabulary\n"


# ----------------------------------------------------------------- the chain
@pytest.mark.slow
def test_a_new_vocabulary_runs_through_records_pretraining_export_and_predict(tmp_path):
    """The chain a user runs, each step reading the last one's outputs by a glob over their folder: every step's
    settings record lies there too and is never read as data (JSON read as text or as records would fail)."""
    prefix = str(tmp_path / "vocab" / "v2k")
    args = [f"--input_file={CORPUS}", f"--model_prefix={prefix}", "--vocab_size=2000", "--input_sentence_size=3000"]
    result = run_script("create_vocab.py", args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"reading input: .*MB/s", result.stderr) and "wrote " + prefix + ".model" in result.stderr
    assert_recorded(prefix + ".settings.json", "create_vocab.py", args)
    model = prefix + ".model"
    assert spm.SentencePieceProcessor(model_file=model).get_piece_size() == 2000

    corpus = tmp_path / "corpus"
    args = [f"--input_file={os.path.join(DATA_DIR, 'corpus', 'sample_text.txt')}", f"--output_file={corpus}/sample.txt"]
    result = run_script("prepare_corpus.py", args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(os.listdir(corpus)) == ["sample.txt", "sample.txt.settings.json"]
    assert_recorded(corpus / "sample.txt.settings.json", "prepare_corpus.py", args)

    records = tmp_path / "records"
    args = [f"--input_file={corpus}/*", f"--output_dir={records}", f"--spm_model_file={model}", "--max_seq_length=32",
            "--max_predictions_per_seq=5", "--dupe_factor=1", "--num_workers=1"]
    result = run_script("create_pretraining_data.py", args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"wrote \d+ instances from \d+ documents .*, 1 files, ", result.stderr), result.stderr[-3000:]
    assert_recorded(records / "settings.json", "create_pretraining_data.py", args)

    config = write_config(tiny_config(vocab_size=2000, max_position_embeddings=32), tmp_path / "config.json")
    export = tmp_path / "export"
    result = run_script("run_pretraining.py", [
        f"--input_file={records}/*", f"--albert_config_file={config}", f"--output_dir={tmp_path / 'out'}",
        "--max_seq_length=32", "--max_predictions_per_seq=5", "--train_batch_size=2", "--num_train_steps=2",
        "--num_warmup_steps=1", "--save_checkpoints_steps=2", "--iterations_per_loop=1",
        f"--spm_model_file={model}", f"--export_dir={export}"])
    assert result.returncode == 0, result.stderr[-3000:]
    encoder = [p for p in glob.glob(str(export / "*")) if os.path.exists(os.path.join(p, "saved_model.pb"))]
    assert len(encoder) == 1, os.listdir(export)

    preprocessing = tmp_path / "preprocessing"
    args = ["--export_type=preprocessing", f"--spm_model_file={model}", "--max_seq_length=32",
            f"--export_dir={preprocessing}"]
    result = run_script("export_model.py", args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_recorded(tmp_path / "preprocessing.settings.json", "export_model.py", args)
    texts = ["The whale swam under the ship.", "Emma Woodhouse, handsome, clever, and rich."]
    inputs = tmp_path / "texts.txt"
    inputs.write_text("".join(t + "\n" for t in texts), encoding="utf-8")

    ids_file = tmp_path / "ids.jsonl"
    args = [f"--export_dir={preprocessing}", f"--input_file={inputs}", f"--output_file={ids_file}",
            "--outputs=input_ids"]
    result = run_script("predict.py", args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_recorded(tmp_path / "ids.jsonl.settings.json", "predict.py", args)
    tokenizer = FullTokenizer(spm_model_file=model)
    for text, line in zip(texts, ids_file.read_text(encoding="utf-8").splitlines()):
        expected = [2] + tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text)) + [3]
        got = json.loads(line)["input_ids"]
        assert got[:len(expected)] == expected and not any(got[len(expected):])
        assert 1 not in expected  # no <unk>: the corpus's own words

    pooled = tmp_path / "pooled.jsonl"
    result = run_script("predict.py", [f"--export_dir={preprocessing}", f"--encoder_dir={encoder[0]}",
                                       f"--input_file={inputs}", f"--output_file={pooled}"])
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(line) for line in pooled.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 2 and all(len(r["pooled_output"]) == 32 for r in rows)


def test_a_protected_input_at_the_second_output_is_refused_before_the_first_is_written(tmp_path):
    """`<prefix>.vocab` that is an input of the run in progress is refused before `<prefix>.model` is written."""
    kept = tmp_path / "v.vocab"
    kept.write_text("the user's vocabulary")
    with fileio.inputs_protected([("--vocab_file", str(kept))]), \
            pytest.raises(UsageError, match="would overwrite the input --vocab_file"):
        vocab.create_vocab(CORPUS, str(tmp_path / "v"), vocab.SentencePieceOptions(**SMALL),
                           input_sentence_size=SAMPLE)
    assert os.listdir(tmp_path) == ["v.vocab"] and kept.read_text() == "the user's vocabulary"


# ----------------------------------------------------------------- reading, progress, the trainer's log
def test_lines_across_blocks_and_a_last_line_without_newline_are_read_whole(tmp_path, monkeypatch):
    """Blocks of 7 bytes cut lines anywhere: each line still comes back whole, invalid UTF-8 dropped, the last one
    read without its newline; `on_block` hears the bytes read so far after each block."""
    monkeypatch.setattr(vocab, "_READ_BLOCK", 7)
    path = tmp_path / "cut.txt"
    path.write_bytes(b"first line here\n\nsecond \xff line\n  third, no newline \xfe")
    seen = []
    assert list(vocab.read_lines(str(path), seen.append)) == ["first line here", "second  line", "third, no newline"]
    assert seen == sorted(seen) and seen[0] == 7 and seen[-1] == path.stat().st_size


def test_a_binary_input_is_refused_naming_it(tmp_path):
    path = tmp_path / "model.bin"
    path.write_bytes(b"\x00\x01binary\n")
    with pytest.raises(DataError, match=f"input file '{path}' looks binary"):
        list(vocab.read_lines(str(path)))


def test_a_remote_input_is_sized_and_read_through_tf_io_gfile():
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    path = "ram://vocab_test/remote.txt"
    with tf.io.gfile.GFile(path, "wb") as f:
        f.write(b"Remote one.\nRemote two.\n")
    sample, stats = vocab.sample_sentences([path], 10, seed=0)
    assert sorted(sample) == ["Remote one.", "Remote two."] and stats.input_bytes == 24


def test_a_reservoir_that_never_filled_is_shuffled_and_one_item_is_a_sample():
    sampler = vocab.ReservoirSampler(100, seed=3)
    for i in range(50):
        sampler.add(i)
    sample = sampler.sample()
    assert sorted(sample) == list(range(50)) and sample != list(range(50))
    single = vocab.ReservoirSampler(1, seed=0)
    for i in range(5):
        single.add(i)
    assert len(single.sample()) == 1


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_progress_lines_are_spaced_by_the_interval_and_tell_rate_and_time_left(monkeypatch, caplog):
    clock = _Clock()
    monkeypatch.setattr(vocab.time, "monotonic", clock)
    progress = vocab.Progress("reading input", 4e6, "MB", 1e6, interval=10.0)
    with caplog.at_level("INFO", logger=vocab.logger.name):
        clock.now = 105.0
        progress.update(1e6, "file 1/2")  # 5 s after the start: too soon
        clock.now = 110.0
        progress.update(1e6, "file 1/2")
        clock.now = 115.0
        progress.update(3e6)  # 5 s after the last line
        progress.update(4e6, "done", force=True)
        vocab.Progress("off", 1, interval=0).update(1, force=True)
    assert [r.getMessage() for r in caplog.records] == [
        "reading input: 1.0/4.0 MB (0.1 MB/s), file 1/2, about 30 s left",
        "reading input: 4.0/4.0 MB (0.3 MB/s), done",
    ]


def test_the_sample_and_preprocessing_report_progress_as_they_go(tmp_path, monkeypatch, caplog):
    """With no interval every block and every 4,096th sentence is reported (here in bytes and sentences), the files
    counted cumulatively."""
    monkeypatch.setattr(vocab, "_READ_BLOCK", 16)
    monkeypatch.setattr(vocab.Progress, "__init__", _no_interval(vocab.Progress.__init__))
    for name in ("a", "b"):
        (tmp_path / f"{name}.txt").write_text("x" * 20 + "\n" + "y" * 11 + "\n", encoding="utf-8")  # 33 bytes
    files = [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    with caplog.at_level("INFO", logger=vocab.logger.name):
        started = vocab.time.monotonic()
        _, stats = vocab.sample_sentences(files, 10, seed=0)
        took = vocab.time.monotonic() - started
        vocab.preprocess_sentences(["A b."] * 4097)
    lines = [r.getMessage() for r in caplog.records]
    done = [float(re.match(r"reading input: ([\d.]+)/66.0 MB", line).group(1)) for line in lines
            if line.startswith("reading input")]
    assert done == sorted(done) and done[-1] == 66 and any(33 < d < 66 for d in done), lines
    assert any("file 2/2" in line for line in lines) and lines[len(done) - 1].endswith("2/2 files, 4 sentences")
    assert [line.split(" (")[0] for line in lines[len(done):]] == ["preprocessing: 0.0/4097.0 k sentences",
                                                                     "preprocessing: 4096.0/4097.0 k sentences"]
    assert 0 <= stats.seconds <= took


def _no_interval(init):
    def patched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.line.due, self.scale = lambda elapsed, force=False: True, 1.0
    return patched


def test_the_trainers_log_lines_reach_stderr_while_it_runs_and_its_dumps_do_not(capfd):
    open_fds = len(os.listdir("/proc/self/fd"))
    with vocab._StderrToLog():  # pylint: disable=protected-access
        os.write(2, b"I1204 12:00:00 trainer.cc(1)] step 1\n  a dump line\nI1204 12:00:01 trainer.cc(2)] par")
        for _ in range(40):
            shown = capfd.readouterr().err
            if shown:
                break
            time.sleep(0.1)
        os.write(2, b"tial\nI1204 12:00:02 trainer.cc(3)] last")
    assert shown == "I1204 12:00:00 trainer.cc(1)] step 1\n"  # while running: whole log lines only
    assert capfd.readouterr().err == "I1204 12:00:01 trainer.cc(2)] partial\nI1204 12:00:02 trainer.cc(3)] last\n"
    os.write(2, b"after the trainer\n")  # stderr is the process's own again, and nothing is left open
    assert capfd.readouterr().err == "after the trainer\n" and len(os.listdir("/proc/self/fd")) == open_fds


@pytest.mark.parametrize("options, message", [
    ({"vocab_size": 1}, r"--vocab_size=1: must be at least 2"),
    ({"character_coverage": 0.0}, r"--character_coverage=0.0: must be in \(0, 1\]"),
    ({"character_coverage": 1.01}, r"--character_coverage=1.01: must be in \(0, 1\]"),
])
def test_the_trainer_settings_hold_their_bounds(options, message):
    guard.check_params(vocab.SentencePieceOptions(vocab_size=2, character_coverage=1.0))
    with pytest.raises(UsageError, match=f"^{message}$"):
        guard.check_params(vocab.SentencePieceOptions(**options))


class _Sampled(Exception):
    """Raised in place of reading the corpus: the arguments passed every check before it."""


@pytest.mark.parametrize("arguments, message", [
    ({"options": vocab.SentencePieceOptions(vocab_size=5)}, r"^--vocab_size=5: must be larger than 5$"),
    ({"input_sentence_size": 0}, r"^--input_sentence_size=0: must be positive"),
    ({"model_prefix": "vocab/"}, r"^--model_prefix='vocab/': give a path prefix"),
    ({"model_prefix": ""}, r"^--model_prefix='': give a path prefix"),
    ({"options": vocab.SentencePieceOptions(model_type="bytes")}, r"^--model_type=bytes: must be one of unigram"),
])
def test_the_trainers_arguments_are_checked_before_the_corpus_is_read(arguments, message, tmp_path, monkeypatch):
    def sampled(*_args, **_kwargs):
        raise _Sampled

    monkeypatch.setattr(vocab, "sample_sentences", sampled)
    given = {"model_prefix": str(tmp_path / "v"), "options": vocab.SentencePieceOptions(vocab_size=6),
             "input_sentence_size": 1}
    with pytest.raises(_Sampled):  # the smallest accepted values
        vocab.create_vocab(CORPUS, **given)
    with pytest.raises(UsageError, match=message):
        vocab.create_vocab(CORPUS, **{**given, **arguments})


def test_an_output_that_is_an_input_is_refused_before_reading(tmp_path):
    mine = tmp_path / "mine.vocab"
    mine.write_text("my own vocabulary\n", encoding="utf-8")
    with pytest.raises(UsageError, match=f"--model_prefix \\(vocab\\) {mine} would overwrite the input "
                                         f"--input_file {mine}"):
        vocab.create_vocab(str(mine), str(tmp_path / "mine"))
    assert os.listdir(tmp_path) == ["mine.vocab"]


def test_too_little_text_for_the_default_size_is_sentencepieces_error_naming_the_flag(tmp_path, caplog):
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("just a few words\n", encoding="utf-8")
    with caplog.at_level("INFO", logger=vocab.logger.name), pytest.raises(DataError) as raised:
        vocab.create_vocab(str(tiny), str(tmp_path / "v"))
    assert re.fullmatch(r"SentencePiece cannot train on this input: Vocabulary size too high \(30000\)\..* "
                        r"\(--vocab_size: give more text or a smaller size\)", str(raised.value)), str(raised.value)
    messages = [r.getMessage() for r in caplog.records]
    assert "sampled 1 of 1 sentences from 1 files (0.0 MB) in" in messages[-2]
    assert messages[-1] == "training a unigram SentencePiece model of 30000 pieces on 1 sentences"
    assert os.listdir(tmp_path) == ["tiny.txt"]


def test_the_trainer_alone_takes_the_original_recipe_by_default():
    with pytest.raises(DataError, match=r"Vocabulary size too high \(30000\)"):
        vocab.train_sentencepiece(["a few words to learn from"] * 20)


def test_other_special_ids_skip_the_original_layout_check(tmp_path):
    result = vocab.create_vocab(CORPUS, str(tmp_path / "v"), vocab.SentencePieceOptions(
        vocab_size=400, pad_id=1, unk_id=0), input_sentence_size=500)
    assert [p.piece for p in _proto(result.paths["model"]).pieces[:2]] == ["<unk>", "<pad>"]


def test_other_control_symbols_skip_the_original_layout_check(tmp_path):
    started = time.monotonic()
    result = vocab.create_vocab(CORPUS, str(tmp_path / "v"), vocab.SentencePieceOptions(
        vocab_size=400, control_symbols=("[CLS]", "[SEP]")), input_sentence_size=500)
    took = time.monotonic() - started
    assert [p.piece for p in _proto(result.paths["model"]).pieces[:4]] == ["<pad>", "<unk>", "[CLS]", "[SEP]"]
    assert 0 < result.seconds <= took and result.size == 400


def test_a_small_wordpiece_vocabulary_is_written_with_the_reserved_tokens_first(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(vocab.Progress, "__init__", _no_interval(vocab.Progress.__init__))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"the whale number {i} swam past captain ahab's ship\n" for i in range(5000)),
                      encoding="utf-8")
    with caplog.at_level("INFO", logger=vocab.logger.name):
        started = time.monotonic()
        result = vocab.create_vocab(str(corpus), str(tmp_path / "wp"), vocab.SentencePieceOptions(
            vocab_size=60, model_type="wordpiece"), input_sentence_size=5000)
        assert 0 < result.seconds <= time.monotonic() - started
    assert result.paths == {"vocab": str(tmp_path / "wp.txt")}
    with open(result.paths["vocab"], encoding="utf-8") as f:
        tokens = f.read().splitlines()
    assert tokens[:5] == list(vocab.WORDPIECE_RESERVED) and len(tokens) == result.size > 5
    assert {"whale", "captain", "the"} <= set(tokens)
    counting = [r.getMessage().split(" (")[0] for r in caplog.records if r.getMessage().startswith("counting")]
    assert counting[:2] == ["counting words: 0.0/5000.0 k sentences", "counting words: 4096.0/5000.0 k sentences"]
    with pytest.raises(DataError, match="too little text to learn a WordPiece vocabulary"):
        vocab.train_wordpiece(["", " "], vocab_size=60)


def test_only_the_start_of_a_file_is_sniffed_for_binary(tmp_path, monkeypatch):
    """As file(1) does: a NUL byte after the first block is read as text (invalid bytes dropped), not refused."""
    monkeypatch.setattr(vocab, "_READ_BLOCK", 8)
    path = tmp_path / "late.txt"
    path.write_bytes(b"one line\nanother \x00 line\n")
    assert list(vocab.read_lines(str(path))) == ["one line", "another \x00 line"]


def test_the_sample_ends_with_a_progress_line_however_short_it_took(tmp_path, caplog):
    (tmp_path / "a.txt").write_text("One.\nTwo.\n", encoding="utf-8")
    with caplog.at_level("INFO", logger=vocab.logger.name):
        vocab.sample_sentences([str(tmp_path / "a.txt")], 10, progress_interval=1000.0)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("reading input")]
    assert len(lines) == 1 and lines[0].endswith(", 1/1 files, 2 sentences"), lines
