r"""Why a pretrained small ALBERT can fine-tune worse than the same model from random weights at one learning rate:
the scale of its weights, and what its frozen features know.

    python -m bench.support.weight_scale --checkpoint=<work_dir>/pretrained/<candidate>/ckpt-11520 \
      --albert_config_file=<work_dir>/pretrained/<candidate>/albert_config.json \
      --train_record=<work_dir>/features/sst-2_train_64_<key>.tf_record \
      --dev_record=<work_dir>/features/sst-2_dev_64_<key>.tf_record --output=bench/results/lowres_weight_scale.txt

Prints (and writes to `--output`) two tables, for the checkpoint and for the same config freshly initialised (seed 1):
1. the root mean square of every encoder weight. Adam moves each weight by about the learning rate per step
   whatever its size, so a weight 25 times larger than a fresh one changes 25 times less, relatively, at the
   same rate: the pretrained arm of a fair sweep may need a higher rate than the scratch arm.
2. linear probes on frozen features (pooled output, [CLS] hidden state, the mean of the last layer and of the
   embeddings over the tokens): ridge regression on the first 250 / 1,000 / 4,000 examples of `--train_record`
   (classifier records as `run_classifier.py` caches them), the best dev accuracy over five penalties. Above
   the fresh model's, the pretrained features hold something about the task that fine-tuning may keep.
"""

import json

import numpy as np
from absl import app, flags

from bench.support import common

FLAGS = flags.FLAGS
PENALTIES = (0.1, 1.0, 10.0, 100.0, 1000.0)


def read_records(path):
    """All records of `path` as numpy arrays (input_ids, input_mask, segment_ids, label_ids)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from albert_tf.data.glue.features import record_spec  # pylint: disable=import-outside-toplevel

    spec = record_spec(FLAGS.max_seq_length, regression=False)
    batches = tf.data.TFRecordDataset(path).batch(4096).map(lambda r: tf.io.parse_example(r, spec))
    parts = list(batches.as_numpy_iterator())
    return {k: np.concatenate([p[k] for p in parts]).astype(np.int32) for k in parts[0]}


def features(model, records):
    """{name: [N, H] frozen features} of `records`."""
    inputs = {k: records[k] for k in ("input_ids", "input_mask", "segment_ids")}
    out = model(inputs, training=False)
    mask = records["input_mask"][:, :, None].astype(np.float32)

    def token_mean(x):
        return (np.asarray(x) * mask).sum(1) / mask.sum(1)

    return {"pooled": np.asarray(out["pooled_output"]), "cls": np.asarray(out["sequence_output"])[:, 0],
            "token mean": token_mean(out["sequence_output"]), "embedding mean": token_mean(out["embedding_output"])}


def probe_accuracy(x_train, y_train, x_dev, y_dev):
    """Best dev accuracy over PENALTIES of ridge regression on +-1 targets (features standardised on train)."""
    mean, sd = x_train.mean(0), x_train.std(0) + 1e-6
    a = np.c_[(x_train - mean) / sd, np.ones(len(x_train))]
    b = np.c_[(x_dev - mean) / sd, np.ones(len(x_dev))]
    best = 0.0
    for penalty in PENALTIES:
        w = np.linalg.solve(a.T @ a + penalty * np.eye(a.shape[1]), a.T @ (2.0 * y_train - 1))
        best = max(best, float(((b @ w > 0) == y_dev).mean()))
    return best


def define_flags():
    """The flags, defined only when this runs as a script (an import leaves the flag names free)."""
    flags.DEFINE_string("checkpoint", None, "The pretrained checkpoint (a prefix or folder).", required=True)
    flags.DEFINE_string("albert_config_file", None, "Its albert_config.json.", required=True)
    flags.DEFINE_string("train_record", None, "Classifier records of a binary task's training examples.", required=True)
    flags.DEFINE_string("dev_record", None, "Classifier records of its dev examples.", required=True)
    flags.DEFINE_integer("max_seq_length", 64, "The records' sequence length.")
    flags.DEFINE_list("probe_sizes", ["250", "1000", "4000"], "Training examples per probe.")
    flags.DEFINE_string("output", None, "Where the tables are written too.")


def main(argv):
    del argv
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf.checkpoints.loading import load_checkpoint  # pylint: disable=import-outside-toplevel
    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel
    from albert_tf.model.encoder import AlbertModel, dummy_inputs  # pylint: disable=import-outside-toplevel

    with open(FLAGS.albert_config_file, encoding="utf-8") as f:
        config = AlbertConfig.from_dict(json.load(f))
    train, dev = read_records(FLAGS.train_record), read_records(FLAGS.dev_record)
    sizes = [int(n) for n in FLAGS.probe_sizes]
    models = {}
    for arm in ("pretrained", "fresh"):
        keras.utils.set_random_seed(1)
        models[arm] = AlbertModel(config)
        models[arm](dummy_inputs())
        if arm == "pretrained":
            load_checkpoint(models[arm], FLAGS.checkpoint)
    lines = [f"checkpoint {FLAGS.checkpoint}", "", "weight root mean square: fresh (seed 1) / pretrained / ratio"]
    for fresh, trained in zip(models["fresh"].weights, models["pretrained"].weights):
        a, b = (float(np.sqrt(np.mean(np.square(np.asarray(w))))) for w in (fresh, trained))
        ratio = f"{b / a:6.1f}x" if a > 0 else "      -"
        lines.append(f"  {trained.path:<78s} {a:.4f} / {b:.4f} / {ratio}")
    lines += ["", (f"linear probe dev accuracy (%) on frozen features, {len(dev['label_ids'])} dev examples; "
                   f"training examples {', '.join(map(str, sizes))}")]
    for arm, model in models.items():
        f_train, f_dev = features(model, train), features(model, dev)
        for name in f_train:
            scores = [100 * probe_accuracy(f_train[name][:n], train["label_ids"][:n], f_dev[name], dev["label_ids"])
                      for n in sizes]
            lines.append(f"  {arm:<10s} {name:<15s} " + "  ".join(f"{s:5.1f}" for s in scores))
    common.write_report("\n".join(lines) + "\n", FLAGS.output)


if __name__ == "__main__":
    define_flags()
    app.run(main)
