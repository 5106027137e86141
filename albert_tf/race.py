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
`question_id`, `level` and `cache_key` (the settings, data and tokenizer they were built from). A cache whose
key differs from the current one is rebuilt; files are written under a temporary name and renamed into place.

Question ids are `<article id>-<question index>`, e.g. `high1234.txt-0` (the article ids are the dataset's
`id` fields).
"""

import dataclasses
import hashlib
import itertools
import json
import logging
import math
import os
import random
import re
import time

import keras
import numpy as np
import tensorflow as tf

from albert_tf import checkpoints, distribution, export, optimization, records, tokenization, training
from albert_tf.config import AlbertConfig
from albert_tf.modeling import AlbertForMultipleChoice

LABELS = ("A", "B", "C", "D")
NUM_CHOICES = len(LABELS)
LEVELS = ("middle", "high")
SPLITS = ("train", "dev", "test")
ALL_FILE = "all.txt"
CACHE_FORMAT = 1
NO_LABEL = -1
SHUFFLE_BUFFER = 2048  # records (the training file is also written in shuffled order)


class RaceFormatError(ValueError):
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


def _natural_key(name):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def split_dir(data_dir, split):
    """The directory of `split` ("train", "dev" or "test"): `data_dir/RACE/split`, or `data_dir/split` when
    `data_dir` is itself the RACE directory."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    candidates = [os.path.join(data_dir, "RACE", split), os.path.join(data_dir, split)]
    for candidate in candidates:
        if tf.io.gfile.isdir(candidate):
            return candidate
    raise FileNotFoundError(f"no RACE {split} set under --data_dir {data_dir}: expected the directory "
                            f"{candidates[0]} (with middle/ and high/ inside)")


def levels_to_read(high_only=False, middle_only=False):
    """The levels selected by the original's `--high_only` / `--middle_only` flags."""
    if high_only and middle_only:
        raise ValueError("--high_only and --middle_only exclude each other")
    return tuple(level for level in LEVELS
                 if not (level == "middle" and high_only) and not (level == "high" and middle_only))


def level_files(directory):
    """The files of one level directory that are read: `all.txt` alone if present, else every `*.txt`."""
    names = sorted((n for n in tf.io.gfile.listdir(directory) if n.endswith(".txt")), key=_natural_key)
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
            fallback = level + os.path.basename(path) + ("" if len(numbered) == 1 else f":{n}")
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
            raise FileNotFoundError(f"no {level} directory {directory} (pass {other} to read only the other level)")
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
        raise ValueError(f"--max_qa_length must be positive, got {max_qa_length}")
    if max_qa_length > max_seq_length - 3:
        raise ValueError(f"--max_qa_length {max_qa_length} leaves no room for the article in --max_seq_length "
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
    """The `tf.io.parse_example` spec of the records (the original's, plus this project's metadata)."""
    length = NUM_CHOICES * max_seq_length
    return {"input_ids": tf.io.FixedLenFeature([length], tf.int64),
            "input_mask": tf.io.FixedLenFeature([length], tf.int64),
            "segment_ids": tf.io.FixedLenFeature([length], tf.int64),
            "label_ids": tf.io.FixedLenFeature([], tf.int64)}


def _int_feature(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))


def _bytes_feature(value):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode("utf-8")]))


def examples_digest(examples):
    """A hash of the examples' text, labels, ids and order."""
    digest = hashlib.sha256()
    for e in examples:
        digest.update(json.dumps([e.question_id, e.level, e.article, e.question, e.options, e.label]).encode())
    return digest.hexdigest()[:16]


def cache_key(examples, tokenizer, max_seq_length, max_qa_length, order):
    """What a record file was built from: a JSON string stored in every record."""
    tokenizer_file = tokenizer.spm_model_file or tokenizer.vocab_file
    return json.dumps({"format": CACHE_FORMAT, "max_seq_length": max_seq_length, "max_qa_length": max_qa_length,
                       "do_lower_case": bool(tokenizer.do_lower_case),
                       "tokenizer": records.file_sha256(tokenizer_file)[:16] if tokenizer_file else None,
                       "examples": len(examples), "data": examples_digest(examples), "order": order},
                      sort_keys=True)


