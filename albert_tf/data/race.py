"""RACE (multiple-choice reading comprehension): reading the data, features, cached records, evaluation, the run.

Data layout, as the original's `run_race.py` expects under `--data_dir`:
`RACE/{train,dev,test}/{middle,high}/*.txt`, each file a JSON object with `id`, `article`, `questions`,
`options` (four per question) and `answers` (letters A-D). The original reads every `.txt` file of a level
directory line by line, one JSON object per line, so it also reads the common variant in which the files of a
directory are concatenated into `all.txt` (one article per line). Here, when a directory holds an `all.txt`, only
that file is read: the original would read both it and the per-article files beside it and count every question
twice. Files are read in natural name order (`2.txt` before `10.txt`), middle before high.

Features are the original's. Text goes through the tokenizer's preprocessing (for SentencePiece: whitespace
folding, accent stripping, lowercasing as `do_lower_case`); then for each of the four options the question
with every "_" replaced by the option (or, when the question has no "_", question + " " + option) is
tokenized, only its LAST `max_qa_length` tokens kept, and the sequence is
`[CLS] article [SEP] question+option [SEP]` with the article cut from its end to fit `max_seq_length`
(segment ids 0 for `[CLS] article [SEP]`, 1 after).

Records hold the original's features (`input_ids`, `input_mask`, `segment_ids` of length 4 * max_seq_length,
choice after choice; `label_ids`; `is_real_example`) so the original's reader can read them, plus
`question_id` and `level`. They are cached by `records.cached_records`: a description beside the file records
the settings, data and tokenizer they were built from, and a cache built from anything else is rebuilt.

Question ids are `<article id>-<question index>`, e.g. `high1234.txt-0` (the article ids are the dataset's
`id` fields).
"""

import dataclasses
import itertools
import json
import logging
import os
import random
import time

import tensorflow as tf
from google.protobuf.message import DecodeError

from albert_tf import fileio
from albert_tf.data import records
from albert_tf.data.natural_order import natural_key
from albert_tf.errors import DataError, MissingDataError, UsageError
from albert_tf.evaluation.race import LABELS, LEVELS, NO_LABEL
from albert_tf.text import tokenization

NUM_CHOICES = len(LABELS)
SPLITS = ("train", "dev", "test")
ALL_FILE = "all.txt"
CACHE_FORMAT = 2
SHUFFLE_BUFFER = 2048  # records (the training file is also written in shuffled order)


class RaceFormatError(DataError):
    """The RACE data cannot be read as given; the message names the file (and line or question)."""


@dataclasses.dataclass
class RaceExample:
    """One RACE question, with the raw text as in the data file.

    `label` is the index of the answer (0-3 for A-D), or None when the file gives no answers.
    """

    question_id: str
    level: str
    article: str
    question: str
    options: list
    label: int = None
    source: str = ""


# ---------------------------------------------------------------------------------------------------------------
# Reading


def split_dir(data_dir, split):
    """The directory of `split` ("train", "dev" or "test"): `data_dir/RACE/split`, or `data_dir/split` when
    `data_dir` is itself the RACE directory."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    candidates = [os.path.join(data_dir, "RACE", split), os.path.join(data_dir, split)]
    for candidate in candidates:
        if tf.io.gfile.isdir(candidate):
            return candidate
    raise MissingDataError(f"no RACE {split} set under --data_dir {data_dir}: expected the directory "
                            f"{candidates[0]} (with middle/ and high/ inside)")


def levels_to_read(high_only=False, middle_only=False):
    """The levels selected by the original's `--high_only` / `--middle_only` flags."""
    if high_only and middle_only:
        raise UsageError("--high_only and --middle_only exclude each other")
    return tuple(level for level in LEVELS
                 if not (level == "middle" and high_only) and not (level == "high" and middle_only))


def level_files(directory):
    """The files of one level directory that are read: `all.txt` alone if present, else every `*.txt`."""
    names = sorted((n for n in tf.io.gfile.listdir(directory) if n.endswith(".txt")), key=natural_key)
    if ALL_FILE in names:
        others = len(names) - 1
        if others:
            logging.warning("%s: reading only %s (one article per line); the %d other .txt files beside it are "
                            "taken to be the same articles and skipped", directory, ALL_FILE, others)
        names = [ALL_FILE]
    return [os.path.join(directory, n) for n in names]


