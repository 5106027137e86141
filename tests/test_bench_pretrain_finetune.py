"""The pieces `python -m bench.bench_pretrain_finetune` adds around the library: the unlabelled task text it
pretrains on (`bench/support/unlabelled_text.py`: passages only, never a label, a question or a dev sentence;
through `prepare_corpus` into the input format) and the recognition of a collapsed fine-tuning run that its
learning-rate choice leaves out (`bench/support/majority_class.py`)."""

import json
import math
import os
import pathlib
import re
import zipfile

import pytest

from bench.support import majority_class, unlabelled_text


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_maximal_phrases_keeps_whole_sentences_only_once_in_first_seen_order():
    phrases = ["b c", "ab c d", "c d", "x", "ab c d", "b", "x y"]
    # "c d" is inside "ab c d", "b" inside "b c", "x" inside "x y"; "b c" is not inside "ab c d" (whole words).
    assert unlabelled_text.maximal_phrases(phrases) == ["b c", "ab c d", "x y"]


def test_glue_sentences_are_the_train_splits_text_without_labels_or_dev(tmp_path):
    _write(tmp_path / "SST-2" / "train.tsv", "sentence\tlabel\na fine film \t1\nfine film \t1\ndull \t0\n")
    _write(tmp_path / "SST-2" / "dev.tsv", "sentence\tlabel\nthe dev sentence \t1\n")
    _write(tmp_path / "MRPC" / "train.tsv",
           "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
           "1\t1\t2\tHe said so.\tSo he said.\n0\t3\t4\tIt rained.\tHe said so.\n")
    assert unlabelled_text.glue_sentences(str(tmp_path), "sst-2") == ["a fine film", "dull"]
    assert unlabelled_text.glue_sentences(str(tmp_path), "mrpc") == ["He said so.", "So he said.", "It rained."]
    docs = unlabelled_text.documents("sst-2", None, None, str(tmp_path))
    assert docs == [["a fine film", "dull"]]


def test_glue_sentences_are_grouped_into_documents():
    sentences = [f"s{i}" for i in range(23)]
    docs = unlabelled_text.grouped(sentences)
    assert [len(d) for d in docs] == [10, 10, 3] and sum(docs, []) == sentences


def test_race_documents_hold_the_articles_only(tmp_path):
    question = {"answers": ["A"], "options": [["an option", "b", "c", "d"]], "questions": ["A question?"],
                "article": "First paragraph. It goes on.\nSecond paragraph.\n\n", "id": "high1.txt"}
    _write(tmp_path / "dev" / "high" / "1.txt", json.dumps(question))
    assert list(unlabelled_text.race_documents(str(tmp_path))) == [["First paragraph. It goes on.",
                                                                     "Second paragraph."]]
    with pytest.raises(SystemExit, match="no RACE files"):
        list(unlabelled_text.race_documents(str(tmp_path / "missing")))


@pytest.mark.parametrize("zipped", [False, True])
def test_squad_documents_are_each_articles_contexts(tmp_path, zipped):
    data = {"version": "1.1", "data": [
        {"title": "T1", "paragraphs": [{"context": "One. Two.", "qas": [{"question": "Q?", "id": "1",
                                                                         "answers": []}]},
                                       {"context": "Three.", "qas": []}]},
        {"title": "T2", "paragraphs": [{"context": "Four.", "qas": []}]}]}
    path = tmp_path / "dev-v1.1.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    if zipped:
        with zipfile.ZipFile(tmp_path / "dev.zip", "w") as archive:
            archive.write(path, "dev-v1.1.json")
        path = tmp_path / "dev.zip"
    assert list(unlabelled_text.squad_documents(str(path))) == [["One. Two.", "Three."], ["Four."]]


def test_unknown_source_is_refused():
    with pytest.raises(SystemExit, match="--extra_text wiki: must be one of race, squad, sst-2, mrpc"):
        unlabelled_text.documents("wiki", None, None, None)


def test_documents_reach_the_input_format_through_prepare_corpus(tmp_path):
    from albert_tf.data.corpus import prepare_corpus

    jsonl = tmp_path / "extra.jsonl"
    count = unlabelled_text.write_jsonl(str(jsonl), [["First one here. Second one here.", "A new paragraph."],
                                                     ["one sentence without a stop", "another"]])
    assert count == 2
    stats = prepare_corpus([str(jsonl)], str(tmp_path / "extra.txt"))
    assert stats.documents_written == 2
    assert (tmp_path / "extra.txt").read_text(encoding="utf-8") == (
        "First one here.\nSecond one here.\nA new paragraph.\n\none sentence without a stop\nanother\n")