def write_records(examples, tokenizer, path, max_seq_length, max_qa_length, key="", log_examples=3):
    """Writes one record per question to `path` (atomically: a temporary file renamed into place).

    Returns the number of records written.
    """
    directory = os.path.dirname(os.path.abspath(path)) if "://" not in path else os.path.dirname(path)
    tf.io.gfile.makedirs(directory)
    tmp = f"{path}.tmp-{os.getpid()}-{random.getrandbits(32):08x}"
    start = time.time()
    try:
        with tf.io.TFRecordWriter(tmp) as writer:
            last_article, article = None, None
            for index, example in enumerate(examples):
                if example.article != last_article:
                    last_article, article = example.article, encode_article(tokenizer, example.article)
                features = convert_example(example, tokenizer, max_seq_length, max_qa_length, article)
                if index < log_examples:
                    logging.info("*** Example %s (%s) label=%s", example.question_id, example.level,
                                 features["label"])
                    for choice, tokens in enumerate(features["tokens"]):
                        logging.info("  choice %s: %s", LABELS[choice], " ".join(tokens))
                record = {name: _int_feature(itertools.chain.from_iterable(features[name]))
                          for name in ("input_ids", "input_mask", "segment_ids")}
                record["label_ids"] = _int_feature([features["label"]])
                record["is_real_example"] = _int_feature([1])
                record["question_id"] = _bytes_feature(example.question_id)
                record["level"] = _bytes_feature(example.level)
                record["cache_key"] = _bytes_feature(key)
                writer.write(tf.train.Example(features=tf.train.Features(feature=record)).SerializeToString())
                if index and index % 10000 == 0:
                    logging.info("Wrote %d of %d questions to %s", index, len(examples), path)
        tf.io.gfile.rename(tmp, path, overwrite=True)
    except BaseException:
        if tf.io.gfile.exists(tmp):
            tf.io.gfile.remove(tmp)
        raise
    logging.info("Wrote %d questions to %s in %.1f s", len(examples), path, time.time() - start)
    return len(examples)


def first_record(path):
    """The first record of a TFRecord file as a `tf.train.Example`, or None when it has no (readable) record."""
    try:
        for serialized in tf.data.TFRecordDataset(path).take(1):
            return tf.train.Example.FromString(serialized.numpy())
    except (tf.errors.OpError, ValueError) as err:  # truncated or not a TFRecord file / not Examples
        logging.warning("%s cannot be read as TFRecords of tf.train.Example: %s", path, err)
    return None


def _stored_key(example):
    feature = example.features.feature.get("cache_key")
    if feature is None or not feature.bytes_list.value:
        return None
    return feature.bytes_list.value[0].decode("utf-8")


def _key_difference(old, new):
    try:
        old, new = json.loads(old), json.loads(new)
    except ValueError:
        return "unreadable key"
    return ", ".join(f"{k}: {old.get(k)} -> {new.get(k)}" for k in sorted(new) if old.get(k) != new.get(k))