def _article_questions(data, source, level, fallback_id):
    """The `RaceExample`s of one parsed article (a JSON object), validated."""
    if not isinstance(data, dict):
        raise RaceFormatError(f"{source}: expected a JSON object, got {type(data).__name__}")
    for key in ("article", "questions", "options"):
        if key not in data:
            raise RaceFormatError(f"{source}: no {key!r} field (RACE articles have id, article, questions, "
                                  f"options, answers)")
    questions, options, answers = data["questions"], data["options"], data.get("answers")
    if not isinstance(questions, list) or not isinstance(options, list) or len(options) != len(questions):
        raise RaceFormatError(f"{source}: 'questions' and 'options' must be lists of the same length")
    if answers is not None and (not isinstance(answers, list) or len(answers) != len(questions)):
        raise RaceFormatError(f"{source}: 'answers' must be a list with one letter per question "
                              f"({len(questions)})")
    article_id = str(data.get("id") or fallback_id)
    examples = []
    for i, question in enumerate(questions):
        choices = options[i]
        if not isinstance(choices, list) or len(choices) != NUM_CHOICES:
            raise RaceFormatError(f"{source}: question {i} has {len(choices) if isinstance(choices, list) else 0}"
                                  f" options; RACE questions have exactly {NUM_CHOICES}")
        label = None
        if answers is not None:
            if answers[i] not in LABELS:
                raise RaceFormatError(f"{source}: question {i} has answer {answers[i]!r}, not one of "
                                      f"{', '.join(LABELS)}")
            label = LABELS.index(answers[i])
        examples.append(RaceExample(question_id=f"{article_id}-{i}", level=level, article=str(data["article"]),
                                    question=str(question), options=[str(c) for c in choices], label=label,
                                    source=f"{source} question {i}"))
    return examples


def read_level(directory, level):
    """The questions of one level directory (see `level_files`): each file holds one JSON object, or one per
    line."""
    examples = []
    for path in level_files(directory):
        with tf.io.gfile.GFile(path, "rb") as f:
            data = f.read()
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise RaceFormatError(f"{path}: not UTF-8 text (byte {err.start}: {err.reason})") from None
        try:  # one JSON object per file (possibly spread over several lines)
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None
        if isinstance(whole, dict):
            examples.extend(_article_questions(whole, path, level, level + os.path.basename(path)))
            continue
        numbered = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        for n, line in numbered:
            source = path if len(numbered) == 1 and n == 1 else f"{path}:{n}"
            try:
                data = json.loads(line)
            except json.JSONDecodeError as err:
                raise RaceFormatError(f"{source}: malformed JSON ({err.msg} at line {n}, column {err.colno}); "
                                      f"RACE files hold one JSON object per line") from None
            fallback = f"{level}{os.path.basename(path)}:{n}"  # (a file of one article was read whole above)
            examples.extend(_article_questions(data, source, level, fallback))
    return examples


def read_race(data_dir, split, high_only=False, middle_only=False):
    """All questions of a split (middle then high), as the original's `RaceProcessor.read_examples`.

    Raises:
      FileNotFoundError: the split or a selected level directory is missing.
      RaceFormatError: a file is not RACE JSON (the message names the file and line) or two questions share
        an id.
    """
    base = split_dir(data_dir, split)
    examples = []
    for level in levels_to_read(high_only, middle_only):
        directory = os.path.join(base, level)
        if not tf.io.gfile.isdir(directory):
            other = "--middle_only" if level == "high" else "--high_only"
            raise MissingDataError(f"no {level} directory {directory} (pass {other} to read only the other level)")
        examples.extend(read_level(directory, level))
    seen = {}
    for example in examples:
        if example.question_id in seen:
            raise RaceFormatError(f"question id {example.question_id} appears twice: {seen[example.question_id]}"
                                  f" and {example.source}")
        seen[example.question_id] = example.source
    return examples


# ---------------------------------------------------------------------------------------------------------------
# Features


def process_text(tokenizer, text):
    """The original's `process_text`: the SentencePiece preprocessing, or plain unicode for WordPiece."""
    if tokenizer.is_sentencepiece:
        return tokenization.preprocess_text(text, lower=tokenizer.do_lower_case)
    return tokenization.convert_to_unicode(text)


def _pieces(tokenizer, processed):
    """Tokens of text already through `process_text` (SentencePiece text is not preprocessed a second time)."""
    if tokenizer.is_sentencepiece:
        return tokenization.encode_pieces(tokenizer.sp_model, processed)
    return tokenizer.tokenize(processed)


def question_with_option(question, option):
    """The question with every "_" replaced by the option, or the option appended after a space."""
    if "_" in question:
        return question.replace("_", option)
    return " ".join([question, option])


def qa_texts(tokenizer, example):
    """The four question+option texts of an example (after `process_text`)."""
    question = process_text(tokenizer, example.question)
    return [question_with_option(question, process_text(tokenizer, option)) for option in example.options]