MRPC_SHARES = {"0": 129 / 408, "1": 279 / 408}


@pytest.mark.parametrize("result, one_class", [
    ({"eval_accuracy": 279 / 408, "f1": 2 * (279 / 408) / (1 + 279 / 408)}, True),  # always "1"
    ({"eval_accuracy": 129 / 408, "f1": 0.0}, True),  # always "0"
    ({"eval_accuracy": 279 / 408, "f1": 0.70}, False),  # the majority's accuracy, by a model that varies
    ({"eval_accuracy": 0.66, "f1": 0.75}, False),
    ({"eval_accuracy": 279 / 408}, True),  # no F1 reported: the accuracy decides
])
def test_predicts_one_class(result, one_class):
    assert majority_class.predicts_one_class(result, MRPC_SHARES) is one_class


def test_dev_label_shares_are_read_from_the_dev_split(tmp_path):
    _write(tmp_path / "MRPC" / "dev.tsv", "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
           "1\t1\t2\tA.\tB.\n1\t3\t4\tC.\tD.\n0\t5\t6\tE.\tF.\n1\t7\t8\tG.\tH.\n")
    assert majority_class.dev_label_shares(str(tmp_path), "mrpc") == {"0": 0.25, "1": 0.75}


# The low-resource run's plan (bench/support/label_subsets.py): the subsets both arms fine-tune on, the seeds and
# steps of each size, and the results file a stopped run resumes from.

def _label_subsets():
    from bench.support import label_subsets

    return label_subsets


def test_subsets_are_seeded_stratified_and_nested():
    subsets = _label_subsets()
    labels = ["0"] * 70 + ["1"] * 30
    ten = subsets.subset_indices(labels, 10, seed=1)
    assert ten == sorted(ten) and len(set(ten)) == 10
    assert sorted(labels[i] for i in ten) == ["0"] * 7 + ["1"] * 3  # each label keeps its share
    assert subsets.subset_indices(labels, 10, seed=1) == ten  # seeded
    assert subsets.subset_indices(labels, 10, seed=2) != ten
    forty = subsets.subset_indices(labels, 40, seed=1)
    assert set(ten) < set(forty) < set(subsets.subset_indices(labels, 99, seed=1))  # nested for one seed
    assert subsets.subset_indices(labels, None, seed=1) == list(range(100))


def _glue_sst2(tmp_path):
    rows = [f"sentence {i} \t{int(i % 3 == 0)}" for i in range(30)]
    _write(tmp_path / "glue" / "SST-2" / "train.tsv", "sentence\tlabel\n" + "\n".join(rows) + "\n")
    _write(tmp_path / "glue" / "SST-2" / "dev.tsv", "sentence\tlabel\na dev one \t1\n")
    return str(tmp_path / "glue"), rows


def test_both_arms_fine_tune_on_the_same_subset_and_the_whole_dev_set(tmp_path):
    subsets = _label_subsets()
    glue_dir, rows = _glue_sst2(tmp_path)
    # Each arm writes the subset of its (task, size, seed); the folder and its bytes are the same.
    first, n = subsets.write_subset(glue_dir, "sst-2", 9, 1, str(tmp_path / "subsets"))
    train = (tmp_path / "subsets" / "sst-2-n9-seed1" / "SST-2" / "train.tsv").read_bytes()
    again, _ = subsets.write_subset(glue_dir, "sst-2", 9, 1, str(tmp_path / "subsets"))
    elsewhere, _ = subsets.write_subset(glue_dir, "sst-2", 9, 1, str(tmp_path / "other"))
    assert n == 9 and again == first == str(tmp_path / "subsets" / "sst-2-n9-seed1")
    assert (tmp_path / "other" / "sst-2-n9-seed1" / "SST-2" / "train.tsv").read_bytes() == train
    keep = subsets.subset_indices([r.split("\t")[1] for r in rows], 9, 1)
    assert train.decode() == "sentence\tlabel\n" + "".join(rows[i] + "\n" for i in keep)
    assert (tmp_path / "subsets" / "sst-2-n9-seed1" / "SST-2" / "dev.tsv").read_text() == \
        "sentence\tlabel\na dev one \t1\n"
    subsets.write_subset(glue_dir, "sst-2", 9, 2, str(tmp_path / "subsets"))
    assert (tmp_path / "subsets" / "sst-2-n9-seed2" / "SST-2" / "train.tsv").read_bytes() != train


