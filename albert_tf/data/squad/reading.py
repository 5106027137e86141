"""Reading a SQuAD v1.1 / v2.0 file into `SquadExample`s (one per question, in file order).

The official JSON layout (`data` -> `paragraphs` -> `context`, `qas` -> `id`, `question`, `answers`, and for v2.0
`is_impossible`), as a plain `.json` file or a `.zip` archive holding one. A file that is not valid JSON, or that
lacks a required field, raises `SquadDataError` naming the file and where the problem is. An answer whose
`answer_start` does not point at its `text` is warned about and counted in `ReadStats`: for training it is moved to
the occurrence of the text nearest the given offset when the text occurs in the context, and the question is skipped
otherwise; evaluation only reads the texts.
"""

import dataclasses
import io
import json
import logging
import random
import zipfile

import tensorflow as tf

from albert_tf.errors import DataError


class SquadDataError(DataError):
    """A SQuAD file cannot be read: not JSON, or a required field is missing; the message names the file and place."""


@dataclasses.dataclass
class SquadExample:
    """One question about one context.

    Attributes:
      qas_id: the question's `id`.
      question_text, paragraph_text: the raw question and context.
      orig_answer_text: training: the answer text ("" for impossible questions); else None.
      start_position: training: the answer's first character in `paragraph_text` (-1 if impossible); else None.
      is_impossible: training: the v2.0 `is_impossible` flag.
      answers: every gold answer text as in the file (for evaluation; empty for impossible questions).
    """

    qas_id: str
    question_text: str
    paragraph_text: str
    orig_answer_text: str = None
    start_position: int = None
    is_impossible: bool = False
    answers: tuple = ()

    @property
    def end_position(self):
        """Training: the answer's last character in `paragraph_text`."""
        if self.start_position is None or self.is_impossible:
            return None
        return self.start_position + len(self.orig_answer_text) - 1


@dataclasses.dataclass
class ReadStats:
    """What `read_squad_examples` found.

    Attributes:
      questions: questions read (examples returned plus skipped).
      impossible: questions marked `is_impossible`.
      offset_mismatches: ids of answers whose `answer_start` does not point at their text.
      offsets_repaired: training: ids whose answer was moved to the nearest occurrence of its text.
      skipped: training: ids dropped because the answer text does not occur in the context.
      extra_answers: training: questions with more than one answer (the first is used).
    """

    questions: int = 0
    impossible: int = 0
    offset_mismatches: list = dataclasses.field(default_factory=list)
    offsets_repaired: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)
    extra_answers: int = 0


