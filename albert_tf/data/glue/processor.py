"""What every classifier processor is: `InputExample` (one row's texts and label), `DataProcessor` (the base: a
split's file and examples, the label list, a label's check and training target) and `read_split` (a split's examples,
an empty split refused)."""

import dataclasses

from albert_tf.data.glue.errors import GlueDataError, MalformedRowError, UnknownLabelError

SPLITS = ("train", "dev", "test")


@dataclasses.dataclass
class InputExample:
    """One example: `guid` (the GLUE `index` for test rows, used in submissions), raw `text_a`, optional raw
    `text_b`, and `label` (a label string, a float for regression, None when unlabelled). `line` is the line
    number in its file."""

    guid: str
    text_a: str
    text_b: str = None
    label: object = None
    line: int = None


class DataProcessor:
    """Base of the processors: examples of each split and the label list.

    Subclasses implement `split_path(data_dir, split)` and `read_examples(path, split)`, and set `task_name`,
    `labels` (label strings in index order) and `is_regression`.
    """

    task_name = None
    is_regression = False

    def get_labels(self):
        """Label strings in index order (`[None]` for regression, as the original's STS-B processor)."""
        return [None] if self.is_regression else list(self.labels)

    @property
    def num_labels(self):
        """Size of the classifier's output: 1 for regression."""
        return 1 if self.is_regression else len(self.get_labels())

    def split_path(self, data_dir, split):
        raise NotImplementedError

    def read_examples(self, path, split):
        raise NotImplementedError

    def get_examples(self, data_dir, split):
        """The examples of `split` ("train", "dev" or "test")."""
        if split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
        return self.read_examples(self.split_path(data_dir, split), split)

    # The original's method names.
    def get_train_examples(self, data_dir):
        return self.get_examples(data_dir, "train")

    def get_dev_examples(self, data_dir):
        return self.get_examples(data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self.get_examples(data_dir, "test")

    def label_of(self, value, path, line):
        """Checks a raw label against the label set (or parses a regression score)."""
        value = value.strip()
        if self.is_regression:
            try:
                return float(value)
            except ValueError:
                raise MalformedRowError(path, line, f"score {value!r} is not a number") from None
        if value not in self.get_labels():
            raise UnknownLabelError(path, line, f"label {value!r} is not in the label set "
                                                f"{', '.join(map(repr, self.get_labels()))} of task {self.task_name}")
        return value

    def label_index(self, label):
        """The training target of a label: its index, or the score itself for regression."""
        if self.is_regression:
            return float(label) if label is not None else 0.0
        return self.get_labels().index(label) if label is not None else 0


def read_split(processor, data_dir, split):
    """The examples of `split` (read, not converted); an empty split is refused, naming the file."""
    path = processor.split_path(data_dir, split)
    examples = processor.read_examples(path, split)
    if not examples:
        raise GlueDataError(f"{path}: the {split} split holds no example")
    return path, examples
