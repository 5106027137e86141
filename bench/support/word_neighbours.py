r"""What a pretrained checkpoint's word embeddings hold: the nearest pieces of a few sentiment words, and how close
sentiment opposites sit, against the same model freshly initialised.

    python -m bench.support.word_neighbours --checkpoint=/root/albert_sop_scaling/runs/docs-0.25 \
      --albert_config_file=/root/albert_sop_scaling/runs/docs-0.25/albert_config.json \
      --output=bench/results/word_neighbours_docs-0.25.txt

A masked LM that has learnt meaning puts "terrible" near "awful" and "boring" near "dull"; one that has learnt
mostly how often and where words occur puts a frequent word among other frequent words, whatever they mean, and a
rare one among unrelated rare ones. Sentiment opposites share contexts ("a good film", "a bad film"), so even a good
masked LM keeps them close; fine-tuning on few labels has to pull them apart. Prints (and writes to `--output`):
1. for each of `--words`, its `--k` nearest pieces by cosine similarity in the pretrained embedding table;
2. the cosine similarity of each pair of `PAIRS` in the pretrained and the fresh table, and the mean over
   `RANDOM_PAIRS` random pairs of pieces (the baseline of two unrelated pieces).
A word of several pieces is the mean of their vectors; pieces are printed as SentencePiece writes them (a word's first
piece starts with "▁").
"""

import json

import numpy as np
from absl import app, flags

from bench.support import common

FLAGS = flags.FLAGS
PAIRS = (("good", "bad"), ("great", "terrible"), ("best", "worst"), ("love", "hate"), ("funny", "boring"),
         ("beautiful", "ugly"), ("good", "great"), ("bad", "terrible"))
RANDOM_PAIRS = 2000


def word_vector(table, ids):
    """The vector of a word of pieces `ids`: the mean of their rows of `table` [V, E]."""
    return table[list(ids)].mean(0)


def cosine(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


def nearest(table, vector, k, exclude=()):
    """The ids of the `k` rows of `table` closest to `vector` by cosine similarity, best first, `exclude` left out."""
    scores = table @ vector / (np.linalg.norm(table, axis=1) * np.linalg.norm(vector) + 1e-12)
    order = [int(i) for i in np.argsort(-scores) if int(i) not in set(exclude)]
    return order[:k]


def random_pair_cosine(table, count, seed=0):
    """Mean cosine similarity of `count` random pairs of distinct rows of `table`."""
    rng = np.random.default_rng(seed)
    pairs = rng.integers(0, len(table), size=(count, 2))
    return float(np.mean([cosine(table[i], table[j]) for i, j in pairs if i != j]))


def define_flags():
    """The flags, defined only when this runs as a script (an import leaves the flag names free)."""
    flags.DEFINE_string("checkpoint", None, "The pretrained checkpoint (a prefix or folder).", required=True)
    flags.DEFINE_string("albert_config_file", None, "Its albert_config.json.", required=True)
    flags.DEFINE_string("spm_model_file", common.SPM_MODEL, "Its SentencePiece model.")
    flags.DEFINE_list("words", ["good", "bad", "great", "terrible", "boring", "funny"],
                      "Words whose neighbours are listed.")
    flags.DEFINE_integer("k", 8, "Neighbours per word.", lower_bound=1)
    flags.DEFINE_string("output", None, "Where the tables are written too.")


def main(argv):
    del argv
    import keras  # pylint: disable=import-outside-toplevel
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    from albert_tf.checkpoints.loading import load_checkpoint  # pylint: disable=import-outside-toplevel
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel
    from albert_tf.model.encoder import AlbertModel, dummy_inputs  # pylint: disable=import-outside-toplevel

    with open(FLAGS.albert_config_file, encoding="utf-8") as f:
        config = AlbertConfig.from_dict(json.load(f))
    tables = {}
    for arm in ("pretrained", "fresh"):
        keras.utils.set_random_seed(1)
        model = AlbertModel(config)
        model(dummy_inputs())
        if arm == "pretrained":
            load_checkpoint(model, FLAGS.checkpoint)
        [embeddings] = [w for w in model.weights if w.path.endswith("word_embeddings/embeddings")]
        tables[arm] = np.asarray(embeddings)
    pieces = spm.SentencePieceProcessor(model_file=FLAGS.spm_model_file)

    def ids(word):
        return pieces.encode(word.lower(), out_type=int)

    lines = [f"checkpoint {FLAGS.checkpoint}", "",
             f"nearest pieces (pretrained word embeddings, cosine), {FLAGS.k} each"]
    for word in FLAGS.words:
        found = nearest(tables["pretrained"], word_vector(tables["pretrained"], ids(word)), FLAGS.k, ids(word))
        lines.append(f"  {word:<10s} " + " ".join(pieces.id_to_piece(i) for i in found))
    lines += ["", "cosine similarity of word pairs: pretrained / fresh (seed 1)"]
    for a, b in PAIRS:
        values = [cosine(word_vector(t, ids(a)), word_vector(t, ids(b))) for t in (tables["pretrained"],
                                                                                   tables["fresh"])]
        lines.append(f"  {a + ' / ' + b:<26s} {values[0]:6.3f} / {values[1]:6.3f}")
    baseline = [random_pair_cosine(tables[arm], RANDOM_PAIRS) for arm in ("pretrained", "fresh")]
    lines.append(f"  {f'{RANDOM_PAIRS} random pairs (mean)':<26s} {baseline[0]:6.3f} / {baseline[1]:6.3f}")
    common.write_report("\n".join(lines) + "\n", FLAGS.output)


if __name__ == "__main__":
    define_flags()
    app.run(main)
