"""The one natural sort order of the data readers: RACE's file names (`2.txt` before `10.txt`) and the label list
a classifier infers from its train file (numbers by value)."""

import re


def natural_key(text):
    """Sort key of `text` in natural order: a text that is a number comes first, by its value; any other text is
    compared run by run, its runs of digits as numbers (`"file2.txt"` before `"file10.txt"`); ties by the text."""
    try:
        return (0, float(text), text)
    except ValueError:
        parts = re.split(r"(\d+)", text)  # text, digits, text, ...: the digit runs at the odd positions
        return (1, [int(part) if i % 2 else part for i, part in enumerate(parts)], text)
