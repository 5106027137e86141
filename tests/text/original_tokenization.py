"""The original release's SentencePiece-side text rules, restated from its `tokenization.py` (read, not imported:
the original needs TF1), as independent references for the tests; and the SST-2 lines that exercise them."""

import os
import unicodedata

from tests.helpers import SAMPLE_GLUE


def original_preprocess_text(inputs, remove_space=True, lower=False):
    """The original release's `tokenization.preprocess_text`, restated: fold whitespace, NFKD, drop combining
    characters, lowercase. (No quote rule, no accent option.)"""
    text = " ".join(inputs.strip().split()) if remove_space else inputs
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return text.lower() if lower else text


# Lines that exercise every step of the rule: whitespace of all kinds (NBSP, ideographic space, tabs, the line
# separators str.split breaks at), accents precomposed and combining (alone, stacked, at the start), compatibility
# forms (ligatures, full-width, fractions, superscripts), CJK, LaTeX quotes, case mappings that change the length
# or depend on context (ß, ẞ, İ, final sigma), and non-BMP characters.
TRICKY_LINES = (
    "  Hello\tWorld  ", "", " \u00a0 ", "naïve Café Ångström Ñandú", "e\u0301te\u0301 \u0301start a\u0323\u0302",
    "ﬁne ½ ①, ＡＢＣ ｶﾀｶﾅ x\u00b2 \u2126", "中文字符 和 日本語のテキスト、한국어", "``quoted'' and ''x'' ` '",
    "a\u00a0b\u3000c\u2009d\u202fe\u200bf", "STRASSE Straße ẞ", "İstanbul I\u0307 ıi", "ΟΔΥΣΣΕΥΣ ΣΑΣ Σ.",
    "a\u00b4b \u1fed \u00a8", "x\u2028y\u2029z\x1cw\x85v\x0bu\x0ct\rs", "𝐀𝐁𝐂 🙂 \U00010400",
    "Walter Elliot, born March 1, 1760, married 1,000,000, yes.", "\ufeffbom\u00ad soft",
)


def original_ids(sp_model, text):
    """The original's `encode_pieces` + `PieceToId` on already preprocessed text, restated: SentencePiece
    pieces, a piece ending in digit + "," re-encoded without the comma (dropping a leading "▁" the piece did not
    have) and the comma appended."""
    pieces = []
    for piece in sp_model.encode(text, out_type=str):
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            parts = sp_model.encode(piece[:-1].replace("\u2581", ""), out_type=str)
            if not piece.startswith("\u2581") and parts[0].startswith("\u2581"):
                parts = parts[1:] if parts[0] == "\u2581" else [parts[0][1:]] + parts[1:]
            pieces += parts + [","]
        else:
            pieces.append(piece)
    return [sp_model.piece_to_id(p) for p in pieces]


def sst2_lines_with_latex_quotes():
    """The sentences of the shipped SST-2 sample (train, dev, test) that hold `` or ''."""
    lines = []
    for split in ("train", "dev", "test"):
        with open(os.path.join(SAMPLE_GLUE, "SST-2", f"{split}.tsv"), encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f][1:]
        column = 1 if split == "test" else 0  # test.tsv: index, sentence
        lines += [row[column] for row in rows if "``" in row[column] or "''" in row[column]]
    return lines