def prepare_records(examples, tokenizer, path, max_seq_length, max_qa_length, split, shuffle_seed=None):
    """Returns `(path, examples in record order)`, writing `path` unless it already holds these features.

    A file written by this module is reused when its `cache_key` matches and rebuilt (with a log line saying
    what changed) when not. A file without a key (e.g. written by the original's `run_race.py`) is reused for
    training after checking its sequence length, as the original does; for dev/test it is refused, since its
    question order cannot be checked.

    Args:
      shuffle_seed: write the questions in an order shuffled with this seed (training), else in reading order.
    """
    if shuffle_seed is not None:
        examples = list(examples)
        random.Random(shuffle_seed).shuffle(examples)
        order = f"shuffled:{shuffle_seed}"
    else:
        order = "read"
    key = cache_key(examples, tokenizer, max_seq_length, max_qa_length, order)
    if tf.io.gfile.exists(path):
        existing = first_record(path)
        stored = _stored_key(existing) if existing is not None else None
        if stored == key:
            logging.info("Reusing %s (%d questions)", path, len(examples))
            return path, examples
        if stored is not None or existing is None:
            logging.info("Rebuilding %s: it was built from other settings or data (%s)", path,
                         _key_difference(stored, key) if stored else "empty or unreadable file")
        elif split == "train":
            found = len(existing.features.feature["input_ids"].int64_list.value) \
                if "input_ids" in existing.features.feature else None
            if found != NUM_CHOICES * max_seq_length:
                raise ValueError(f"{path} holds records with input_ids of length {found}, but "
                                 f"{NUM_CHOICES} choices x --max_seq_length {max_seq_length} = "
                                 f"{NUM_CHOICES * max_seq_length}; delete it or pass another --train_file")
            logging.warning("Reusing %s, written by another program: its settings and data cannot be checked",
                            path)
            return path, None
        else:
            raise ValueError(f"{path} was not written by albert_tf (its records have no cache_key), so its "
                             f"question order cannot be checked against the {split} data; delete it or choose "
                             f"another file")
    write_records(examples, tokenizer, path, max_seq_length, max_qa_length, key=key)
    return path, examples


def _parse(serialized, max_seq_length):
    parsed = tf.io.parse_example(serialized, feature_spec(max_seq_length))
    x = {name: tf.reshape(tf.cast(parsed[name], tf.int32), [-1, NUM_CHOICES, max_seq_length])
         for name in ("input_ids", "input_mask", "segment_ids")}
    return x, tf.cast(parsed["label_ids"], tf.int32)


def train_dataset(path, max_seq_length, batch_size, seed=None, input_context=None, skip_batches=0):
    """Endless, shuffled `(features, labels)` batches of `batch_size` (always full) for `fit`.

    With a seed, every pass has its own shuffle (seed + pass number), so the stream of batches is the same for
    every iterator and a resumed run can `skip_batches` to where it stopped. Under `tf.distribute`, each input
    pipeline reads every n-th record.
    """
    records = tf.data.TFRecordDataset(path)
    if input_context is not None and input_context.num_input_pipelines > 1:
        records = records.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if seed is None:
        dataset = records.shuffle(SHUFFLE_BUFFER, reshuffle_each_iteration=True).repeat()
    else:
        passes = tf.data.Dataset.counter()
        dataset = passes.flat_map(
            lambda n: records.shuffle(SHUFFLE_BUFFER, seed=seed + n, reshuffle_each_iteration=False))
    dataset = dataset.batch(batch_size, drop_remainder=True)
    if skip_batches:
        dataset = dataset.skip(skip_batches)  # before parsing: skipped batches cost only their reading
    dataset = dataset.map(lambda s: _parse(s, max_seq_length), num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=seed is not None)
    return dataset.prefetch(tf.data.AUTOTUNE)