def load_squad_json(input_file):
    """The parsed JSON of a SQuAD file (`.json`, or a `.zip` holding one `.json`); raises `SquadDataError`."""
    try:
        with tf.io.gfile.GFile(input_file, "rb") as f:
            raw = f.read()
    except (tf.errors.NotFoundError, OSError) as err:
        raise SquadDataError(f"cannot read SQuAD file {input_file!r}: {err}") from None
    name = input_file
    if raw[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            members = [m for m in archive.namelist() if m.endswith(".json")]
            if len(members) != 1:
                raise SquadDataError(f"{input_file}: a zip archive must hold exactly one .json file, found "
                                     f"{members or 'none'}")
            raw = archive.read(members[0])
            name = f"{input_file}:{members[0]}"
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise SquadDataError(f"{name} is not UTF-8 text: {err}") from None
    except json.JSONDecodeError as err:
        raise SquadDataError(f"{name} is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") \
            from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise SquadDataError(f"{name} is not a SQuAD file: expected a JSON object with a 'data' list of articles")
    return data


def _field(obj, key, kind, where):
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise SquadDataError(f"{where}: missing or invalid {key!r} (expected {expected})")
    return value


def _nearest_occurrence(text, sub, offset):
    best = None
    start = text.find(sub)
    while start != -1:
        if best is None or abs(start - offset) < abs(best - offset):
            best = start
        start = text.find(sub, start + 1)
    return best


def read_squad_examples(input_file, is_training, stats=None):
    """Reads a SQuAD v1.1 or v2.0 file into a list of `SquadExample`s (one per question, in file order).

    Args:
      input_file: path of the `.json` (or `.zip`), any `tf.io.gfile` path.
      is_training: read the answer position (the first answer) for training.
      stats: an optional `ReadStats` filled in place (see its attributes).
    Raises:
      SquadDataError: not JSON, a required field missing (naming the article/paragraph/question), or an id repeated.
    """
    stats = stats if stats is not None else ReadStats()
    data = load_squad_json(input_file)
    examples, seen = [], set()
    for a, article in enumerate(data["data"]):
        where_a = f"{input_file}: data[{a}]"
        for p, paragraph in enumerate(_field(article, "paragraphs", list, where_a)):
            where_p = f"{where_a}.paragraphs[{p}]"
            context = _field(paragraph, "context", str, where_p)
            for q, qa in enumerate(_field(paragraph, "qas", list, where_p)):
                where_q = f"{where_p}.qas[{q}]"
                qas_id = _field(qa, "id", (str, int), where_q)
                qas_id = str(qas_id)
                where_q = f"{where_q} (id {qas_id})"
                if qas_id in seen:
                    raise SquadDataError(f"{where_q}: the question id is repeated; ids must be unique")
                seen.add(qas_id)
                question = _field(qa, "question", str, where_q)
                answers = qa.get("answers", [])
                if not isinstance(answers, list):
                    raise SquadDataError(f"{where_q}: 'answers' must be a list")
                for k, answer in enumerate(answers):
                    _field(answer, "text", str, f"{where_q}.answers[{k}]")
                    _field(answer, "answer_start", int, f"{where_q}.answers[{k}]")
                is_impossible = bool(qa.get("is_impossible", False))
                stats.questions += 1
                stats.impossible += int(is_impossible)
                mismatched = [ans for ans in answers
                              if context[ans["answer_start"]:ans["answer_start"] + len(ans["text"])] != ans["text"]]
                if mismatched:
                    stats.offset_mismatches.append(qas_id)
                    ans = mismatched[0]
                    found = context[ans["answer_start"]:ans["answer_start"] + len(ans["text"])]
                    logging.warning("%s: answer_start %d does not point at the answer text %r (the context has %r "
                                    "there)", where_q, ans["answer_start"], ans["text"], found)
                example = SquadExample(qas_id=qas_id, question_text=question, paragraph_text=context,
                                       answers=tuple(ans["text"] for ans in answers))
                if is_training:
                    example.is_impossible = is_impossible
                    if is_impossible:
                        example.start_position, example.orig_answer_text = -1, ""
                    else:
                        if not answers:
                            raise SquadDataError(f"{where_q}: a training question needs an answer (or "
                                                 "is_impossible: true)")
                        if len(answers) > 1:
                            stats.extra_answers += 1
                        text, start = answers[0]["text"], answers[0]["answer_start"]
                        if not text:
                            raise SquadDataError(f"{where_q}: empty answer text")
                        if context[start:start + len(text)] != text:
                            nearest = _nearest_occurrence(context, text, start)
                            if nearest is None:
                                stats.skipped.append(qas_id)
                                logging.warning("%s: skipped for training: the answer text %r does not occur in "
                                                "the context", where_q, text)
                                continue
                            stats.offsets_repaired.append(qas_id)
                            logging.warning("%s: answer moved from offset %d to %d, where its text occurs",
                                            where_q, start, nearest)
                            start = nearest
                        example.start_position, example.orig_answer_text = start, text
                examples.append(example)
    if stats.offset_mismatches:
        logging.warning("%s: %d answer offset(s) do not match their text (%d moved to the text, %d questions "
                        "skipped)", input_file, len(stats.offset_mismatches), len(stats.offsets_repaired),
                        len(stats.skipped))
    return examples


def read_examples(input_file, is_training, shuffle_seed=12345):
    """The examples of `input_file` and their `ReadStats` (training examples shuffled with
    `random.Random(shuffle_seed)`, as the original); an input without questions is refused."""
    read_stats = ReadStats()
    examples = read_squad_examples(input_file, is_training=is_training, stats=read_stats)
    if not examples:
        raise SquadDataError(f"{input_file} holds no question")
    if is_training and shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(examples)
    return examples, read_stats