def check_lengths(max_seq_length, max_qa_length):
    if max_qa_length < 1:
        raise UsageError(f"--max_qa_length must be positive, got {max_qa_length}")
    if max_qa_length > max_seq_length - 3:
        raise UsageError(f"--max_qa_length {max_qa_length} leaves no room for the article in --max_seq_length "
                         f"{max_seq_length} (which also holds [CLS] and two [SEP]); use --max_qa_length <= "
                         f"{max_seq_length - 3}")


def encode_article(tokenizer, article):
    """`(tokens, ids)` of an article (after `process_text`)."""
    tokens = _pieces(tokenizer, process_text(tokenizer, article))
    return tokens, tokenizer.convert_tokens_to_ids(tokens)


def convert_example(example, tokenizer, max_seq_length, max_qa_length, article=None):
    """The model inputs of one question.

    Args:
      article: `encode_article(tokenizer, example.article)` when already known (questions of one article share
        it).
    Returns:
      dict with `input_ids`, `input_mask`, `segment_ids` (each a list of NUM_CHOICES lists of max_seq_length
      ints), `label` (int, NO_LABEL when unknown) and `tokens` (the NUM_CHOICES token lists, unpadded).
    """
    check_lengths(max_seq_length, max_qa_length)
    article_tokens, article_ids = article or encode_article(tokenizer, example.article)
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    features = {"input_ids": [], "input_mask": [], "segment_ids": [], "tokens": [],
                "label": NO_LABEL if example.label is None else example.label}
    for qa in qa_texts(tokenizer, example):
        qa_tokens = _pieces(tokenizer, qa)[-max_qa_length:]
        keep = min(len(article_tokens), max_seq_length - 3 - len(qa_tokens))
        length = keep + len(qa_tokens) + 3
        padding = [0] * (max_seq_length - length)
        features["input_ids"].append([cls_id] + article_ids[:keep] + [sep_id]
                                     + tokenizer.convert_tokens_to_ids(qa_tokens) + [sep_id] + padding)
        features["input_mask"].append([1] * length + padding)
        features["segment_ids"].append([0] * (keep + 2) + [1] * (len(qa_tokens) + 1) + padding)
        features["tokens"].append(["[CLS]"] + article_tokens[:keep] + ["[SEP]"] + qa_tokens + ["[SEP]"])
    return features


# ---------------------------------------------------------------------------------------------------------------
# Records


def feature_spec(max_seq_length):
    """The `tf.io.parse_example` spec of the records (the original's features)."""
    length = NUM_CHOICES * max_seq_length
    return {"input_ids": tf.io.FixedLenFeature([length], tf.int64),
            "input_mask": tf.io.FixedLenFeature([length], tf.int64),
            "segment_ids": tf.io.FixedLenFeature([length], tf.int64),
            "label_ids": tf.io.FixedLenFeature([], tf.int64)}


def examples_digest(examples):
    """A hash of the examples' text, labels, ids and order."""
    return fileio.fingerprint([[e.question_id, e.level, e.article, e.question, e.options, e.label]
                               for e in examples])[:16]


def cache_key(examples, tokenizer, max_seq_length, max_qa_length, order):
    """What a record file is built from (`records.cached_records` keys the cache by it)."""
    return {"format": CACHE_FORMAT, "max_seq_length": max_seq_length, "max_qa_length": max_qa_length,
            "latex_quotes": "kept",  # as the original, whatever the tokenizer's rule (caches without it: rebuilt)
            "tokenizer": records.tokenizer_fingerprint(tokenizer),
            "examples": len(examples), "data": examples_digest(examples), "order": order}


def write_records(examples, tokenizer, writer, max_seq_length, max_qa_length, log_examples=3):
    """Writes one record per question with `writer.write`; returns the number written."""
    start = time.time()
    last_article, article = None, None
    for index, example in enumerate(examples):
        if example.article != last_article:
            last_article, article = example.article, encode_article(tokenizer, example.article)
        features = convert_example(example, tokenizer, max_seq_length, max_qa_length, article)
        if index < log_examples:
            logging.info("*** Example %s (%s) label=%s", example.question_id, example.level, features["label"])
            for choice, tokens in enumerate(features["tokens"]):
                logging.info("  choice %s: %s", LABELS[choice], " ".join(tokens))
        record = {name: records.int64_feature(itertools.chain.from_iterable(features[name]))
                  for name in ("input_ids", "input_mask", "segment_ids")}
        record["label_ids"] = records.int64_feature([features["label"]])
        record["is_real_example"] = records.int64_feature([1])
        record["question_id"] = records.bytes_feature(example.question_id)
        record["level"] = records.bytes_feature(example.level)
        writer.write(tf.train.Example(features=tf.train.Features(feature=record)).SerializeToString())
        if index and index % 10000 == 0:
            logging.info("Wrote %d of %d questions", index, len(examples))
    logging.info("Wrote %d questions in %.1f s", len(examples), time.time() - start)
    return len(examples)


