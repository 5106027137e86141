"""A document to training instances, as the original's `create_instances_from_document` (sentence pairs, the
sentence-order or next-sentence label, truncation), and the seeded random helpers every draw goes through."""

import hashlib


def derive_seed(*parts):
    """A 64-bit seed from integers, the same on every machine and process (blake2b of their little-endian bytes)."""
    data = b"".join(int(p).to_bytes(8, "little", signed=True) for p in parts)
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


# Stream tags mixed into the seeds, so the per-shard order, buffer and per-document streams, Beam's global-shuffle
# keys and the local global shuffle's interleaving are independent.
STREAM_DOCUMENT, STREAM_ORDER, STREAM_BUFFER, STREAM_GLOBAL_SHUFFLE, STREAM_INTERLEAVE = 0, 1, 2, 3, 4


def randbelow(rng, n):
    """`rng.randint(0, n - 1)` for a `random.Random` and n >= 1, drawing exactly the same bits (CPython's
    `_randbelow_with_getrandbits`: k = n.bit_length() random bits, redrawn while >= n), without `randint`'s
    argument handling, which costs more than the draw in the instance and masking loops."""
    k = n.bit_length()
    r = rng.getrandbits(k)
    while r >= n:
        r = rng.getrandbits(k)
    return r


def _truncate_pair(a0, a1, b0, b1, max_num_tokens, rng):
    """The original's `truncate_seq_pair` on two ranges: drop from the longer range (B on ties), front or back.

    Which side loses each token is fixed by the lengths; only front-or-back is random, so the number of front
    removals on a side that loses k tokens is Binomial(k, 1/2) (the popcount of k random bits).
    """
    la, lb = a1 - a0, b1 - b0
    excess = la + lb - max_num_tokens
    if excess <= 0:
        return a0, a1, b0, b1
    cut_a = cut_b = 0
    if la > lb:
        cut_a = min(excess, la - lb)
    elif lb > la:
        cut_b = min(excess, lb - la)
    rest = excess - cut_a - cut_b
    cut_b += (rest + 1) // 2
    cut_a += rest // 2
    front_a = bin(rng.getrandbits(cut_a)).count("1") if cut_a else 0
    front_b = bin(rng.getrandbits(cut_b)).count("1") if cut_b else 0
    return a0 + front_a, a1 - (cut_a - front_a), b0 + front_b, b1 - (cut_b - front_b)


def document_instances(docs, doc_index, config, rng):
    """The original's `create_instances_from_document`, on token ranges.

    Returns a list of `(a0, a1, b0, b1, label)`: A is `docs.tokens[a0:a1]`, B is `docs.tokens[b0:b1]`, and label is
    1 when B was swapped before A or comes from a random document, else 0.
    """
    bounds = docs.bounds[doc_index]
    n_sent = len(bounds) - 1
    max_num_tokens = config.max_num_tokens
    target = max_num_tokens
    if rng.random() < config.short_seq_prob:
        target = 2 + randbelow(rng, max_num_tokens - 1)
    out = []
    chunk_start = 0
    length = 0
    i = 0
    while i < n_sent:
        length += bounds[i + 1] - bounds[i]
        if i == n_sent - 1 or length >= target:
            n_chunk = i - chunk_start + 1
            a_end = 1 + randbelow(rng, n_chunk - 1) if n_chunk >= 2 else 1
            a0, a1 = bounds[chunk_start], bounds[chunk_start + a_end]
            if n_chunk == 1 or (config.random_next_sentence and rng.random() < 0.5):
                label = 1
                target_b = target - (a1 - a0)
                for _ in range(10):
                    other = randbelow(rng, len(docs.bounds))
                    if other != doc_index:
                        break
                other_bounds = docs.bounds[other]
                j = randbelow(rng, len(other_bounds) - 1)
                b0 = other_bounds[j]
                b1 = other_bounds[j + 1]
                while b1 - b0 < target_b and j + 2 < len(other_bounds):
                    j += 1
                    b1 = other_bounds[j + 1]
                i -= n_chunk - a_end  # put the chunk's unused sentences back
            elif not config.random_next_sentence and rng.random() < 0.5:
                label = 1
                b0, b1 = a0, a1
                a0, a1 = bounds[chunk_start + a_end], bounds[i + 1]
            else:
                label = 0
                b0, b1 = bounds[chunk_start + a_end], bounds[i + 1]
            out.append((*_truncate_pair(a0, a1, b0, b1, max_num_tokens, rng), label))
            chunk_start = i + 1
            length = 0
        i += 1
    return out