def inference_dataset(path, max_seq_length, num_examples, global_batch_size, input_context=None):
    """Batches of `(features, labels, index)` over the whole file, each record once, for `predict_logits`.

    The records are padded with dummy ones (index -1) to a multiple of the global batch size, so every replica
    gets full batches (TPUs need static shapes); each input pipeline reads every n-th record.
    """
    padded = math.ceil(num_examples / global_batch_size) * global_batch_size
    records = tf.data.TFRecordDataset(path).take(num_examples)
    dataset = records.enumerate().map(lambda i, s: (s, tf.cast(i, tf.int32)))
    if padded > num_examples:
        dummy = tf.train.Example(features=tf.train.Features(feature={
            "input_ids": _int_feature([0] * NUM_CHOICES * max_seq_length),
            "input_mask": _int_feature([0] * NUM_CHOICES * max_seq_length),
            "segment_ids": _int_feature([0] * NUM_CHOICES * max_seq_length),
            "label_ids": _int_feature([NO_LABEL])})).SerializeToString()
        padding = tf.data.Dataset.from_tensors((tf.constant(dummy), tf.constant(-1, tf.int32)))
        dataset = dataset.concatenate(padding.repeat(padded - num_examples))
    batch_size = global_batch_size
    if input_context is not None:
        if input_context.num_input_pipelines > 1:
            dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
    dataset = dataset.batch(batch_size, drop_remainder=True)

    def parse(serialized, index):
        x, labels = _parse(serialized, max_seq_length)
        return x, labels, index

    return dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def predict_logits(model, path, num_examples, max_seq_length, batch_size, strategy=None):
    """float32 logits [num_examples, NUM_CHOICES] of the records in `path`, in file order, under any strategy.

    Each replica's logits and record indices are gathered from all replicas inside the step, so the result is
    complete on every worker whatever the sharding; the indices put it back in order and drop the padding.
    """
    strategy = strategy or tf.distribute.get_strategy()
    if batch_size % strategy.num_replicas_in_sync:
        raise ValueError(f"batch size {batch_size} is not divisible by the {strategy.num_replicas_in_sync} "
                         f"replicas")
    dataset = strategy.distribute_datasets_from_function(
        lambda context: inference_dataset(path, max_seq_length, num_examples, batch_size, context))

    def replica_step(x, index):
        logits = tf.cast(model(x, training=False), tf.float32)
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            logits = context.all_gather(logits, axis=0)
            index = context.all_gather(index, axis=0)
        return logits, index

    @tf.function
    def step(iterator):
        x, _, index = next(iterator)
        outputs = strategy.run(replica_step, args=(x, index))
        return tf.nest.map_structure(lambda v: strategy.experimental_local_results(v)[0], outputs)

    result = np.zeros((num_examples, NUM_CHOICES), np.float32)
    seen = np.zeros(num_examples, bool)
    iterator = iter(dataset)
    for _ in range(math.ceil(num_examples / batch_size)):
        logits, index = step(iterator)
        index = index.numpy()
        real = index >= 0
        result[index[real]] = logits.numpy()[real]
        seen[index[real]] = True
    if not seen.all():
        raise RuntimeError(f"inference covered {int(seen.sum())} of {num_examples} records of {path}")
    return result


# ---------------------------------------------------------------------------------------------------------------
# Metrics and outputs


