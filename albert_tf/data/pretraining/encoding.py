"""Instances to records: the padded feature arrays of a batch of instances (`instance_features`, the original's
features) and a numpy protobuf encoder of `tf.train.Example`s (`encode_examples`), byte for byte what
`SerializeToString(deterministic=True)` gives, without TensorFlow."""

import itertools

import numpy as np

from albert_tf.data.pretraining.ngram_masking import KEEP

# The record's features, in the original's order.
FEATURE_ORDER = ("input_ids", "input_mask", "segment_ids", "token_boundary", "masked_lm_positions",
                 "masked_lm_ids", "masked_lm_weights", "next_sentence_labels")

_VARINT_CACHE = {}


def _varint(n):
    cached = _VARINT_CACHE.get(n)
    if cached is not None:
        return cached
    out = bytearray()
    value = n
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    out = bytes(out)
    if n < 1 << 16:
        _VARINT_CACHE[n] = out
    return out


def _varint_rows(matrix):
    """Protobuf varints of a non-negative int matrix [N, K]: (all bytes row after row, row offsets [N + 1])."""
    n_rows = matrix.shape[0]
    top = int(matrix.max()) if matrix.size else 0
    if matrix.size and matrix.dtype.kind == "i" and int(matrix.min()) < 0:
        raise ValueError("negative values cannot be encoded by this serializer")
    if top < 0x80:
        data = np.ascontiguousarray(matrix, dtype=np.uint8)
        return data.tobytes(), np.arange(n_rows + 1, dtype=np.int64) * matrix.shape[1]
    width = (top.bit_length() + 6) // 7
    values = matrix.astype(np.uint32 if top < 1 << 32 else np.uint64)
    more = [values >= (1 << (7 * k)) for k in range(1, width)]  # more[k - 1]: the value has a byte k
    out = np.empty(matrix.shape + (width,), dtype=np.uint8)
    keep = np.empty(matrix.shape + (width,), dtype=bool)
    keep[..., 0] = True
    for k in range(width):
        low = (values >> (7 * k)) & 0x7F
        if k + 1 < width:
            out[..., k] = low | (more[k].view(np.uint8) << 7)  # continuation bit
            keep[..., k + 1] = more[k]
        else:
            out[..., k] = low
    lengths = matrix.shape[1] + sum(m.sum(axis=1, dtype=np.int64) for m in more)
    return out.reshape(-1)[keep.reshape(-1)].tobytes(), np.concatenate(([0], np.cumsum(lengths)))


def encode_examples(features):
    """Serializes N `tf.train.Example`s from a dict of 2-D arrays, without TensorFlow.

    Args:
      features: dict name -> array [N, K]; integer arrays (non-negative) become `int64_list`, float arrays
        `float_list`.

    Returns:
      A list of N `bytes`, each a serialized `tf.train.Example`, byte for byte what protobuf's
      `SerializeToString(deterministic=True)` gives for the same example (features sorted by name, packed values).
    """
    encoded = []
    n_rows = None
    for name, array in sorted(features.items()):
        array = np.asarray(array)
        if array.ndim != 2:
            raise ValueError(f"feature {name!r} must be 2-D [N, K], got shape {array.shape}")
        n_rows = array.shape[0] if n_rows is None else n_rows
        if array.shape[0] != n_rows:
            raise ValueError(f"feature {name!r} has {array.shape[0]} rows, expected {n_rows}")
        key = name.encode("utf-8")
        if np.issubdtype(array.dtype, np.floating):
            data = array.astype("<f4").tobytes()
            offsets = np.arange(n_rows + 1, dtype=np.int64) * (4 * array.shape[1])
            kind_tag = b"\x12"  # Feature.float_list
        else:
            data, offsets = _varint_rows(array)
            kind_tag = b"\x1a"  # Feature.int64_list
        encoded.append((b"\x0a" + _varint(len(key)) + key + b"\x12", kind_tag, data, offsets.tolist(), {}))
    records = []
    for row in range(n_rows or 0):
        parts = []
        body = 0
        for key_header, kind_tag, data, offsets, prefixes in encoded:
            lo, hi = offsets[row], offsets[row + 1]
            size = hi - lo
            prefix = prefixes.get(size)
            if prefix is None:
                # Everything of this feature's map entry before its packed values, for values of `size` bytes.
                values_header = b"\x0a" + _varint(size) if size else b""
                feature_len = len(values_header) + size
                feature_header = kind_tag + _varint(feature_len) + values_header
                entry_len = len(key_header) + len(_varint(len(feature_header) + size)) + len(feature_header) + size
                prefix = (b"\x0a" + _varint(entry_len) + key_header + _varint(len(feature_header) + size)
                          + feature_header)
                prefixes[size] = prefix
            parts.append(prefix)
            parts.append(data[lo:hi])
            body += len(prefix) + size
        records.append(b"\x0a" + _varint(body) + b"".join(parts))
    return records


