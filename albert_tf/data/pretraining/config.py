"""The generation flags of pretraining data creation (`PretrainingConfig`, the original script's, with its defaults),
the counters of a run (`Stats`) and the error raised for bad input or flags (`PretrainingDataError`)."""

import dataclasses

from albert_tf.errors import DataError
from albert_tf.settings import NON_NEGATIVE, POSITIVE, PROBABILITY, Range, setting


class PretrainingDataError(DataError):
    """Bad input or flags for pretraining data creation; the message says what and where."""


@dataclasses.dataclass(frozen=True)
class PretrainingConfig:
    """The original script's generation flags, with its defaults.

    `do_permutation` is the original's experimental permutation objective: a second set of up to `budget` positions
    whose tokens are permuted among themselves; records then hold `2 * max_predictions_per_seq` predictions.
    """

    max_seq_length: int = setting(512, "Maximum sequence length.", bounds=Range(8))
    max_predictions_per_seq: int = setting(20, "Maximum number of masked LM predictions per sequence.",
                                           bounds=NON_NEGATIVE)
    masked_lm_prob: float = setting(0.15, "Masked LM probability.", bounds=PROBABILITY)
    short_seq_prob: float = setting(0.1, "Probability of creating sequences shorter than the maximum length.",
                                    bounds=PROBABILITY)
    ngram: int = setting(3, "Maximum n-gram length to mask.", bounds=POSITIVE)
    dupe_factor: int = setting(40, "Number of times to duplicate the input data (with different masks).",
                               bounds=POSITIVE)
    random_seed: int = setting(12345, "Random seed for data generation.")
    do_whole_word_mask: bool = setting(True, "Mask whole words rather than single pieces.")
    favor_shorter_ngram: bool = setting(True, "Sample n-gram lengths with p(n) proportional to 1/n (else reversed).")
    random_next_sentence: bool = setting(False, "Next-sentence prediction (B from a random document half the time) "
                                                "instead of sentence-order prediction.")
    do_permutation: bool = setting(False, "Also permute a second set of positions (the original's experimental "
                                          "objective); records then hold 2 * max_predictions_per_seq predictions.")

    @property
    def max_num_tokens(self):
        """Tokens of A and B together: `max_seq_length` less [CLS] and two [SEP]."""
        return self.max_seq_length - 3

    @property
    def num_prediction_slots(self):
        """Length of the `masked_lm_*` features (doubled by `do_permutation`, as in the original)."""
        return self.max_predictions_per_seq * (2 if self.do_permutation else 1)

    @property
    def max_budget(self):
        """The most predictions the masking budget allows in one full-length sequence."""
        return max(1, int(round(self.max_seq_length * self.masked_lm_prob)))

    def validate(self):
        """Raises `PretrainingDataError` for flag values the algorithm cannot work with.

        Returns a list of warnings (strings) for values that work but waste space.
        """
        if self.max_seq_length < 5:
            raise PretrainingDataError(
                f"max_seq_length={self.max_seq_length} is too small: [CLS] A [SEP] B [SEP] needs 3 special tokens "
                f"plus at least one token in each segment, so max_seq_length must be at least 5")
        if not 0.0 <= self.masked_lm_prob <= 1.0:
            raise PretrainingDataError(f"masked_lm_prob must be in [0, 1], got {self.masked_lm_prob}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise PretrainingDataError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")
        if self.ngram < 1:
            raise PretrainingDataError(f"ngram must be at least 1, got {self.ngram}")
        if self.dupe_factor < 1:
            raise PretrainingDataError(f"dupe_factor must be at least 1, got {self.dupe_factor}")
        if self.max_predictions_per_seq < 1:
            raise PretrainingDataError(
                f"max_predictions_per_seq must be at least 1, got {self.max_predictions_per_seq}")
        if self.max_predictions_per_seq > self.max_num_tokens:
            raise PretrainingDataError(
                f"max_predictions_per_seq={self.max_predictions_per_seq} is larger than the masking budget can "
                f"ever allow: a sequence of max_seq_length={self.max_seq_length} has at most "
                f"{self.max_num_tokens} maskable tokens (and masked_lm_prob={self.masked_lm_prob} gives a budget of "
                f"at most {self.max_budget})")
        warnings = []
        if self.masked_lm_prob > 0 and self.max_predictions_per_seq > self.max_budget:
            warnings.append(
                f"max_predictions_per_seq={self.max_predictions_per_seq} exceeds the largest masking budget "
                f"round(max_seq_length * masked_lm_prob) = {self.max_budget}; the extra slots are always padding "
                f"(about max_seq_length * masked_lm_prob is the usual choice)")
        return warnings


@dataclasses.dataclass
class Stats:
    """Counters of a run (or of one shard); `merge` adds another's."""

    files: int = 0
    shards: int = 0
    text_bytes: int = 0
    documents: int = 0
    skipped_documents: int = 0
    sentences: int = 0
    tokens: int = 0
    instances: int = 0
    instance_tokens: int = 0
    sentence_order_positive: int = 0
    masked_positions: int = 0
    ngram_drawn: list = dataclasses.field(default_factory=list)
    ngram_accepted: list = dataclasses.field(default_factory=list)
    elapsed_seconds: float = 0.0

    def merge(self, other):
        for field in dataclasses.fields(self):
            mine, theirs = getattr(self, field.name), getattr(other, field.name)
            if isinstance(mine, list):
                if len(mine) < len(theirs):
                    mine.extend([0] * (len(theirs) - len(mine)))
                for i, value in enumerate(theirs):
                    mine[i] += value
            elif field.name != "elapsed_seconds":
                setattr(self, field.name, mine + theirs)

    def summary(self):
        """A few lines for the end of a run: instances, label balance, masking, throughput."""
        n = max(self.instances, 1)
        secs = max(self.elapsed_seconds, 1e-9)
        accepted = sum(self.ngram_accepted) or 1
        ngram_share = ", ".join(f"{i + 1}: {c / accepted:.1%}" for i, c in enumerate(self.ngram_accepted))
        return "\n".join([
            f"wrote {self.instances} instances from {self.documents} documents "
            f"({self.skipped_documents} skipped: fewer than 2 tokens), {self.files} files, {self.shards} shards",
            f"sentence-order label 1 (swapped/random B): {self.sentence_order_positive / n:.1%}; "
            f"mean tokens per instance {self.instance_tokens / n:.1f}",
            f"mean masked positions per instance {self.masked_positions / n:.2f}; masked n-gram sizes {ngram_share}",
            f"{self.elapsed_seconds:.1f} s: {self.instances / secs:.0f} instances/s, "
            f"{self.text_bytes / secs / 1e6:.2f} MB of text/s",
        ])