def softmax(logits):
    logits = np.asarray(logits, np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def accuracy_by_level(examples, logits):
    """The original's `eval_accuracy` / `eval_loss` (over labelled questions) and accuracy per level.

    Returns:
      dict with `accuracy`, `eval_accuracy` (the same, the original's name), `eval_loss` (mean cross-entropy),
      `num_examples`, and `accuracy_<level>` / `num_examples_<level>` for each level present.
    """
    probabilities = softmax(logits)
    labels = np.array([NO_LABEL if e.label is None else e.label for e in examples])
    levels = np.array([e.level for e in examples])
    labelled = labels >= 0
    if not labelled.any():
        return {}
    correct = probabilities.argmax(-1) == labels
    losses = -np.log(np.maximum(probabilities[labelled, labels[labelled]], 1e-300))
    results = {"accuracy": float(correct[labelled].mean()), "eval_loss": float(losses.mean()),
               "num_examples": int(labelled.sum())}
    results["eval_accuracy"] = results["accuracy"]
    for level in LEVELS:
        mask = labelled & (levels == level)
        if mask.any():
            results[f"accuracy_{level}"] = float(correct[mask].mean())
            results[f"num_examples_{level}"] = int(mask.sum())
    return results


def predictions(examples, logits):
    """{question_id: {"answer": letter, "probabilities": [p_A, ..., p_D], "level": ..., "label": letter?}}."""
    probabilities = softmax(logits)
    out = {}
    for example, probs in zip(examples, probabilities):
        entry = {"answer": LABELS[int(probs.argmax())], "probabilities": [float(p) for p in probs],
                 "level": example.level}
        if example.label is not None:
            entry["label"] = LABELS[example.label]
        out[example.question_id] = entry
    return out


def write_predictions(prefix, examples, logits):
    """Writes `<prefix>.json` (see `predictions`) and `<prefix>.tsv` (question_id, level, answer, the four
    probabilities, label), each atomically. Returns the two paths."""
    preds = predictions(examples, logits)
    json_path = training.write_json(prefix + ".json", preds)
    tsv_path = prefix + ".tsv"
    tmp = tsv_path + ".tmp"
    with tf.io.gfile.GFile(tmp, "w") as f:
        f.write("question_id\tlevel\tanswer\t" + "\t".join(f"prob_{l}" for l in LABELS) + "\tlabel\n")
        for qid, entry in preds.items():
            f.write("\t".join([qid, entry["level"], entry["answer"], *(f"{p:.6f}" for p in entry["probabilities"]),
                               entry.get("label", "")]) + "\n")
    tf.io.gfile.rename(tmp, tsv_path, overwrite=True)
    return json_path, tsv_path


# ---------------------------------------------------------------------------------------------------------------
# Export


def export_race_model(model, export_dir, tokenizer_file=None, do_lower_case=True, overwrite=False,
                      is_sentencepiece=None, max_seq_length=512, max_qa_length=128):
    """A SavedModel that needs only `tensorflow`, plus `tensorflow_text` (imported before loading, to register
    its ops) when it has the `text` signature.

    `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [batch, 4, seq] (seq up to
    max_position_embeddings) -> float32 `probabilities` and `logits` [batch, 4], int32 `prediction` [batch]
    (0-3) and string `answer` [batch] ("A"-"D"). With a tokenizer file, `tokenization_info` as the encoder export;
    and when `is_sentencepiece` also says what the file is (True: a SentencePiece model, False: a WordPiece
    vocabulary), `text`: strings `article` [batch], `question` [batch], `options` [batch, 4] -> the same outputs,
    from the features `convert_example` builds (`max_seq_length`, `max_qa_length`), tokenized in the graph.
    """
    module = tf.Module()
    module.model = model
    max_positions = model.config.max_position_embeddings
    spec = lambda name: tf.TensorSpec([None, NUM_CHOICES, None], tf.int32, name=name)  # noqa: E731

    def run_model(input_ids, input_mask, segment_ids):
        check = tf.debugging.assert_less_equal(
            tf.shape(input_ids)[2], max_positions,
            message=f"sequence length exceeds max_position_embeddings ({max_positions})")
        with tf.control_dependencies([check]):
            logits = tf.cast(model({"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
                                   training=False), tf.float32)
        prediction = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1), "prediction": prediction,
                "answer": tf.gather(tf.constant(LABELS), prediction)}

    serve = tf.function(run_model, input_signature=[spec("input_ids"), spec("input_mask"), spec("segment_ids")])
    module.serve = serve
    signatures = {"serving_default": serve}
    if tokenizer_file:
        signatures["tokenization_info"] = export.attach_tokenizer(module, tokenizer_file, do_lower_case)
    if tokenizer_file and is_sentencepiece is not None:
        check_lengths(max_seq_length, max_qa_length)
        if max_seq_length > max_positions:
            raise ValueError(f"max_seq_length {max_seq_length} exceeds max_position_embeddings ({max_positions})")
        signatures["text"] = _text_signature(module, run_model, tokenizer_file, do_lower_case, is_sentencepiece,
                                             max_seq_length, max_qa_length)
    return export.save_module(module, export_dir, signatures, overwrite=overwrite)