def first_record(path):
    """The first record of a TFRecord file as a `tf.train.Example`, or None when it has no (readable) record."""
    try:
        serialized = records.first_record(path)
        return None if serialized is None else tf.train.Example.FromString(serialized)
    except (DataError, DecodeError) as err:  # not a TFRecord file, or its records are not Examples
        logging.warning("%s cannot be read as TFRecords of tf.train.Example: %s", path, err)
    return None


def _reuse_foreign(path, split, max_seq_length):
    """Whether a record file written by another program (no description beside it) is used as it is: for
    training, after checking its sequence length, as the original does; for dev/test it is refused, since its
    question order cannot be checked. An unreadable file is rebuilt (False)."""
    existing = first_record(path)
    if existing is None:
        return False
    if split != "train":
        raise DataError(f"{path} was not written by albert_tf (it has no {os.path.basename(path)}.json "
                        f"description), so its question order cannot be checked against the {split} data; delete it "
                        f"or choose another file")
    found = len(existing.features.feature["input_ids"].int64_list.value) \
        if "input_ids" in existing.features.feature else None
    if found != NUM_CHOICES * max_seq_length:
        raise DataError(f"{path} holds records with input_ids of length {found}, but {NUM_CHOICES} choices x "
                        f"--max_seq_length {max_seq_length} = {NUM_CHOICES * max_seq_length}; delete it or pass "
                        f"another --train_file")
    logging.warning("Reusing %s, written by another program: its settings and data cannot be checked", path)
    return True


def prepare_records(examples, tokenizer, path, max_seq_length, max_qa_length, split, shuffle_seed=None):
    """Returns `(path, examples in record order)`, writing `path` unless it already holds these features
    (`records.cached_records`); a foreign file (see `_reuse_foreign`) gives `(path, None)`.

    Args:
      shuffle_seed: write the questions in an order shuffled with this seed (training), else in reading order.
    """
    if shuffle_seed is not None:
        examples = list(examples)
        random.Random(shuffle_seed).shuffle(examples)
        order = f"shuffled:{shuffle_seed}"
    else:
        order = "read"
    if tf.io.gfile.exists(path) and records.read_meta(path) is None and _reuse_foreign(path, split, max_seq_length):
        return path, None
    records.cached_records(path, cache_key(examples, tokenizer, max_seq_length, max_qa_length, order),
                           lambda writer: {"questions": write_records(examples, tokenizer, writer, max_seq_length,
                                                                      max_qa_length)})
    return path, examples


def _parse(serialized, max_seq_length):
    parsed = tf.io.parse_example(serialized, feature_spec(max_seq_length))
    x = {name: tf.reshape(tf.cast(parsed[name], tf.int32), [-1, NUM_CHOICES, max_seq_length])
         for name in ("input_ids", "input_mask", "segment_ids")}
    return x, tf.cast(parsed["label_ids"], tf.int32)


def train_dataset(path, max_seq_length, batch_size, seed=None, input_context=None, skip_batches=0):
    """Endless, shuffled `(features, labels)` batches of `batch_size` (always full) for `fit`.

    With a seed, every pass has its own shuffle (`records.shuffled_passes`), so the stream of batches is the same
    for every iterator and a resumed run can `skip_batches` to where it stopped. Under `tf.distribute`, each
    input pipeline reads every n-th record.
    """
    dataset = records.shuffled_passes(records.shard_for(tf.data.TFRecordDataset(path), input_context), seed,
                                      SHUFFLE_BUFFER).batch(batch_size, drop_remainder=True)
    if skip_batches:
        dataset = dataset.skip(skip_batches)  # before parsing: skipped batches cost only their reading
    dataset = dataset.map(lambda s: _parse(s, max_seq_length), num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=seed is not None)
    return dataset.prefetch(tf.data.AUTOTUNE)


def inference_dataset(path, max_seq_length, num_examples, global_batch_size, input_context=None):
    """Every question once (`records.ordered_batches`): dicts of int32 `input_ids`, `input_mask`, `segment_ids`
    [batch, 4, seq], `label_ids` [batch] and `example_index` [batch] (-1 for padding)."""
    def parse(serialized):
        x, label = _parse(serialized[None], max_seq_length)
        return {**{k: v[0] for k, v in x.items()}, "label_ids": label[0]}

    examples = tf.data.TFRecordDataset(path).map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return records.ordered_batches(examples, num_examples, global_batch_size, input_context=input_context)