def test_sizes_are_parsed_and_sizes_larger_than_the_data_refused_in_one_line():
    subsets = _label_subsets()
    assert subsets.parse_sizes(["all", "1000", "250"], "train_sizes") == [250, 1000, None]
    with pytest.raises(SystemExit) as refused:
        subsets.check_sizes([250, 1000, 4000, None], 3668, "mrpc", "pair_train_sizes")
    assert str(refused.value) == ("bench_pretrain_finetune: error: --pair_train_sizes 4000: mrpc has 3,668 "
                                  "training examples")
    subsets.check_sizes([250, 3668, None], 3668, "mrpc", "pair_train_sizes")
    for bad, message in ((["0"], "a size is a positive number or all"), (["ten"], "a size is a positive number"),
                         (["250", "250"], "lists 250 twice")):
        with pytest.raises(SystemExit, match=message):
            subsets.parse_sizes(bad, "train_sizes")


def test_five_seeds_below_1000_labels_three_otherwise():
    subsets = _label_subsets()
    seeds = [1, 2, 3, 4, 5]
    assert [len(subsets.seeds_for_size(n, seeds)) for n in (8, 250, 999, 1000, 4000, None)] == [5, 5, 5, 3, 3, 3]
    assert subsets.seeds_for_size(4000, [7, 8, 9, 10, 11]) == [7, 8, 9]
    with pytest.raises(SystemExit, match="--seeds lists 3 seeds; 250 labels need 5"):
        subsets.seeds_for_size(250, [1, 2, 3])


def test_steps_per_size_end_on_an_evaluation_and_stop_at_the_full_run():
    subsets = _label_subsets()
    full = {"steps": 1500, "batch_size": 64, "warmup_steps": 150, "eval_every": 250}
    assert subsets.steps_for_size(None, full, 30, 200) == full
    small = subsets.steps_for_size(250, full, 30, 200)  # 30 passes of 250 are 118 steps: the floor of 200 holds
    assert small == {"steps": 240, "batch_size": 64, "warmup_steps": 24, "eval_every": 40}
    middle = subsets.steps_for_size(1000, full, 30, 200)  # 469 steps, rounded up to 6 evaluations of 80
    assert middle["steps"] == 480 and middle["steps"] % middle["eval_every"] == 0
    assert subsets.steps_for_size(4000, full, 30, 200)["steps"] == 1500


def test_results_are_written_atomically_and_resumed(tmp_path):
    subsets = _label_subsets()
    path = tmp_path / "results" / "lowres.json"
    store = subsets.ResultStore(str(path), {"sizes": [250]})
    key = store.run_key("mrpc", 250, "scratch", 3e-4, 1)
    store.put(key, {"dev_accuracy": 70.0})
    resumed = subsets.ResultStore(str(path), {"sizes": [250]})
    assert resumed.get(key) == {"dev_accuracy": 70.0} and resumed.get(store.run_key("mrpc", None, "scratch",
                                                                                       3e-4, 1)) is None
    before = path.read_bytes()
    with pytest.raises(TypeError):
        resumed.put("unwritable", {"value": object()})  # fails half-way through the JSON
    assert path.read_bytes() == before and os.listdir(path.parent) == ["lowres.json"]
    with pytest.raises(SystemExit, match=r"holds a run with other settings \(sizes differ\)"):
        subsets.ResultStore(str(path), {"sizes": [250, 1000]})


def test_rate_choice_skips_collapsed_runs_and_an_edge_choice_widens_the_grid_for_both_arms():
    subsets = _label_subsets()
    grid = [3e-5, 1e-4, 3e-4, 1e-3]
    sweep = {"3e-05": {"dev_accuracy": 52.0, "constant_final": False},
             "0.0001": {"dev_accuracy": 51.0, "constant_final": False},
             "0.0003": {"dev_accuracy": 60.0, "constant_final": True},
             "0.001": {"dev_accuracy": 57.0, "constant_final": False}}
    assert subsets.choose_rate(grid, sweep) == (1e-3, [3e-4])
    collapsed = {k: dict(v, constant_final=True) for k, v in sweep.items()}
    assert subsets.choose_rate(grid, collapsed) == (3e-4, grid)
    assert [subsets.next_rate(r, True) for r in (3e-5, 1e-4, 1e-3, 3e-3)] == pytest.approx([1e-4, 3e-4, 3e-3, 1e-2])
    assert [subsets.next_rate(r, False) for r in (3e-5, 1e-4, 1e-3)] == pytest.approx([1e-5, 3e-5, 3e-4])
    assert subsets.widened_grid(grid, {"pretrained": 1e-3, "scratch": 1e-4}) == [3e-5, 1e-4, 3e-4, 1e-3, 3e-3]
    assert subsets.widened_grid(grid, {"pretrained": 1e-3, "scratch": 3e-5}) == [1e-5, 3e-5, 1e-4, 3e-4, 1e-3,
                                                                                  3e-3]
    assert subsets.widened_grid(grid, {"pretrained": 3e-4, "scratch": 1e-4}) is None