def _text_signature(module, run_model, tokenizer_file, do_lower_case, is_sentencepiece, max_seq_length,
                    max_qa_length):
    """The raw-text serving function of `export_race_model` (its tokenizer is tracked by `module`)."""
    from albert_tf import text_layers  # pylint: disable=import-outside-toplevel  (needs tensorflow_text)

    preprocessor = text_layers.AlbertTextPreprocessor(
        spm_model_file=tokenizer_file if is_sentencepiece else None,
        vocab_file=None if is_sentencepiece else tokenizer_file, do_lower_case=do_lower_case,
        max_seq_length=max_seq_length)
    # The tokenizer module creates its lookup tables now, so the SavedModel tracks them.
    module.text_tokenizer = text_layers.TextPreprocessorModule(preprocessor)
    cls_id, sep_id = preprocessor.cls_id, preprocessor.sep_id

    def process(text):  # `process_text`
        if is_sentencepiece:
            return text_layers.preprocess_text_graph(text, lower=do_lower_case)
        return text_layers.drop_invalid_utf8(text)

    def with_option(question, option):  # `question_with_option`, element by element of [n] strings
        parts = tf.strings.split(question, sep="_")
        lengths = parts.row_lengths()
        is_last = tf.ragged.range(lengths) == tf.expand_dims(lengths - 1, -1)
        filler = tf.where(is_last.flat_values, "", tf.gather(option, parts.value_rowids()))
        substituted = tf.strings.reduce_join(
            parts.with_flat_values(tf.strings.join([parts.flat_values, filler])), axis=-1)
        has_blank = tf.strings.regex_full_match(question, "(?s).*_.*")
        return tf.where(has_blank, substituted, tf.strings.join([question, option], separator=" "))

    def column(value, rows):
        return tf.RaggedTensor.from_row_lengths(tf.fill([rows], tf.constant(value, tf.int32)),
                                                tf.ones([rows], tf.int64))

    @tf.function(autograph=False, input_signature=[tf.TensorSpec([None], tf.string, name="article"),
                                                   tf.TensorSpec([None], tf.string, name="question"),
                                                   tf.TensorSpec([None, NUM_CHOICES], tf.string, name="options")])
    def serve_text(article, question, options):
        batch_size = tf.shape(article, out_type=tf.int64)[0]
        questions = tf.repeat(process(question), NUM_CHOICES)  # [batch * 4], choice after choice
        qa = with_option(questions, process(tf.reshape(options, [-1])))
        # One tokenization pass (the texts are preprocessed again: a no-op on already processed text).
        ids = module.text_tokenizer.tokenize_to_ids(tf.concat([process(article), qa], axis=0))
        article_ids, qa_ids = ids[:batch_size], ids[batch_size:]
        qa_lengths = qa_ids.row_lengths()
        positions = tf.ragged.range(qa_lengths)
        qa_ids = tf.ragged.boolean_mask(qa_ids, positions >= tf.expand_dims(qa_lengths - max_qa_length, 1))
        article_ids = tf.gather(article_ids, tf.repeat(tf.range(batch_size), NUM_CHOICES))
        keep = tf.minimum(article_ids.row_lengths(), max_seq_length - 3 - qa_ids.row_lengths())
        article_ids = tf.ragged.boolean_mask(article_ids,
                                             tf.ragged.range(article_ids.row_lengths()) < tf.expand_dims(keep, 1))
        rows = batch_size * NUM_CHOICES
        cls, sep = column(cls_id, rows), column(sep_id, rows)
        input_ids = tf.concat([cls, article_ids, sep, qa_ids, sep], axis=1)
        segments = tf.concat([tf.zeros_like(cls), tf.zeros_like(article_ids), tf.zeros_like(sep),
                              tf.ones_like(qa_ids), tf.ones_like(sep)], axis=1)
        shape = [None, max_seq_length]
        features = {"input_ids": input_ids.to_tensor(0, shape=shape),
                    "input_mask": tf.ones_like(input_ids).to_tensor(0, shape=shape),
                    "segment_ids": segments.to_tensor(0, shape=shape)}
        features = {k: tf.reshape(v, [-1, NUM_CHOICES, max_seq_length]) for k, v in features.items()}
        return run_model(**features)

    module.serve_text = serve_text
    return serve_text


# ---------------------------------------------------------------------------------------------------------------
# The run


