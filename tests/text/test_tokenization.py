"""Python tokenization, SentencePiece mode, on the real `30k-clean.model`, against a restatement of the original's
rules (SST-2 lines with LaTeX quotes); `encode_pair`; file errors."""

import os

import pytest

from albert_tf.text import tokenization
from albert_tf.text.tokenization import (FullTokenizer, TokenizerError, encode_pair, preprocess_lines, preprocess_text,
                                        truncate_seq_pair)
from tests.helpers import DATA_DIR
from tests.text.original_tokenization import (TRICKY_LINES, original_ids, original_preprocess_text,
                                              sst2_lines_with_latex_quotes)

VOCAB_ZH = os.path.join(DATA_DIR, "vocab_chinese.txt")


def ids(tokenizer, text):
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))


def test_known_ids_with_cls_sep(tokenizer):
    # The example of the HF albert-base-v2 documentation, which uses this very model.
    tokens = ["[CLS]"] + tokenizer.tokenize("hello, my dog is cute") + ["[SEP]"]
    assert tokenizer.convert_tokens_to_ids(tokens) == [2, 10975, 15, 51, 1952, 25, 10901, 3]
    input_ids, input_mask, segment_ids = encode_pair(tokenizer, "hello, my dog is cute", max_seq_length=8)
    assert input_ids == [2, 10975, 15, 51, 1952, 25, 10901, 3]
    assert input_mask == [1] * 8 and segment_ids == [0] * 8


