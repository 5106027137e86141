"""WordPiece mode on the real BERT Chinese vocabulary (`data/vocab_chinese.txt`), with hand-checked outputs."""

import collections
import os
import string
import unicodedata

import pytest

from albert_tf.text import wordpiece
from albert_tf.text.tokenization import FullTokenizer, TokenizerError, encode_pair

DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "data")
VOCAB_FILE = os.path.join(DATA_DIR, "vocab_chinese.txt")


@pytest.fixture(scope="module")
def zh():
    return FullTokenizer(vocab_file=VOCAB_FILE, do_lower_case=True)


def test_vocabulary_layout(zh):
    assert len(zh.vocab) == 21128 and not zh.is_sentencepiece
    assert [zh.token_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [0, 100, 101, 102, 103]
    assert zh.pad_id == 0 and zh.unk_token == "[UNK]"
    assert zh.convert_ids_to_tokens([101, 2769, 102]) == ["[CLS]", "我", "[SEP]"]
    # The original's attribute names in this mode.
    assert zh.basic_tokenizer.do_lower_case and zh.wordpiece_tokenizer.vocab is zh.vocab


def test_chinese_characters_are_single_tokens(zh):
    tokens = zh.tokenize("我爱北京天安门。")
    assert tokens == ["我", "爱", "北", "京", "天", "安", "门", "。"]
    assert zh.convert_tokens_to_ids(tokens) == [2769, 4263, 1266, 776, 1921, 2128, 7305, 511]
    # CJK extension B is in the CJK ranges (so split), but these two are not in the vocabulary.
    assert zh.tokenize("𠀀𪜀") == ["[UNK]", "[UNK]"]


def test_mixed_chinese_and_english(zh):
    tokens = zh.tokenize("我用iPhone拍了3张照片，很好看！")
    assert tokens == ["我", "用", "iphone", "拍", "了", "3", "张", "照", "片", "，", "很", "好", "看", "！"]
    assert zh.convert_tokens_to_ids(tokens)[:4] == [2769, 4500, 8210, 2864]
    assert zh.tokenize("hello-world, it's 3.14!") == \
        ["hello", "-", "world", ",", "it", "'", "s", "3", ".", "14", "!"]
    # Japanese kana and Korean hangul are not CJK ideographs: no spaces are added around them; NFD splits hangul
    # syllables into jamo.
    assert zh.tokenize("日本語とカタカナ") == ["日", "本", "語", "と", "##カ", "##タ", "##カ", "##ナ"]
    assert zh.tokenize("한국어")[:3] == ["ᄒ", "##ᅡ", "##ᆫ"]


def test_full_width_characters(zh):
    # NFD leaves full-width forms alone (only NFKC/NFKD would fold them); lowercasing does apply.
    assert zh.tokenize("ＡＢＣ１２３，ｘｙｚ") == \
        ["ａ", "##ｂ", "##ｃ", "##１", "##２", "##３", "，", "ｘ", "##ｙ", "##ｚ"]


def test_accented_latin(zh):
    assert zh.tokenize("Café Münchner naïve") == ["cafe", "mu", "##nch", "##ner", "na", "##ive"]
    assert zh.tokenize("e\u0301") == ["e"]  # a combining accent is dropped (category Mn)
    cased = FullTokenizer(vocab_file=VOCAB_FILE, do_lower_case=False)
    # Without lowercasing nothing is stripped, and this uncased vocabulary has none of these words.
    assert cased.tokenize("Café Münchner naïve") == ["[UNK]", "[UNK]", "[UNK]"]


def test_greek_final_sigma(zh):
    assert zh.tokenize("ΟΔΟΣ") == ["ο", "##δ", "##ο", "##ς"]
    assert zh.tokenize("Ω ΣΟΦΙΑ") == ["ω", "σ", "##ο", "##φ", "##ι", "##α"]


def test_control_and_zero_width_characters(zh):
    # Zero-width space/joiner and BOM are format characters (Cf): removed, so the word is not split.
    assert zh.tokenize("a\u200bb\u200dc\ufeffd") == ["abc", "##d"]
    # NUL, U+FFFD and BEL are removed too.
    assert zh.tokenize("x\x00y\ufffdz\x07w") == ["xyz", "##w"]
    # No-break space, ideographic space, tab, newline and line separator all separate words.
    assert zh.tokenize("a\u00a0b\u3000c\td\ne\u2028f") == ["a", "b", "c", "d", "e", "f"]
    assert zh.tokenize("\x00\u200b \t") == []


def test_emoji(zh):
    # Emoji are neither CJK nor punctuation: with the modifier they form one word, which is not in the vocabulary.
    assert zh.tokenize("今天天气很好😀👍🏽") == ["今", "天", "天", "气", "很", "好", "[UNK]"]


def test_ascii_symbols_are_punctuation(zh):
    assert zh.tokenize("$5^~|<>=`") == ["$", "5", "^", "~", "|", "<", ">", "=", "[UNK]"]
    assert all(wordpiece.is_punctuation(c) for c in "$^`+<=>|~")
    assert not wordpiece.is_punctuation("a") and wordpiece.is_punctuation("。")


def test_long_words_become_unk(zh):
    # "aaa" is the longest vocabulary entry that starts such a word, "##aa" the longest continuation.
    assert zh.tokenize("a" * 200) == ["aaa"] + ["##aa"] * 98 + ["##a"]  # the original's limit is 200 characters
    assert zh.tokenize("a" * 201) == ["[UNK]"]
    short_limit = wordpiece.WordpieceTokenizer(zh.vocab, max_input_chars_per_word=100)
    assert short_limit.tokenize("a" * 100 + " " + "a" * 101) == ["aaa"] + ["##aa"] * 48 + ["##a", "[UNK]"]


def test_greedy_longest_match_first():
    vocab = {t: i for i, t in enumerate(["[UNK]", "un", "##aff", "##able", "##a", "##ff", "u", "##n"])}
    tokenizer = wordpiece.WordpieceTokenizer(vocab)
    assert tokenizer.tokenize("unaffable") == ["un", "##aff", "##able"]
    assert tokenizer.tokenize("unaffablex") == ["[UNK]"]  # an unmatched tail makes the whole word unknown
    assert tokenizer.tokenize("unaff un") == ["un", "##aff", "un"]


def test_encode_pair_in_wordpiece_mode(zh):
    input_ids, input_mask, segment_ids = encode_pair(zh, "我爱北京", "天安门", 10)
    assert input_ids == [101, 2769, 4263, 1266, 776, 102, 1921, 2128, 7305, 102]
    assert input_mask == [1] * 10 and segment_ids == [0] * 6 + [1] * 4


def test_load_vocab_matches_the_original_reader(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"[PAD]\n[UNK]\nhello 0.5\n\nhello\n##lo\t-1\nlast")
    vocab = wordpiece.load_vocab(str(path))
    assert isinstance(vocab, collections.OrderedDict)
    # First field of each line; a blank line is " "; a repeated token takes no new id; no final newline needed.
    assert list(vocab.items()) == [("[PAD]", 0), ("[UNK]", 1), ("hello", 2), (" ", 3), ("##lo", 4), ("last", 5)]
    # The real file: a line holding only U+2028 is blank once stripped, and "\n" alone separates lines.
    real = wordpiece.load_vocab(VOCAB_FILE)
    assert len(real) == 21128 and real[" "] == list(real).index(" ")


def test_vocabulary_errors_name_the_file(tmp_path):
    with pytest.raises(TokenizerError, match="missing_vocab.txt"):
        FullTokenizer(vocab_file=str(tmp_path / "missing_vocab.txt"))
    empty = tmp_path / "empty_vocab.txt"
    empty.write_text("")
    with pytest.raises(TokenizerError, match="empty_vocab.txt.*empty"):
        FullTokenizer(vocab_file=str(empty))
    blank = tmp_path / "blank_vocab.txt"
    blank.write_text("\n \n\t\n")
    with pytest.raises(TokenizerError, match="blank_vocab.txt"):
        FullTokenizer(vocab_file=str(blank))
    no_unk = tmp_path / "no_unk.txt"
    no_unk.write_text("[PAD]\nhello\n")
    with pytest.raises(TokenizerError, match=r"no_unk.txt.*\[UNK\]"):
        FullTokenizer(vocab_file=str(no_unk))


def test_chinese_tiny_config_matches_the_vocabulary(zh):
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel

    config = AlbertConfig.from_json_file(os.path.join(DATA_DIR, "albert_config_zh_tiny.json"))
    assert config.vocab_size == len(zh.vocab) == 21128
    assert (config.num_hidden_layers, config.hidden_size, config.embedding_size) == (4, 312, 128)
    ids = encode_pair(zh, "我爱北京天安门。", None, 16)[0]
    assert max(ids) < config.vocab_size


# The character classes, pinned against independent references: the original's CJK blocks (its
# `_is_chinese_char`, read from google-research/albert's tokenization.py), Python's `string.punctuation` for ASCII
# and Unicode's categories for the rest.
ORIGINAL_CJK_BLOCKS = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
                       (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def test_cjk_ideographs_are_the_originals_blocks_to_the_code_point():
    edges = {cp + d for lo, hi in ORIGINAL_CJK_BLOCKS for cp in (lo, hi) for d in (-1, 0, 1)}
    for cp in sorted(edges):
        expected = any(lo <= cp <= hi for lo, hi in ORIGINAL_CJK_BLOCKS)
        assert wordpiece.is_chinese_char(cp) is expected, hex(cp)
    named = [cp for cp in range(0x3400, 0x2CEB0) if unicodedata.name(chr(cp), "").startswith(
        ("CJK UNIFIED IDEOGRAPH-", "CJK COMPATIBILITY IDEOGRAPH-"))]
    assert len(named) > 80000 and all(wordpiece.is_chinese_char(cp) for cp in named)
    assert not any(wordpiece.is_chinese_char(ord(c)) for c in "aÅ한カｶ、。")  # Hangul, kana: not ideographs
    assert wordpiece.BasicTokenizer().tokenize("ab\u4e00cd\U0002a6dfe") == ["ab", "\u4e00", "cd", "\U0002a6df", "e"]


def test_ascii_punctuation_is_exactly_pythons_and_the_rest_unicodes_p_categories():
    for cp in range(128):
        assert wordpiece.is_punctuation(chr(cp)) is (chr(cp) in string.punctuation), cp
    for c in "«»¿、。「」—‘’":
        assert wordpiece.is_punctuation(c) is True, c
    for c in "€£©±\u00a0é":
        assert wordpiece.is_punctuation(c) is False, c


def test_whitespace_and_control_classes_return_booleans():
    for c in " \t\n\r\u00a0\u3000\u2009":
        assert wordpiece.is_whitespace(c) is True, repr(c)
    for c in "a\x0b\u200b":
        assert wordpiece.is_whitespace(c) is False, repr(c)
    for c in "\t\n\r":
        assert wordpiece.is_control(c) is False, repr(c)
    assert wordpiece.is_control("\x07") is True and wordpiece.is_control("\u200b") is True
    assert wordpiece.BasicTokenizer().tokenize("a\tb\u3000c\u200bd") == ["a", "b", "cd"]


def test_the_final_newline_ends_the_last_token_and_a_folder_is_no_vocabulary(tmp_path):
    assert list(wordpiece.parse_vocab("[UNK]\na\n")) == ["[UNK]", "a"]
    assert list(wordpiece.parse_vocab("[UNK]\na\n\n")) == ["[UNK]", "a", " "]  # a blank last line is a token
    with pytest.raises(TokenizerError, match="WordPiece vocabulary file not found"):
        wordpiece.load_vocab(str(tmp_path))


def test_defaults_lowercase_and_bytes_are_read_as_utf8(tmp_path):
    vocab = collections.OrderedDict((t, i) for i, t in enumerate(["[UNK]", "cafe", "x", "##e"]))
    assert wordpiece.BasicTokenizer().tokenize("Café X".encode()) == ["cafe", "x"]
    assert wordpiece.WordpieceTokenizer(vocab).tokenize("cafe x".encode()) == ["cafe", "x"]
    text = wordpiece.WordpieceTextTokenizer(vocab, vocab_file="v.txt")
    assert (text.vocab_file, text.do_lower_case, text.unk_token, text.max_input_chars_per_word) == (
        "v.txt", True, "[UNK]", 200)
    assert text.tokenize("CAFÉ") == ["cafe"]
    path = tmp_path / "v.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    assert wordpiece.WordpieceTextTokenizer.from_file(str(path)).tokenize("X") == ["x"]