@dataclasses.dataclass
class RaceParams(training.RuntimeParams):
    """Everything a RACE run needs; the fields and defaults follow `run_race.py`'s flags (the original's)."""

    albert_config: AlbertConfig
    data_dir: str
    output_dir: str
    spm_model_file: str = None
    vocab_file: str = None
    init_checkpoint: str = None
    do_lower_case: bool = True
    dropout_prob: float = 0.1
    max_seq_length: int = 512
    max_qa_length: int = 128
    num_keep_checkpoint: int = 5
    high_only: bool = False
    middle_only: bool = False
    do_train: bool = True
    do_eval: bool = True
    do_predict: bool = False
    train_file: str = None
    eval_file: str = None
    predict_file: str = None
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    learning_rate: float = 1e-5
    train_step: int = 12000
    warmup_step: int = 1000
    save_checkpoints_steps: int = 100
    iterations_per_loop: int = 1000
    optimizer: str = "adamw"
    export_dir: str = None


def build_model(config, dropout_prob=0.1):
    """An `AlbertForMultipleChoice` with its weights built."""
    model = AlbertForMultipleChoice(config, num_choices=NUM_CHOICES, dropout_prob=dropout_prob)
    ones = tf.ones((1, NUM_CHOICES, 2), tf.int32)
    model({"input_ids": ones, "input_mask": ones, "segment_ids": tf.zeros_like(ones)}, training=False)
    return model


def _check_params(params, strategy):
    config = params.albert_config
    if not (params.do_train or params.do_eval or params.do_predict):
        raise ValueError("At least one of --do_train, --do_eval or --do_predict must be True.")
    if params.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"Cannot use --max_seq_length {params.max_seq_length}: the ALBERT model was only trained "
                         f"up to sequence length {config.max_position_embeddings}")
    check_lengths(params.max_seq_length, params.max_qa_length)
    levels_to_read(params.high_only, params.middle_only)
    replicas = strategy.num_replicas_in_sync
    for name in ("train_batch_size", "eval_batch_size", "predict_batch_size"):
        if getattr(params, name) % replicas:
            raise ValueError(f"--{name} {getattr(params, name)} is not divisible by the {replicas} replicas")
    if not (params.spm_model_file or params.vocab_file):
        raise ValueError("--spm_model_file (or --vocab_file for a WordPiece model) is required")


def _evaluate_split(model, params, strategy, tokenizer, split, path, batch_size):
    examples = read_race(params.data_dir, split, params.high_only, params.middle_only)
    if not examples:
        raise ValueError(f"the {split} set under {params.data_dir} holds no question")
    path, examples = prepare_records(examples, tokenizer, path, params.max_seq_length, params.max_qa_length,
                                     split)
    logging.info("***** Running inference on %s: %d questions, batch size %d *****", split, len(examples),
                 batch_size)
    logits = predict_logits(model, path, len(examples), params.max_seq_length, batch_size, strategy)
    return examples, logits, accuracy_by_level(examples, logits)