def instance_features(docs, instances, masks, config, tables):
    """The padded feature arrays of a batch of instances (see `FEATURE_ORDER`).

    Args:
      instances: list of `(a0, a1, b0, b1, label)`.
      masks: list of `(positions, outputs)` from `mask_instance`, one per instance.

    Returns:
      dict name -> array: int32 [N, max_seq_length] `input_ids`, uint8 [N, max_seq_length] `input_mask`,
      `segment_ids`, `token_boundary`; int32 [N, P] `masked_lm_positions`, `masked_lm_ids` and float32 [N, P]
      `masked_lm_weights` (P = `config.num_prediction_slots`); int64 [N, 1] `next_sentence_labels`. Padding is zero
      everywhere. (Narrow types: the serializer writes every integer feature as int64, as the original.)
    """
    n_rows, seq_len, slots = len(instances), config.max_seq_length, config.num_prediction_slots
    spans = np.asarray(instances, dtype=np.int64).reshape(n_rows, 5)
    a0, a1, b0, b1, label = (spans[:, k:k + 1] for k in range(5))
    la, lb = a1 - a0, b1 - b0
    column = np.arange(seq_len, dtype=np.int64)[None, :]
    in_a = (column >= 1) & (column <= la)
    in_b = (column >= la + 2) & (column < la + 2 + lb)
    text = in_a | in_b
    source = np.where(in_a, a0 - 1 + column, np.where(in_b, b0 - la - 2 + column, 0))
    ids = np.where(text, docs.tokens[source], 0).astype(np.int32)
    boundary = (text & docs.word_start[source]).view(np.uint8)
    rows = np.arange(n_rows)
    sep_a, sep_b = (la + 1)[:, 0], (la + lb + 2)[:, 0]
    ids[:, 0] = tables.cls_id
    ids[rows, sep_a] = tables.sep_id
    ids[rows, sep_b] = tables.sep_id
    boundary[:, 0] = 1
    boundary[rows, sep_a] = 1
    boundary[rows, sep_b] = 1
    input_mask = (column <= sep_b[:, None]).view(np.uint8)
    segment_ids = ((column >= la + 2) & (column <= sep_b[:, None])).view(np.uint8)

    counts = np.fromiter((len(m[0]) for m in masks), dtype=np.int64, count=n_rows)
    mask_rows = np.repeat(rows, counts)
    mask_slots = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    mask_pos = np.fromiter(itertools.chain.from_iterable(m[0] for m in masks), dtype=np.int64, count=len(mask_rows))
    mask_out = np.fromiter(itertools.chain.from_iterable(m[1] for m in masks), dtype=np.int64, count=len(mask_rows))
    positions = np.zeros((n_rows, slots), dtype=np.int32)
    labels = np.zeros((n_rows, slots), dtype=np.int32)
    weights = np.zeros((n_rows, slots), dtype=np.float32)
    original = ids[mask_rows, mask_pos]
    positions[mask_rows, mask_slots] = mask_pos
    labels[mask_rows, mask_slots] = original
    weights[mask_rows, mask_slots] = 1.0
    ids[mask_rows, mask_pos] = np.where(mask_out == KEEP, original, mask_out)
    return {
        "input_ids": ids,
        "input_mask": input_mask,
        "segment_ids": segment_ids,
        "token_boundary": boundary,
        "masked_lm_positions": positions,
        "masked_lm_ids": labels,
        "masked_lm_weights": weights,
        "next_sentence_labels": label.copy(),
    }
