r"""Online masking (`--masked_lm_budget`) cost: the training input pipeline's examples/s with the stored masks and
with new masks drawn on every pass, on records of the shipped corpus (max_predictions_per_seq 20), and the masked
predictions per sequence each gives.

    python bench/bench_masking.py [--seq_lengths=128,512] [--batch_size=256] [--batches=40] [--rounds=3]
    python bench/bench_masking.py --seq_lengths=128 --batches=2 --rounds=1 --output_json=/tmp/m.json   # smoke

Each rate is the median of --rounds runs of --batches batches after one warm-up batch, in one process; the
pipeline runs with its default parallelism (4 parse/mask calls) on however many cores the machine gives it. The
figures go to --output_json (bench/results/bench_masking.json), with the command and the machine.
"""

import os
import statistics
import tempfile
import time

import common  # first: the environment and sys.path every bench script needs

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_list("seq_lengths", ["128", "512"], "Record lengths to measure.")
flags.DEFINE_integer("batch_size", 256, "Batch size of the pipeline.")
flags.DEFINE_integer("batches", 40, "Batches timed per round.")
flags.DEFINE_integer("rounds", 3, "Rounds per setting (the median is printed).")
flags.DEFINE_string("output_json", None, "Where the figures go (default: bench/results/bench_masking.json).")

HERE = common.REPO
SPM = os.path.join(HERE, "data", "30k-clean.model")
SLOTS = 20


def make_records(work_dir, seq_length):
    from albert_tf.data.pretraining import PretrainingConfig, create_pretraining_data  # pylint: disable=import-outside-toplevel

    path = os.path.join(work_dir, f"corpus-{seq_length}.tfrecord")
    config = PretrainingConfig(max_seq_length=seq_length, max_predictions_per_seq=SLOTS, dupe_factor=1)
    stats = create_pretraining_data(os.path.join(HERE, "data", "corpus", "gutenberg-*.txt"), [path],
                                    spm_model_file=SPM, config=config, num_workers=2)
    return path, stats.instances


def rate(dataset, batches, rounds):
    """(median examples/s, mean masked predictions per sequence) over `rounds` runs of `batches` batches."""
    iterator = iter(dataset)
    next(iterator)
    rates, masked, sequences = [], 0.0, 0
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(batches):
            batch = next(iterator)
            masked += float(batch["masked_lm_weights"].numpy().sum())
            sequences += batch["masked_lm_weights"].shape[0]
        rates.append(batches * batch["input_ids"].shape[0] / (time.perf_counter() - start))
    return statistics.median(rates), masked / sequences


def main(argv):
    del argv
    from albert_tf.data import masking, records  # pylint: disable=import-outside-toplevel
    from albert_tf.text.tokenization import FullTokenizer  # pylint: disable=import-outside-toplevel

    config = masking.MaskingConfig.from_tokenizer(FullTokenizer(spm_model_file=SPM), 0.15, SLOTS)
    load_before, figures = common.load_average(), {}
    print(f"load average before: {load_before}")
    with tempfile.TemporaryDirectory() as work_dir:
        for seq_length in (int(s) for s in FLAGS.seq_lengths):
            path, instances = make_records(work_dir, seq_length)
            results = {}
            for name, online in (("stored masks", None), ("online masking", config)):
                dataset = records.pretraining_dataset(path, seq_length, SLOTS, FLAGS.batch_size, is_training=True,
                                                      seed=1, masking=online)
                results[name] = rate(dataset, FLAGS.batches, FLAGS.rounds)
                print(f"seq {seq_length} ({instances} records), {name}: {results[name][0]:,.0f} examples/s, "
                      f"{results[name][1]:.2f} masked predictions per sequence")
            stored, online = results["stored masks"][0], results["online masking"][0]
            print(f"  online masking costs {stored / online:.1f}x the pipeline time of the stored masks")
            figures[str(seq_length)] = {"records": instances, **{
                name: {"examples_per_second": rate_, "masked_per_sequence": masked}
                for name, (rate_, masked) in results.items()}}
    print(f"load average after: {common.load_average()}")
    common.write_result({"load_average_before": load_before, "batch_size": FLAGS.batch_size, "batches": FLAGS.batches,
                         "rounds": FLAGS.rounds, "seq_lengths": figures}, FLAGS.output_json)


if __name__ == "__main__":
    app.run(main)