def run_race(params):
    """Trains (resuming from `output_dir`), evaluates on dev, predicts on test and exports, as asked.

    Writes to `output_dir`: checkpoints, `eval_results.txt` (accuracy, accuracy_middle, accuracy_high,
    eval_accuracy, eval_loss, num_examples..., global_step), `eval_predictions.{json,tsv}`,
    `test_predictions.{json,tsv}` and, when the test set has answers, `predict_results.txt`.
    Returns a dict with the step, results and paths.
    """
    training.set_precision(params.mixed_precision)
    keras.utils.set_random_seed(params.seed)
    strategy = distribution.get_strategy(params.strategy, params.tpu_name, params.tpu_zone, params.gcp_project,
                                         params.master, params.use_tpu)
    _check_params(params, strategy)
    config = params.albert_config
    tokenizer = tokenization.FullTokenizer(vocab_file=params.vocab_file, do_lower_case=params.do_lower_case,
                                           spm_model_file=params.spm_model_file)
    training.check_output_dir(params.output_dir, config)
    write_dir = distribution.worker_dir(params.output_dir, strategy)
    chief = distribution.is_chief(strategy)
    cache_dir = params.output_dir if chief else write_dir
    outcome = {"output_dir": params.output_dir}

    train_examples = None
    if params.do_train:
        train_examples = read_race(params.data_dir, "train", params.high_only, params.middle_only)
        if not train_examples:
            raise ValueError(f"the train set under {params.data_dir} holds no question")
        if any(e.label is None for e in train_examples):
            raise ValueError("the train set has questions without answers")
        train_path, _ = prepare_records(train_examples, tokenizer,
                                        params.train_file or os.path.join(cache_dir, "train.tf_record"),
                                        params.max_seq_length, params.max_qa_length, "train",
                                        shuffle_seed=params.seed)

    with strategy.scope():
        model = build_model(config, params.dropout_prob)
        optimizer = optimization.create_optimizer(params.optimizer, params.learning_rate, params.train_step,
                                                  params.warmup_step)
        model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                      jit_compile=params.jit_compile)
        model.optimizer.build(model.trainable_variables)

        def initialize():
            if params.init_checkpoint:
                logging.info("Initialised from %s", checkpoints.load_checkpoint(model, params.init_checkpoint))

        manager, done = training.restore_or_initialize(model, write_dir, params.num_keep_checkpoint, initialize)

    if params.do_train and done < params.train_step:
        logging.info("***** Running training: %d questions, batch size %d, steps %d (from %d) *****",
                     len(train_examples), params.train_batch_size, params.train_step, done)

        def train_fn(context):
            per_pipeline_skip = done * strategy.num_replicas_in_sync // context.num_input_pipelines
            return train_dataset(train_path, params.max_seq_length,
                                 context.get_per_replica_batch_size(params.train_batch_size), seed=params.seed,
                                 input_context=context, skip_batches=per_pipeline_skip)

        steps, seconds = training.fit_to_step(
            model, strategy.distribute_datasets_from_function(train_fn), manager, params.train_step,
            params.save_checkpoints_steps, params.iterations_per_loop, log_dir=os.path.join(write_dir, "train"),
            log_every=params.log_every)
        outcome["train_seconds"] = seconds
        outcome["train_examples_per_second"] = steps * params.train_batch_size / max(seconds, 1e-9)
        done = int(model.optimizer.iterations.numpy())
    outcome["step"] = done

    if params.do_eval:
        examples, logits, results = _evaluate_split(
            model, params, strategy, tokenizer, "dev", params.eval_file or os.path.join(cache_dir, "eval.tf_record"),
            params.eval_batch_size)
        if not results:
            raise ValueError(f"the dev set under {params.data_dir} has no answers to evaluate against")
        results["global_step"] = done
        outcome["eval_results"] = results
        outcome["eval_results_file"] = training.write_results(os.path.join(write_dir, "eval_results.txt"), results)
        outcome["eval_predictions"] = write_predictions(os.path.join(write_dir, "eval_predictions"), examples,
                                                        logits)
        logging.info("***** Eval results *****\n%s", "\n".join(f"  {k} = {v}" for k, v in sorted(results.items())))

    if params.do_predict:
        examples, logits, results = _evaluate_split(
            model, params, strategy, tokenizer, "test",
            params.predict_file or os.path.join(cache_dir, "predict.tf_record"), params.predict_batch_size)
        outcome["predictions"] = write_predictions(os.path.join(write_dir, "test_predictions"), examples, logits)
        if results:
            results["global_step"] = done
            outcome["predict_results"] = results
            outcome["predict_results_file"] = training.write_results(
                os.path.join(write_dir, "predict_results.txt"), results)

    if params.export_dir and chief:
        outcome["export_dir"] = export_race_model(model, params.export_dir,
                                                  tokenizer_file=params.spm_model_file or params.vocab_file,
                                                  do_lower_case=params.do_lower_case, overwrite=True,
                                                  is_sentencepiece=bool(params.spm_model_file),
                                                  max_seq_length=params.max_seq_length,
                                                  max_qa_length=params.max_qa_length)
    return outcome
