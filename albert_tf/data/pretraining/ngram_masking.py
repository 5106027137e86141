"""Offline n-gram masking of one instance, as the original's `create_masked_lm_predictions`: the masks stored in
the records by `create_pretraining_data`.

Not to be confused with `albert_tf.data.masking`, the online masking of `run_pretraining.py --masked_lm_budget`,
which draws new masks in the input pipeline at training time (in TensorFlow) with the same statistics and uses
`ngram_cdf` from here.
"""

import bisect

import numpy as np

from albert_tf.data.pretraining.instances import randbelow


def ngram_cdf(ngram, favor_shorter_ngram=True):
    """Cumulative p(n), n = 1..ngram, with p(n) proportional to 1/n (reversed if not `favor_shorter_ngram`)."""
    weights = [1.0 / n for n in range(1, ngram + 1)]
    if not favor_shorter_ngram:
        weights.reverse()
    total = sum(weights)
    cdf, acc = [], 0.0
    for w in weights:
        acc += w / total
        cdf.append(acc)
    cdf[-1] = 1.0
    return cdf


def choose_ngrams(group_starts, budget, cdf, rng, covered=None, drawn=None, accepted=None):
    """The original's n-gram selection over whole-word groups.

    Words are visited in a uniformly random order (a lazy Fisher-Yates shuffle, drawn only as far as needed). At
    each, n is drawn from `cdf`; the n-gram (fewer words at the end of the sequence) is shortened while it would
    overflow the budget; it is skipped if it still overflows or touches a word already taken.

    Args:
      group_starts: list of W + 1 ints; word w spans candidates `[group_starts[w], group_starts[w + 1])`.
      budget: most candidates to choose.
      cdf: from `ngram_cdf`.
      rng: a `random.Random`.
      covered: optional bytearray [W] of words already taken (updated in place).
      drawn, accepted: optional lists [ngram] counting the drawn n and the accepted n-gram sizes (in words).

    Returns:
      The chosen candidate indices, in the order chosen (at most `budget`).
    """
    n_words = len(group_starts) - 1
    if covered is None:
        covered = bytearray(n_words)
    drawn = drawn if drawn is not None else [0] * len(cdf)
    accepted = accepted if accepted is not None else [0] * len(cdf)
    rand = rng.random
    order = list(range(n_words))
    chosen = []
    taken = 0
    t = 0
    # The hot loop of the whole tool (about 10 visits per instance): kept to plain local operations.
    while taken < budget and t < n_words:
        j = t + int(rand() * (n_words - t))
        start = order[j]
        order[j] = order[t]
        t += 1
        n = bisect.bisect_right(cdf, rand()) + 1  # the first n with u < cdf[n - 1]; cdf[-1] is 1.0
        drawn[n - 1] += 1
        first = group_starts[start]
        end = start + n
        if end > n_words:
            end = n_words
        left = budget - taken
        size = group_starts[end] - first
        while size > left and end > start + 1:
            end -= 1
            size = group_starts[end] - first
        if size > left:
            continue
        if end == start + 1:
            if covered[start]:
                continue
            covered[start] = 1
        else:
            if covered.find(1, start, end) >= 0:
                continue
            covered[start:end] = b"\x01" * (end - start)
        chosen.extend(range(first, first + size))
        taken += size
        accepted[end - start - 1] += 1
    return chosen


KEEP = -1  # an output id meaning "the original token stays" (resolved when the features are built)


def mask_instance(docs, instance, config, tables, rng, cdf, drawn=None, accepted=None):
    """Masked-LM positions and what goes there, for one instance, as the original's `create_masked_lm_predictions`.

    Returns:
      `(positions, outputs)`: sorted positions in `[CLS] A [SEP] B [SEP]`, and per position the id placed there:
      `tables.mask_id` (80%), `KEEP` for the original token (10%), or a random vocabulary id (10%); with
      `do_permutation` also the permuted positions with the id moved there. The labels are the original ids.
    """
    a0, a1, b0, b1, _ = instance
    la = a1 - a0
    n_cand = la + b1 - b0
    if config.masked_lm_prob == 0:
        return [], []
    cand_pos = None  # candidate index -> offset in A + B, when some pieces are not candidates
    if config.do_whole_word_mask:
        starts = np.concatenate((docs.word_start[a0:a1], docs.word_start[b0:b1]))
        if not tables.is_sentencepiece and not (starts[0] and (la == n_cand or starts[la])):
            # WordPiece: a segment that begins with "##" pieces lost their word's head to truncation. Those
            # orphaned pieces are not candidates: they would start a masked span on a "##" piece (start of A) or
            # join the last word of A across [SEP] (start of B).
            keep = np.ones(n_cand, dtype=bool)
            for lo, hi in ((0, la), (la, n_cand)):
                heads = np.flatnonzero(starts[lo:hi])
                keep[lo:lo + (int(heads[0]) if heads.size else hi - lo)] = False
            cand_pos = np.flatnonzero(keep)
            starts = starts[cand_pos]
        group_starts = starts.nonzero()[0].tolist()
        if starts.size and (not group_starts or group_starts[0]):
            group_starts.insert(0, 0)  # the first candidate always starts a group
        group_starts.append(starts.size)
    else:
        group_starts = list(range(n_cand + 1))
    budget = min(config.max_predictions_per_seq, max(1, int(round((n_cand + 3) * config.masked_lm_prob))))
    covered = bytearray(len(group_starts) - 1)
    chosen = choose_ngrams(group_starts, budget, cdf, rng, covered, drawn, accepted)
    if cand_pos is not None:
        chosen = cand_pos[chosen].tolist()
    rand = rng.random
    mask_id = tables.mask_id
    outputs = {}
    for c in chosen:
        if rand() < 0.8:
            outputs[c] = mask_id
        elif rand() < 0.5:
            outputs[c] = KEEP
        else:
            outputs[c] = int(tables.vocab_ids[randbelow(rng, tables.vocab_size)])
    if config.do_permutation:
        tokens = docs.tokens
        selected = choose_ngrams(group_starts, budget, cdf, rng, covered)
        selected = sorted(cand_pos[selected].tolist() if cand_pos is not None else selected)
        targets = list(selected)
        rng.shuffle(targets)
        for src, tgt in zip(selected, targets):
            outputs[src] = int(tokens[a0 + tgt] if tgt < la else tokens[b0 + tgt - la])
    order = sorted(outputs)
    return [c + 1 if c < la else c + 2 for c in order], [outputs[c] for c in order]
