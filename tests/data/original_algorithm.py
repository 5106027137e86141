"""An independent single-process reference of the original `create_pretraining_data.py` algorithm, for tests.

`OriginalAlgorithm` follows the original's steps with its per-token Python work: read everything, tokenize line by
line to piece strings, build instances with one `random.Random` and numpy's global (unseeded) generator for the
n-gram lengths, shuffle all instances, write a `tf.train.Example` per instance. It was written from the original's
documented behaviour, not copied from it. The tests compare the statistics of `albert_tf.data.pretraining_data`
with it (instance count, lengths, label balance, masked count); the original's own script cannot run in the test
suite (it is not part of this repository), so `python -m bench.bench_pretraining_data --original_dir` times that one.
"""

import collections
import random

import numpy as np
import sentencepiece
import tensorflow as tf

from albert_tf.text import tokenization


class OriginalAlgorithm:
    """The original `create_pretraining_data.py` algorithm, as a plain single-process reference.

    Same steps and the same per-token Python work as the original; it gives the reference statistics (instance
    count, label balance, masked count) the tests compare `albert_tf.data.pretraining_data` with.
    """

    SPECIALS = frozenset(('[CLS]', '[SEP]'))
    PUNCT = frozenset('!"#$%&()*+,-./:;?@[\\]^_`{|}~')
    LETTERS_PUNCT = frozenset("abcdefghijklmnopqrstuvwxyz") | PUNCT

    def __init__(self, spm_model_file, max_seq_length, max_predictions_per_seq=20, masked_lm_prob=0.15,
                 short_seq_prob=0.1, ngram=3, dupe_factor=1, seed=12345):
        self.sp = sentencepiece.SentencePieceProcessor()
        self.sp.load(spm_model_file)
        self.vocab_words = [self.sp.id_to_piece(i) for i in range(self.sp.get_piece_size())]
        self.max_seq_length = max_seq_length
        self.max_predictions = max_predictions_per_seq
        self.masked_lm_prob = masked_lm_prob
        self.short_seq_prob = short_seq_prob
        self.dupe_factor = dupe_factor
        self.rng = random.Random(seed)
        self.ngrams = np.arange(1, ngram + 1, dtype=np.int64)
        weights = 1.0 / np.arange(1, ngram + 1)
        self.pvals = weights / weights.sum()

    def tokenize(self, line):
        return tokenization.encode_pieces(self.sp, line)

    def read_documents(self, files):
        documents = [[]]
        for path in files:
            with open(path, encoding="utf-8") as f:
                for raw in f:
                    line = tokenization.preprocess_text(raw, lower=True)
                    if not line:
                        documents.append([])
                    pieces = self.tokenize(line)
                    if pieces:
                        documents[-1].append(pieces)
        documents = [d for d in documents if d]
        self.rng.shuffle(documents)
        return documents

    def is_word_start(self, piece):
        if piece.startswith("\u2581") or piece.startswith("<") or piece in self.PUNCT:
            return True
        return not all(ch.lower() in self.LETTERS_PUNCT for ch in piece)

    def truncate(self, tokens_a, tokens_b, max_num_tokens):
        while len(tokens_a) + len(tokens_b) > max_num_tokens:
            longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
            if self.rng.random() < 0.5:
                del longer[0]
            else:
                longer.pop()

    def mask(self, tokens):
        rng = self.rng
        words, boundary = [], [0] * len(tokens)
        for i, tok in enumerate(tokens):
            if tok in self.SPECIALS:
                boundary[i] = 1
                continue
            start = self.is_word_start(tok)
            if words and not start:
                words[-1].append(i)
            else:
                words.append([i])
                boundary[i] = int(start)
        output = list(tokens)
        budget = min(self.max_predictions, max(1, int(round(len(tokens) * self.masked_lm_prob))))
        candidates = [[words[w:w + n] for n in self.ngrams] for w in range(len(words))]
        rng.shuffle(candidates)
        chosen, covered = [], set()
        for options in candidates:
            if len(chosen) >= budget:
                break
            n = np.random.choice(self.ngrams, p=self.pvals)  # unseeded, as in the original
            span = sum(options[n - 1], [])
            while len(chosen) + len(span) > budget and n > 1:
                n -= 1
                span = sum(options[n - 1], [])
            if len(chosen) + len(span) > budget or any(i in covered for i in span):
                continue
            for i in span:
                covered.add(i)
                if rng.random() < 0.8:
                    output[i] = "[MASK]"
                elif rng.random() >= 0.5:
                    output[i] = self.vocab_words[rng.randint(0, len(self.vocab_words) - 1)]
                chosen.append((i, tokens[i]))
        chosen.sort()
        return output, [i for i, _ in chosen], [t for _, t in chosen], boundary

    def document_instances(self, documents, index):
        rng = self.rng
        document = documents[index]
        max_num_tokens = self.max_seq_length - 3
        target = max_num_tokens
        if rng.random() < self.short_seq_prob:
            target = rng.randint(2, max_num_tokens)
        out, chunk, length, i = [], [], 0, 0
        while i < len(document):
            chunk.append(document[i])
            length += len(document[i])
            if i == len(document) - 1 or length >= target:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                tokens_a = [t for seg in chunk[:a_end] for t in seg]
                tokens_b = []
                if len(chunk) == 1:
                    label = 1
                    for _ in range(10):
                        other = rng.randint(0, len(documents) - 1)
                        if other != index:
                            break
                    other_doc = documents[other]
                    for seg in other_doc[rng.randint(0, len(other_doc) - 1):]:
                        tokens_b.extend(seg)
                        if len(tokens_b) >= target - len(tokens_a):
                            break
                    i -= len(chunk) - a_end
                elif rng.random() < 0.5:
                    label = 1
                    tokens_b = [t for seg in chunk[a_end:] for t in seg]
                    tokens_a, tokens_b = tokens_b, tokens_a
                else:
                    label = 0
                    tokens_b = [t for seg in chunk[a_end:] for t in seg]
                self.truncate(tokens_a, tokens_b, max_num_tokens)
                tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
                segments = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
                output, positions, labels, boundary = self.mask(tokens)
                out.append((output, segments, positions, labels, boundary, label))
                chunk, length = [], 0
            i += 1
        return out

    def run(self, files, output_file):
        documents = self.read_documents(files)
        instances = []
        for _ in range(self.dupe_factor):
            for index in range(len(documents)):
                instances.extend(self.document_instances(documents, index))
        self.rng.shuffle(instances)
        stats = collections.Counter()

        def int_feature(values):
            return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

        with tf.io.TFRecordWriter(output_file) as writer:
            for output, segments, positions, labels, boundary, label in instances:
                ids = [self.sp.piece_to_id(t) for t in output]
                pad = self.max_seq_length - len(ids)
                label_ids = [self.sp.piece_to_id(t) for t in labels]
                slots = self.max_predictions - len(positions)
                features = collections.OrderedDict()
                features["input_ids"] = int_feature(ids + [0] * pad)
                features["input_mask"] = int_feature([1] * len(ids) + [0] * pad)
                features["segment_ids"] = int_feature(segments + [0] * pad)
                features["token_boundary"] = int_feature(boundary + [0] * pad)
                features["masked_lm_positions"] = int_feature(positions + [0] * slots)
                features["masked_lm_ids"] = int_feature(label_ids + [0] * slots)
                features["masked_lm_weights"] = tf.train.Feature(
                    float_list=tf.train.FloatList(value=[1.0] * len(positions) + [0.0] * slots))
                features["next_sentence_labels"] = int_feature([label])
                example = tf.train.Example(features=tf.train.Features(feature=features))
                writer.write(example.SerializeToString())
                if random.randint(1, 100) >= 97:
                    writer.flush()
                stats["instances"] += 1
                stats["label1"] += label
                stats["masked"] += len(positions)
                stats["tokens"] += len(ids)
        return stats
