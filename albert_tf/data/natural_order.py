"""The sort orders of the data readers: RACE's file names in natural order (`2.txt` before `10.txt`), and the
label list a classifier infers from its train file (numbers by value, other labels as text).

They are two rules on purpose: a label's index is what a fine-tuned model predicts, so the label order stays the
one earlier releases wrote (`class10` before `class2`), while file names only fix the order examples are read in.
"""

import re


def natural_key(text):
    """Sort key of a file name in natural order: runs of digits compare as numbers (`"file2.txt"` before
    `"file10.txt"`), ties by the text."""
    parts = re.split(r"(\d+)", text)  # text, digits, text, ...: the digit runs at the odd positions
    return ([int(part) if i % 2 else part for i, part in enumerate(parts)], text)


def label_key(label):
    """Sort key of an inferred label: labels that are numbers first, by value; then the others as plain text."""
    try:
        return (0, float(label), label)
    except ValueError:
        return (1, 0.0, label)
