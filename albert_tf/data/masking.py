"""Online n-gram masking: new masked-LM predictions drawn inside the `tf.data` pipeline on every pass.

`run_pretraining.py --masked_lm_budget=0.15` reads records of `create_pretraining_data.py` (this project's or the
original's), ignores the masks stored in them and draws new ones with the offline algorithm
(`albert_tf.data.pretraining.ngram_masking.mask_instance`, which drew the stored masks when the records were made;
the original's `create_masked_lm_predictions`):

* The original tokens are restored first: a record's `input_ids` hold [MASK] or random ids at its stored
  `masked_lm_positions`, and `masked_lm_ids` holds what was there.
* Candidates are the real tokens (`input_mask`) except [CLS] and the two [SEP]s (found from `segment_ids`). Whole
  words come from `token_boundary`, which the offline script writes from the unmasked pieces (1 at a word's first
  piece): a word is a boundary piece and the non-boundary pieces after it; the first candidate always starts a
  word. SentencePiece records: non-boundary pieces at the start of B (their word's head cut off by truncation)
  continue A's last word, as offline. WordPiece records (`skip_orphans`): such "##" pieces at the start of either
  segment are never candidates, as offline. With `do_whole_word_mask=False` every candidate is its own word.
* The budget (`masked_lm_budget`, which plays the part of `--masked_lm_prob`): a sequence of L tokens ([CLS] and
  both [SEP] included, as offline) gets `min(max_predictions_per_seq, max(1, round(L * masked_lm_budget)))`
  predictions (round half to even, in float64, as Python's `round`). So `--masked_lm_budget=0.15` gives the
  statistics of records made with the default `--masked_lm_prob=0.15`; long sequences are capped by
  `max_predictions_per_seq` (the records' length, kept for static shapes).
* Words are visited in a uniformly random order; at each an n-gram length n in 1..`ngram` is drawn with p(n)
  proportional to 1/n (reversed without `favor_shorter_ngram`); the n-gram (fewer words at the end of the
  sequence) is shortened while it would overflow the budget, and skipped if it still does or touches a word
  already taken. Every chosen piece becomes [MASK] (80 %), stays (10 %) or becomes a uniformly random vocabulary
  entry (10 %). Positions are sorted and padded to `max_predictions_per_seq` with position 0, id 0, weight 0.

Masks are a pure function of (seed, record, pass): every random number of a record comes from one
`tf.random.stateless_uniform` call keyed by `(seed, file index, record index in the file, pass number)`
(`record_draws`), where the file index is the file's position in the sorted list of all input files (not in one
input pipeline's share) and the pass counts the passes over the files. Batch composition, input sharding and the
number of replicas do not change a record's mask, and a resumed run (which skips the batches already seen) draws
exactly the masks of an uninterrupted one.

The selection runs batched: one `tf.while_loop` step visits the t-th word of every sequence of the batch, so the
loop takes as many steps as the most words any sequence of the batch visits, each a few gathers of
[batch, ngram]. Outputs have static shapes (TPUs); the work is host-side `tf.data` ops.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from albert_tf.data.pretraining.ngram_masking import ngram_cdf
from albert_tf.errors import UsageError

# Set in every masking key, so that none equals a file-shuffle key (seed, pass) of `records.pretraining_dataset`.
_MASKING_STREAM = 1 << 62
# Files online masking can key: 2**62 + (file index << 40) + record index stays below 2**63 (`record_draws`).
MAX_FILES = 1 << 22


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
    """What online masking needs: the budget, the n-gram and whole-word settings (`create_pretraining_data`'s
    flags), the tokenizer's [MASK] id and vocabulary, and the seed.

    Attributes:
      masked_lm_budget: fraction of a sequence's tokens to predict, in (0, 1] (see the module docstring).
      max_predictions_per_seq: prediction slots per sequence (the records' length).
      mask_id: id of [MASK] (30k-clean.model: 4; BERT WordPiece vocabularies: 103).
      vocab_ids: int32 [V], the ids a random replacement is drawn from, uniformly (the tokenizer's vocabulary).
      ngram, favor_shorter_ngram, do_whole_word_mask: as `create_pretraining_data.py`.
      skip_orphans: WordPiece records: non-boundary pieces at the start of a segment are never masked.
      seed: the run's seed.
    """

    masked_lm_budget: float
    max_predictions_per_seq: int
    mask_id: int
    vocab_ids: np.ndarray = dataclasses.field(repr=False, compare=False)
    ngram: int = 3
    favor_shorter_ngram: bool = True
    do_whole_word_mask: bool = True
    skip_orphans: bool = False
    seed: int = 12345

    @classmethod
    def from_tokenizer(cls, tokenizer, masked_lm_budget, max_predictions_per_seq, **kwargs):
        """The config for records tokenized by `tokenizer` (an `albert_tf.text.tokenization.FullTokenizer`):
        its [MASK] id, its vocabulary, and the WordPiece orphan rule when it is not SentencePiece."""
        config = cls(masked_lm_budget=masked_lm_budget, max_predictions_per_seq=max_predictions_per_seq,
                     mask_id=tokenizer.token_id("[MASK]"),
                     vocab_ids=np.fromiter(tokenizer.vocab.values(), dtype=np.int32),
                     skip_orphans=not tokenizer.is_sentencepiece, **kwargs)
        config.validate()
        return config

    def validate(self):
        """Raises `UsageError` naming the flag whose value online masking cannot work with."""
        check_budget(self.masked_lm_budget)
        if self.ngram < 1:
            raise UsageError(f"--ngram must be at least 1, got {self.ngram}")
        if self.max_predictions_per_seq < 1:
            raise UsageError(f"--max_predictions_per_seq must be at least 1, got {self.max_predictions_per_seq}")
        if len(self.vocab_ids) == 0:
            raise UsageError("online masking needs a vocabulary to draw random replacements from")


def check_budget(masked_lm_budget):
    """Raises `UsageError` unless `masked_lm_budget` is a fraction of tokens in (0, 1]."""
    if not 0.0 < masked_lm_budget <= 1.0:
        raise UsageError(f"--masked_lm_budget must be in (0, 1] for online masking (the fraction of tokens to mask, "
                         f"as create_pretraining_data's --masked_lm_prob), got {masked_lm_budget}")


def record_draws(seed, record, count):
    """Every random number online masking uses for a batch of records, each row a function of its record alone.

    Args:
      seed: the run's seed (its low 31 bits are used).
      record: int64 [batch, 3], each record's (file index < 2**22, record index in the file < 2**40, pass number
        < 2**32).
      count: numbers per record.
    Returns:
      uint32 [batch, count], uniform over all 32-bit values: `tf.random.stateless_uniform` with the seed pair
      ((seed << 32) + pass, 2**62 + (file << 40) + record), one-to-one in (seed, file, record, pass) within
      those bounds and never equal to a (seed, pass) key of the file shuffle.
    """
    high = tf.bitwise.left_shift(tf.constant(seed & 0x7FFFFFFF, tf.int64), 32) + record[:, 2]
    low = _MASKING_STREAM + tf.bitwise.left_shift(record[:, 0], 40) + record[:, 1]
    return tf.map_fn(lambda key: tf.random.stateless_uniform([count], key, minval=None, maxval=None, dtype=tf.uint32),
                     tf.stack([high, low], 1), fn_output_signature=tf.uint32)


def _unit_floats(bits):
    """uint32 -> float32 uniform on [0, 1) (the top 24 bits, exactly representable)."""
    return tf.cast(tf.bitwise.right_shift(bits, 8), tf.float32) * (1.0 / (1 << 24))


def original_ids(features):
    """`input_ids` [batch, T] with the stored masked positions put back to `masked_lm_ids` (weight > 0)."""
    ids = features["input_ids"]
    valid = features["masked_lm_weights"] > 0
    positions = tf.where(valid, features["masked_lm_positions"], 0)
    delta = tf.where(valid, features["masked_lm_ids"] - tf.gather(ids, positions, batch_dims=1), 0)
    return _add_at(ids, positions, delta)


def _add_at(values, columns, delta):
    """`values` [batch, N] plus `delta` [batch, K] at `columns` [batch, K]. Repeated columns (padding slots at 0
    adding 0) are harmless: integer addition does not depend on the order."""
    rows = tf.broadcast_to(tf.range(tf.shape(values)[0])[:, None], tf.shape(columns))
    return tf.tensor_scatter_nd_add(values, tf.stack([rows, columns], -1), delta)


def candidates(features, config):
    """Which positions may be masked and where words start.

    Returns:
      `(candidate, word_start)`: bool [batch, T] each; a word is a start and the candidates after it up to the next
      start (in sequence order, across [SEP] for SentencePiece orphans, as offline).
    """
    mask = features["input_mask"] > 0
    segment = features["segment_ids"]
    position = tf.range(tf.shape(mask)[1])[None, :]
    length = tf.reduce_sum(tf.cast(mask, tf.int32), 1, keepdims=True)
    sep_a = tf.reduce_sum(tf.cast(mask & (segment == 0), tf.int32), 1, keepdims=True) - 1
    candidate = mask & (position != 0) & (position != sep_a) & (position != length - 1)
    boundary = candidate & (features["token_boundary"] > 0)
    if not config.do_whole_word_mask:
        return candidate, candidate
    if config.skip_orphans:
        started = tf.zeros_like(candidate)
        for s in (0, 1):
            in_segment = segment == s
            started |= in_segment & (tf.cumsum(tf.cast(boundary & in_segment, tf.int32), axis=1) > 0)
        candidate &= started
    first = candidate & (tf.cumsum(tf.cast(candidate, tf.int32), axis=1) == 1)
    return candidate, boundary | first


def choose_words(word_start, candidate, budget, visit_keys, ngram_draws, config):
    """The offline greedy n-gram selection, for every sequence of the batch at once.

    Args:
      word_start, candidate: bool [batch, T] from `candidates`.
      budget: int32 [batch], predictions allowed.
      visit_keys: float [batch, T], random keys; words are visited in increasing key order.
      ngram_draws: float [batch, T], the uniform that draws n at the t-th visit.

    Returns:
      bool [batch, T]: the chosen positions (at most `budget` per sequence, whole n-grams of words).
    """
    seq_length = word_start.shape[1]
    k = config.ngram
    starts = tf.cast(word_start, tf.int32)
    num_words = tf.reduce_sum(starts, 1)
    # cum[:, w]: candidates before word w, for w = 0..T (all candidates from the last word on), written at each
    # word start (other positions add 0 to column 0).
    word_rank = tf.cumsum(starts, axis=1)
    batch = tf.shape(starts)[0]
    counts = tf.cast(candidate, tf.int32)
    before = tf.where(word_start, tf.cumsum(counts, axis=1, exclusive=True), 0)
    cum = _add_at(tf.zeros([batch, seq_length + 1], tf.int32), tf.where(word_start, word_rank - 1, 0), before)
    word = tf.range(seq_length + 1)[None, :]
    cum = tf.where(word < num_words[:, None], cum, tf.reduce_sum(counts, 1, keepdims=True))
    word = word[:, :seq_length]
    order = tf.argsort(tf.where(word < num_words[:, None], visit_keys, 2.0), axis=1, stable=True)
    cdf = ngram_cdf(k, config.favor_shorter_ngram)
    drawn_n = tf.ones_like(word_rank)
    for c in cdf[:-1]:
        drawn_n += tf.cast(ngram_draws >= c, tf.int32)
    steps = tf.range(1, k + 1)[None, :]
    rows = tf.broadcast_to(tf.range(batch)[:, None], [batch, k])

    def body(t, covered, taken):
        start = order[:, t]
        available = tf.minimum(drawn_n[:, t], num_words - start)
        sizes = tf.gather(cum, tf.minimum(start[:, None] + steps, seq_length), batch_dims=1) - \
            tf.gather(cum, start[:, None], batch_dims=1)
        fits = (steps <= available[:, None]) & (sizes <= (budget - taken)[:, None])
        m = tf.reduce_sum(tf.cast(fits, tf.int32), 1)  # longest n-gram that fits (sizes grow with m)
        inside = steps <= m[:, None]
        words = tf.minimum(start[:, None] + steps - 1, seq_length - 1)
        overlap = tf.reduce_any(inside & (tf.gather(covered, words, batch_dims=1) > 0), 1)
        accept = (t < num_words) & (taken < budget) & (m > 0) & ~overlap
        take = inside & accept[:, None]
        covered = tf.tensor_scatter_nd_max(covered, tf.stack([rows, words], -1), tf.cast(take, tf.int32))
        size = tf.gather(sizes, tf.maximum(m - 1, 0), batch_dims=1)
        return t + 1, covered, taken + tf.where(accept, size, 0)

    def cond(t, covered, taken):
        del covered
        return (t < seq_length) & tf.reduce_any((t < num_words) & (taken < budget))

    _, covered, _ = tf.while_loop(cond, body, [tf.constant(0), tf.zeros_like(starts), tf.zeros_like(num_words)])
    word_of = tf.maximum(word_rank - 1, 0)
    return candidate & (tf.gather(covered, word_of, batch_dims=1) > 0)


@tf.autograph.experimental.do_not_convert  # plain TF ops and an explicit while_loop: nothing to convert
def mask_batch(features, file_index, record_index, pass_index, config):
    """New masked-LM features for a batch of parsed pretraining records.

    Args:
      features: dict of int32 [batch, T] `input_ids`, `input_mask`, `segment_ids`, `token_boundary`, int32
        [batch, P] `masked_lm_positions`, `masked_lm_ids`, float32 [batch, P] `masked_lm_weights` (as
        `records.pretraining_dataset` parses them; P = `config.max_predictions_per_seq`), and others passed on.
      file_index, record_index, pass_index: int [batch], each record's identity (see the module docstring).
      config: a `MaskingConfig`.

    Returns:
      `features` with new `input_ids`, `masked_lm_positions`, `masked_lm_ids` and `masked_lm_weights` (same
      shapes and dtypes).
    """
    ids = original_ids(features)
    batch, seq_length = ids.shape[0], ids.shape[1]
    slots = config.max_predictions_per_seq
    if slots > seq_length:
        raise ValueError(f"max_predictions_per_seq={slots} exceeds the sequence length {seq_length}")
    record = tf.stack([tf.cast(i, tf.int64) for i in (file_index, record_index, pass_index)], axis=1)
    bits = record_draws(config.seed, record, 2 * seq_length + 3 * slots)
    floats = _unit_floats(bits[:, :2 * seq_length + 2 * slots])
    visit_keys, ngram_draws = floats[:, :seq_length], floats[:, seq_length:2 * seq_length]
    mask_draw, keep_draw = floats[:, 2 * seq_length:2 * seq_length + slots], floats[:, 2 * seq_length + slots:]
    # A uniform vocabulary index (modulo: a bias below V / 2**32, as TF's own integer draws).
    random_index = tf.cast(tf.cast(bits[:, -slots:], tf.int64) % len(config.vocab_ids), tf.int32)

    candidate, word_start = candidates(features, config)
    length = tf.reduce_sum(features["input_mask"], 1)
    wanted = tf.cast(tf.round(tf.cast(length, tf.float64) * config.masked_lm_budget), tf.int32)
    budget = tf.minimum(slots, tf.maximum(1, wanted))
    chosen = choose_words(word_start, candidate, budget, visit_keys, ngram_draws, config)

    # Sorted chosen positions first (score T - p), then the rest (score -1 - p), cut to the slots.
    position = tf.range(seq_length)[None, :]
    score = tf.where(chosen, seq_length - position, -1 - position)
    top = tf.math.top_k(score, k=slots, sorted=True).indices
    used = tf.gather(chosen, top, batch_dims=1)
    positions = tf.where(used, top, 0)
    labels = tf.where(used, tf.gather(ids, positions, batch_dims=1), 0)
    vocab_ids = tf.constant(config.vocab_ids, tf.int32)
    replacement = tf.where(mask_draw < 0.8, config.mask_id,
                           tf.where(keep_draw < 0.5, labels, tf.gather(vocab_ids, random_index)))
    new_ids = _add_at(ids, positions, tf.where(used, replacement - labels, 0))
    out = dict(features)
    out.update(input_ids=tf.ensure_shape(new_ids, [batch, seq_length]),
               masked_lm_positions=tf.ensure_shape(positions, [batch, slots]),
               masked_lm_ids=tf.ensure_shape(labels, [batch, slots]),
               masked_lm_weights=tf.ensure_shape(tf.cast(used, tf.float32), [batch, slots]))
    return out