def test_special_ids(tokenizer):
    assert [tokenizer.token_id(t) for t in ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")] == [0, 1, 2, 3, 4]
    assert tokenization.SPECIAL_TOKENS == tuple(tokenizer.convert_ids_to_tokens(range(5)))  # the model's first
    assert tokenizer.pad_id == 0 and tokenizer.unk_token == "<unk>" and tokenizer.is_sentencepiece
    assert tokenizer.wordpiece is None and tokenizer.sp_model is not None
    assert tokenizer.convert_ids_to_tokens([2, 10975, 3]) == ["[CLS]", "▁hello", "[SEP]"]
    with pytest.raises(TokenizerError, match="30k-clean.model"):
        tokenizer.token_id("[NOPE]")


def test_uppercase_is_folded(tokenizer, spm_model_file):
    assert tokenizer.tokenize("Hello, My DOG is CUTE") == ["▁hello", ",", "▁my", "▁dog", "▁is", "▁cute"]
    cased = FullTokenizer(spm_model_file=spm_model_file, do_lower_case=False)
    assert cased.tokenize("Hello") != tokenizer.tokenize("Hello")
    assert cased.tokenize("hello") == tokenizer.tokenize("hello")
    # Lower-casing is the default, as in the original (uncased models).
    assert FullTokenizer(spm_model_file=spm_model_file).tokenize("Hello, My DOG") == tokenizer.tokenize("hello, my dog")


def test_wordpiece_mode_names_its_file_and_pads_with_0_without_a_pad_token(tmp_path):
    wordpiece = FullTokenizer(vocab_file=VOCAB_ZH)
    assert wordpiece.wordpiece is not None and not wordpiece.is_sentencepiece and wordpiece.pad_id == 0
    with pytest.raises(TokenizerError, match="vocab_chinese.txt"):
        wordpiece.token_id("[NOPE]")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[UNK]\n[CLS]\n[SEP]\nhello\n", encoding="utf-8")
    small = FullTokenizer(vocab_file=str(vocab))
    assert small.pad_id == 0 and small.convert_tokens_to_ids(small.tokenize("hello")) == [3]


def test_accents_are_stripped(tokenizer):
    # NFKD, then the combining marks go: é -> e, ö -> o, ï -> i, Å -> A -> a.
    assert preprocess_text("Héllo wörld, café naïve Ångström", lower=True) == "hello world, cafe naive angstrom"
    assert tokenizer.tokenize("Héllo wörld, café naïve Ångström") == \
        ["▁hello", "▁world", ",", "▁cafe", "▁naive", "▁", "ang", "strom"]
    # Compatibility characters are decomposed too: the ligature, the vulgar fraction, the circled digit.
    assert tokenizer.tokenize("ﬁne ½ ①,") == ["▁fine", "▁1", "⁄", "2", "▁1", ","]


def test_digits_followed_by_commas(tokenizer):
    sp = tokenizer.sp_model
    # SentencePiece alone keeps a comma glued to some numbers ...
    assert sp.encode("then 23, and", out_type=str) == ["▁then", "▁23,", "▁and"]
    assert sp.encode("1, 2, 3,", out_type=str) == ["▁1,", "▁2,", "▁3,"]
    # ... and the digit-comma rule splits it off, so "23" is the same piece whatever follows it.
    assert tokenizer.tokenize("then 23, and") == ["▁then", "▁23", ",", "▁and"]
    assert tokenizer.tokenize("1, 2, 3,") == ["▁1", ",", "▁2", ",", "▁3", ","]
    assert tokenizer.tokenize("He paid 1,000, then 23, and 4,500,000, more.") == [
        "▁he", "▁paid", "▁1,000", ",", "▁then", "▁23", ",", "▁and", "▁", "4,500", ",", "000", ",", "▁more", "."]
    assert ids(tokenizer, "then 23, and") == [94, 1137, 15, 17]


def test_latex_quotes_are_kept_as_the_original_keeps_them(tokenizer, spm_model_file):
    # The original's preprocess_text has no quote rule: `` is outside the model's vocabulary (<unk>, id 1) and
    # '' two apostrophes. Hugging Face's AlbertTokenizer maps both to ", only on request here.
    assert preprocess_text("he said ``hi'' to me") == "he said ``hi'' to me"
    assert tokenizer.tokenize("he said ``hi'' to me") == [
        "▁he", "▁said", "▁", "``", "hi", "'", "'", "▁to", "▁me"]
    assert ids(tokenizer, "he said ``hi'' to me") == [24, 87, 13, 1, 1822, 22, 22, 20, 55]
    hf_rule = FullTokenizer(spm_model_file=spm_model_file, map_latex_quotes=True)
    assert preprocess_text("he said ``hi'' to me", map_latex_quotes=True) == 'he said "hi" to me'
    assert hf_rule.tokenize("he said ``hi'' to me") == ["▁he", "▁said", "▁", '"', "hi", '"', "▁to", "▁me"]
    assert hf_rule.tokenize("he said ``hi'' to me") == tokenizer.tokenize('he said "hi" to me')
    with pytest.raises(TokenizerError, match="SentencePiece"):
        FullTokenizer(vocab_file=VOCAB_ZH, map_latex_quotes=True)


def test_sst2_sentences_with_latex_quotes_get_the_originals_ids(tokenizer):
    """Every SST-2 line of the shipped sample with `` or '': the classifier's features (`encode_pair`, as the
    original's processors: preprocess_text(lower=True), then encode_pieces) have the ids of the original's rule,
    which differ from those of Hugging Face's quote mapping."""
    lines = sst2_lines_with_latex_quotes()
    assert len(lines) >= 5
    sp_model = tokenizer.sp_model
    for line in lines:
        expected = original_ids(sp_model, original_preprocess_text(line, lower=True))
        assert 1 in expected  # `` is <unk> in the original
        assert ids(tokenizer, line) == expected, line
        input_ids, _, _ = encode_pair(tokenizer, line, max_seq_length=128)
        assert input_ids[:len(expected) + 2] == [2] + expected + [3]
        mapped = original_ids(sp_model, original_preprocess_text(line, lower=True).replace("``", '"')
                              .replace("''", '"'))
        assert mapped != expected


@pytest.fixture(scope="module")
def digit_comma_model():
    """A small SentencePiece model with pieces 30k-clean.model lacks: "9,", "12,", "129," and "912," inside a word
    (no "▁"), and "▁12", so that the digit-comma rule's re-encoding meets both of its cases (a lone "▁" dropped, a
    "▁" cut), each with one and with two pieces."""
    import io  # pylint: disable=import-outside-toplevel

    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    with open(os.path.join(DATA_DIR, "corpus", "sample_text.txt"), encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=300,
                                   user_defined_symbols=["9,", "12,", "\u258112", "129,", "912,"], minloglevel=2)
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def test_the_digit_comma_rule_on_pieces_inside_a_word(digit_comma_model):
    sp = digit_comma_model
    assert sp.encode("a9, b", out_type=str) == ["▁a", "9,", "▁b"] and sp.encode("9", out_type=str) == ["▁", "9"]
    assert sp.encode("a12, b", out_type=str) == ["▁a", "12,", "▁b"] and sp.encode("12", out_type=str) == ["▁12"]
    assert tokenization.encode_pieces(sp, "a9, b") == ["▁a", "9", ",", "▁b"]
    assert tokenization.encode_pieces(sp, "a12, b") == ["▁a", "12", ",", "▁b"]
    assert sp.encode("129", out_type=str) == ["▁12", "9"] and sp.encode("912", out_type=str) == ["▁", "912"]
    assert tokenization.encode_pieces(sp, "a129, b") == ["▁a", "12", "9", ",", "▁b"]
    assert tokenization.encode_pieces(sp, "a912, b") == ["▁a", "912", ",", "▁b"]
    for text in ("a9, b", "a12, b", "12, x", "x 9,", "9,12,", "in 1990, 9,9, 12,12,", "a129, 912,129,"):
        assert [sp.piece_to_id(p) for p in tokenization.encode_pieces(sp, text)] == original_ids(sp, text), text
    assert tokenization.encode_pieces(sp, "a9, b".encode()) == ["▁a", "9", ",", "▁b"]  # bytes are UTF-8 text
    assert tokenization.encode_pieces(sp, b"a9,\xff b") == ["▁a", "9", ",", "▁b"]  # invalid UTF-8 dropped


def test_encode_pieces_samples_only_when_asked(tokenizer):
    text = "the unbelievably understated performances, 1,000, of everyone"
    assert [tokenization.encode_pieces(tokenizer.sp_model, preprocess_text(text, lower=True)) for _ in range(5)] == \
        [tokenizer.tokenize(text)] * 5
    sampled = {tuple(tokenizer.tokenize(text, sample=True)) for _ in range(40)}
    assert len(sampled) > 5  # subword regularisation: other segmentations of the same text
    assert all("".join(pieces) == "".join(tokenizer.tokenize(text)) for pieces in sampled)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("remove_space", [True, False])
def test_preprocess_text_is_the_originals_rule(lower, remove_space):
    lines = list(TRICKY_LINES) + [line.upper() for line in TRICKY_LINES]
    for text in lines + ["\n".join(lines), " a \n\n B\u0301 \n"]:
        assert preprocess_text(text, remove_space, lower) == original_preprocess_text(text, remove_space, lower), text
        assert preprocess_text(text.encode("utf-8"), remove_space, lower) == preprocess_text(text, remove_space, lower)


@pytest.mark.parametrize("options", [dict(lower=True), dict(lower=False), dict(remove_space=False, lower=True),
                                     dict(keep_accents=True, lower=True), dict(map_latex_quotes=True)])
def test_preprocess_lines_is_preprocess_text_line_by_line(options):
    """The bulk form (every line at once) gives each line what `preprocess_text` gives it alone."""
    lines = list(TRICKY_LINES) + [line.upper() for line in TRICKY_LINES] + ["", " "]
    assert preprocess_lines("\n".join(lines), **options) == [preprocess_text(line, **options) for line in lines]
    assert preprocess_text("a\u0301 ``x''\nB", keep_accents=True, map_latex_quotes=True) == 'a\u0301 "x" B'


def test_whitespace_runs_are_folded(tokenizer):
    assert preprocess_text("  a  \t\n b\u3000c\u00a0d \r\n") == "a b c d"
    assert tokenizer.tokenize("  a  \t\n b\u3000c\u00a0d \r\n") == tokenizer.tokenize("a b c d")
    assert tokenizer.tokenize("") == [] and tokenizer.tokenize(" \t\n ") == []


def test_bytes_input_drops_invalid_utf8(tokenizer):
    assert tokenizer.tokenize(b"caf\xc3\xa9 \xff bar") == tokenizer.tokenize("cafe  bar")


def test_missing_and_bad_model_files(tmp_path):
    missing = tmp_path / "nope.model"
    with pytest.raises(TokenizerError, match="SentencePiece model file not found: .*nope.model"):
        FullTokenizer(spm_model_file=str(missing))
    with pytest.raises(TokenizerError, match="SentencePiece model file not found: .*tmp"):
        FullTokenizer(spm_model_file=str(tmp_path))  # a folder
    garbage = tmp_path / "garbage.model"
    garbage.write_bytes(b"this is not a sentencepiece model")
    with pytest.raises(TokenizerError, match="cannot read SentencePiece model .*garbage.model"):
        FullTokenizer(spm_model_file=str(garbage))
    with pytest.raises(TokenizerError, match="spm_model_file"):
        FullTokenizer()
    with pytest.raises(TokenizerError, match="vocab.txt"):
        FullTokenizer(vocab_file=str(tmp_path / "vocab.txt"))


def test_truncate_seq_pair_removes_from_the_longer_end():
    a, b = list("abcdef"), list("xy")
    truncate_seq_pair(a, b, 5)
    assert a == list("abc") and b == list("xy")
    a, b = list("abc"), list("xyz")
    truncate_seq_pair(a, b, 4)  # equal lengths: B loses first, then A
    assert a == list("ab") and b == list("xy")
    a, b = list("ab"), list("vwxyz")
    truncate_seq_pair(a, b, 3)
    assert a == list("ab") and b == list("v")


def test_encode_pair_layout_truncation_and_padding(tokenizer):
    input_ids, input_mask, segment_ids = encode_pair(tokenizer, "hello, my dog is cute", "then 23, and", 16)
    assert input_ids == [2, 10975, 15, 51, 1952, 25, 10901, 3, 94, 1137, 15, 17, 3, 0, 0, 0]
    assert input_mask == [1] * 13 + [0] * 3
    assert segment_ids == [0] * 8 + [1] * 5 + [0] * 3
    # 6 + 4 tokens into 10 - 3 = 7 places: A (longer) loses 2, then the tie costs B one.
    input_ids, input_mask, segment_ids = encode_pair(tokenizer, "hello, my dog is cute", "then 23, and", 10)
    assert input_ids == [2, 10975, 15, 51, 1952, 3, 94, 1137, 15, 3]
    assert segment_ids == [0] * 6 + [1] * 4 and input_mask == [1] * 10
    # A single text keeps its first max_seq_length - 2 tokens.
    assert encode_pair(tokenizer, "hello, my dog is cute", None, 5)[0] == [2, 10975, 15, 51, 3]


def test_encode_pair_empty_second_text_gives_single_layout(tokenizer):
    single = encode_pair(tokenizer, "hello, my dog is cute", None, 12)
    assert encode_pair(tokenizer, "hello, my dog is cute", "", 12) == single
    assert encode_pair(tokenizer, "hello, my dog is cute", "  \t ", 12) == single
    assert single[0][:8] == [2, 10975, 15, 51, 1952, 25, 10901, 3] and single[0][8:] == [0] * 4
    with pytest.raises(ValueError, match="at least 3"):
        encode_pair(tokenizer, "a", "b", 2)


def test_encode_pair_shortest_lengths_and_default(tokenizer):
    """The shortest layouts are allowed (a pair in 3 places, a text in 2), one less is an error; the default
    length is the original's max_seq_length, 128."""
    assert encode_pair(tokenizer, "hello", "dog", 3) == ([2, 3, 0], [1, 1, 0], [0, 0, 0])  # both cut to nothing
    assert encode_pair(tokenizer, "hello", None, 2) == ([2, 3], [1, 1], [0, 0])
    with pytest.raises(ValueError, match="at least 2, got 1"):
        encode_pair(tokenizer, "hello", None, 1)
    ids, mask, segments = encode_pair(tokenizer, "hello", "dog")
    assert len(ids) == len(mask) == len(segments) == 128 and ids[:5] == [2, 10975, 3, 1952, 3]