def test_a_sweep_whose_choice_sits_on_the_edge_runs_both_arms_at_the_next_rate():
    subsets = _label_subsets()
    best = {"pretrained": 3e-3, "scratch": 1e-4}  # the pretrained arm's best lies above the grid's 1e-3
    ran, lines = [], []

    def run(arm, rate):
        ran.append((arm, rate))
        return {"dev_accuracy": 70 - abs(math.log10(rate / best[arm])), "constant_final": False}

    grid, sweep, chosen, one_class = subsets.sweep_rates([1e-3, 1e-4, 3e-4], list(best), run, 2, log=lines.append)
    assert chosen == {"pretrained": 3e-3, "scratch": 1e-4} and one_class == {"pretrained": [], "scratch": []}
    assert grid == pytest.approx([3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2])  # up once for one arm, down for the other
    assert sorted(ran) == sorted((arm, rate) for arm in best for rate in grid)  # each arm once at every rate
    assert set(sweep["pretrained"]) == {f"{rate:g}" for rate in grid}
    assert lines == ["  a chosen rate is at the sweep's edge: every arm swept at 3e-05, 0.003 too",
                     "  a chosen rate is at the sweep's edge: every arm swept at 0.01 too"]
    # no widening allowed: the choice stays on the edge of the grid given
    assert subsets.sweep_rates([1e-4, 1e-3], list(best), run, 0, log=lines.append)[2]["pretrained"] == 1e-3


def test_the_rate_choice_reads_the_score_it_is_given():
    subsets = _label_subsets()
    sweep = {"0.0001": {"final": 60.0, "dev_accuracy": 70.0, "constant_final": False},
             "0.001": {"final": 65.0, "dev_accuracy": 50.0, "constant_final": False}}
    assert subsets.choose_rate([1e-4, 1e-3], sweep)[0] == 1e-4
    assert subsets.choose_rate([1e-4, 1e-3], sweep, score="final")[0] == 1e-3


def _lowres_settings(**changed):
    settings = {"albert_config": {"hidden_size": 128}, "spm_model_file": "30k-clean.model", "max_seq_length": 64,
                "subset_seed": 1, "subset_epochs": 30, "subset_min_steps": 200,
                "task_settings": {"sst-2": {"steps": 1500}, "mrpc": {"steps": 600}}}
    return {**settings, **changed}


def test_another_runs_scratch_arm_is_borrowed_only_when_its_runs_are_this_runs(tmp_path):
    subsets = _label_subsets()
    path = tmp_path / "earlier.json"
    other = subsets.ResultStore(str(path), dict(_lowres_settings(), pretrained="another model", lr_grid=[1e-4]))
    scratch, long, pretrained = (other.run_key("sst-2", 250, arm, 1e-4, 1, factor)
                                 for arm, factor in (("scratch", 1), ("scratch", 2), ("pretrained", 1)))
    for key in (scratch, long, pretrained):
        other.put(key, {"dev_accuracy": 60.0})
    borrowed = subsets.borrowed_runs(str(path), _lowres_settings(), ["sst-2"], "scratch", "--scratch_results_json",
                                     str(tmp_path))
    assert borrowed == {scratch: {"dev_accuracy": 60.0, "read_from": "earlier.json"},
                        long: {"dev_accuracy": 60.0, "read_from": "earlier.json"}}  # never the pretrained arm
    with pytest.raises(SystemExit, match=r"^bench_pretrain_finetune: error: --scratch_results_json .*earlier\.json: "
                                         r"its scratch runs were made with other settings \(subset_epochs, "
                                         r"task_settings\.sst-2 differ\)$"):
        subsets.borrowed_runs(str(path), _lowres_settings(subset_epochs=10, task_settings={"sst-2": {"steps": 9}}),
                              ["sst-2"], "scratch", "--scratch_results_json", str(tmp_path))
    with pytest.raises(SystemExit, match=r"--scratch_results_json .*missing\.json: .*No such file"):
        subsets.borrowed_runs(str(tmp_path / "missing.json"), _lowres_settings(), ["sst-2"], "scratch",
                              "--scratch_results_json", str(tmp_path))


# Task-adaptive pretraining (bench/support/task_adaptive.py): the task's unlabelled training text, part of it held
# out to measure the masked LM on.

