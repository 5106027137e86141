"""`choose_ngrams` and `ngram_cdf` on their own (albert_tf/data/pretraining/ngram_masking.py): the budget met
exactly, whole words only, every word visited once in a uniformly random order, words already taken skipped, and
the n-gram distribution's end points. Their statistics inside whole records are tests/data/test_pretraining_data.py's
(against the original's algorithm)."""

import collections
import random

import pytest

from albert_tf.data.pretraining.ngram_masking import choose_ngrams, ngram_cdf

UNIGRAMS = [1.0]  # every draw is n = 1


def test_the_cdf_is_one_over_n_and_ends_at_exactly_one():
    assert ngram_cdf(3) == pytest.approx([6 / 11, 9 / 11, 1.0])
    assert ngram_cdf(3, favor_shorter_ngram=False) == pytest.approx([2 / 11, 5 / 11, 1.0])
    for n in range(1, 30):  # the summed floats fall short for some n; the last must be 1.0 for bisect
        assert ngram_cdf(n)[-1] == 1.0


def test_unigrams_fill_the_budget_exactly_with_distinct_words():
    starts = list(range(11))  # 10 words of one candidate each
    for seed in range(50):
        chosen = choose_ngrams(starts, 5, UNIGRAMS, random.Random(seed))
        assert len(chosen) == len(set(chosen)) == 5 and set(chosen) <= set(range(10))


def test_a_budget_over_the_words_takes_every_word_once():
    starts = [0, 2, 3, 6, 7, 9]  # 5 words of 2, 1, 3, 1 and 2 candidates
    for seed in range(50):
        drawn, accepted = [0], [0]
        chosen = choose_ngrams(starts, 100, UNIGRAMS, random.Random(seed), drawn=drawn, accepted=accepted)
        assert sorted(chosen) == list(range(9))
        assert drawn == [5] and accepted == [5]


def test_words_are_visited_in_a_uniformly_random_order():
    starts = list(range(11))
    first = collections.Counter(choose_ngrams(starts, 1, UNIGRAMS, random.Random(seed))[0] for seed in range(2000))
    assert sorted(first) == list(range(10))
    assert max(first.values()) < 260 and min(first.values()) > 140  # 200 each expected
    orders = {tuple(choose_ngrams(starts, 10, UNIGRAMS, random.Random(seed))) for seed in range(50)}
    assert len(orders) == 50


def test_words_already_taken_are_skipped_and_marked_when_chosen():
    starts = list(range(11))
    for seed in range(50):
        covered = bytearray(10)
        covered[2] = covered[7] = 1
        chosen = choose_ngrams(starts, 100, UNIGRAMS, random.Random(seed), covered=covered)
        assert sorted(chosen) == [0, 1, 3, 4, 5, 6, 8, 9]
        assert covered == bytearray([1] * 10)


def test_an_ngram_is_cut_to_the_budget_and_the_sequence_end():
    starts = list(range(5))  # 4 words of one candidate
    trigrams = [0.0, 0.0, 1.0]  # every draw is n = 3
    cut_by_end = 0
    for seed in range(50):
        accepted = [0, 0, 0]
        chosen = choose_ngrams(starts, 2, trigrams, random.Random(seed), accepted=accepted)
        assert len(chosen) == 2
        if chosen[0] == 3:  # the last word first: its trigram is cut to one word by the sequence end
            cut_by_end += 1
            assert accepted == [2, 0, 0]  # and the next word's cut to the budget left
        else:  # three words cut to the budget of two
            assert chosen == [chosen[0], chosen[0] + 1] and accepted == [0, 1, 0]
    assert 0 < cut_by_end < 50


def test_a_word_larger_than_the_budget_left_is_skipped_and_not_counted():
    starts = [0, 3, 4]  # a word of 3 candidates, then one of 1
    for seed in range(20):
        accepted = [0]
        chosen = choose_ngrams(starts, 2, UNIGRAMS, random.Random(seed), accepted=accepted)
        assert chosen == [3] and accepted == [1]


def test_an_ngram_touching_a_taken_first_word_is_skipped():
    starts = list(range(4))  # 3 words of one candidate
    bigrams = [0.0, 1.0]
    for seed in range(30):
        covered = bytearray([1, 0, 0])
        chosen = choose_ngrams(starts, 10, bigrams, random.Random(seed), covered=covered)
        assert 0 not in chosen and chosen