def test_every_twentieth_document_of_the_task_text_is_held_out():
    from bench.support import task_adaptive

    docs = [[f"sentence {i}"] for i in range(45)]
    train, held = task_adaptive.split_documents(docs)
    assert held == [docs[0], docs[20], docs[40]]
    assert len(train) == 42 and not any(d in held for d in train)


def test_adaptation_records_hold_the_task_text_and_never_the_held_out_documents(tmp_path):
    import tensorflow as tf

    from albert_tf.text import tokenization
    from bench.support import common, task_adaptive, unlabelled_text

    words = ["river", "castle", "lantern", "harvest", "pepper", "violin", "garden", "silver", "thunder", "meadow"]
    rows = [f"the {words[i % 10]} and the {words[(i * 7 + 3) % 10]} number {100 + i} \t{i % 2}" for i in range(60)]
    _write(tmp_path / "glue" / "SST-2" / "train.tsv", "sentence\tlabel\n" + "\n".join(rows) + "\n")
    _write(tmp_path / "glue" / "SST-2" / "dev.tsv", "sentence\tlabel\nnever seen \t1\n")
    counts = task_adaptive.make_records(str(tmp_path), "sst-2", str(tmp_path / "glue"), common.SPM_MODEL, 32, 5, 2)
    docs = unlabelled_text.documents("sst-2", None, None, str(tmp_path / "glue"))
    train_docs, held_docs = task_adaptive.split_documents(docs)
    assert counts["train"]["documents"] == len(train_docs) and counts["heldout"]["documents"] == len(held_docs)
    assert counts["train"]["dupe_factor"] == 2 and counts["train"]["instances"] > counts["heldout"]["instances"] > 0

    tokenizer = tokenization.FullTokenizer(None, spm_model_file=common.SPM_MODEL)
    numbers = {}
    for split in ("train", "heldout"):
        seen = set()
        for raw in tf.data.TFRecordDataset(str(tmp_path / f"{split}.tfrecord")):
            example = tf.train.Example.FromString(raw.numpy())
            ids = list(example.features.feature["input_ids"].int64_list.value)
            positions = list(example.features.feature["masked_lm_positions"].int64_list.value)
            labels = list(example.features.feature["masked_lm_ids"].int64_list.value)
            for p, label in zip(positions, labels):
                if p:
                    ids[p] = label  # the text as written, masks undone
            text = "".join(tokenizer.convert_ids_to_tokens([i for i in ids if i])).replace("\u2581", " ")
            seen.update(int(n) for n in re.findall(r"number (\d{3})(?!\d)", text))
        numbers[split] = seen
    held_numbers = {int(s.split("number ")[1]) for d in held_docs for s in d}
    train_numbers = {int(s.split("number ")[1]) for d in train_docs for s in d}
    assert numbers["heldout"] and numbers["heldout"] <= held_numbers  # truncation may cut a sentence off
    assert numbers["train"] and numbers["train"] <= train_numbers
    assert "never seen" not in (tmp_path / "train.txt").read_text() + (tmp_path / "heldout.txt").read_text()


def test_a_pretraining_run_short_of_its_steps_is_refused_before_anything_is_copied(tmp_path):
    import subprocess
    import sys

    from tests.helpers import REPO, subprocess_env

    rows = "".join(f"a sentence number {i} \t{i % 2}\n" for i in range(300))
    _write(tmp_path / "glue" / "SST-2" / "train.tsv", "sentence\tlabel\n" + rows)
    _write(tmp_path / "glue" / "SST-2" / "dev.tsv", "sentence\tlabel\nanother one \t1\n")
    run = tmp_path / "pretraining"
    _write(run / "albert_config.json", pathlib.Path(REPO, "data", "albert_config_tiny.json").read_text(encoding="utf-8"))
    _write(run / "settings.json", json.dumps({"settings": {"num_train_steps": 100, "max_seq_length": 64}}))
    _write(run / "checkpoint", 'model_checkpoint_path: "ckpt-60"\nall_model_checkpoint_paths: "ckpt-60"\n')
    _write(run / "ckpt-60.index", "")
    work = tmp_path / "work"
    done = subprocess.run([sys.executable, "-m", "bench.bench_pretrain_finetune", f"--work_dir={work}",
                           f"--pretrained_checkpoint={run}", "--train_sizes=250", "--skip_pair",
                           f"--glue_dir={tmp_path / 'glue'}", f"--results_json={tmp_path / 'results.json'}"],
                          cwd=REPO, env=subprocess_env(), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        f"bench_pretrain_finetune: error: --pretrained_checkpoint {run}: its latest checkpoint is at step 60 of the "
        "100 its settings.json records (still training, or stopped): give a finished run")
    assert not (work / "pretrained").exists() and not (tmp_path / "results.json").exists()
