"""`python -m bench.bench_reference_pretraining` end to end at a toy size: this project's pretraining and Hugging Face's
`AlbertForPreTraining` trained by the original's loop agree step by step and the results file is written; with
the reference's weight decay wrongly applied to the LayerNorm weights the comparison fails."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import REPO, log_tail, subprocess_env

pytest.importorskip("torch")
pytest.importorskip("transformers")

TOY = ["--max_seq_length=32", "--num_train_steps=4", "--num_warmup_steps=2", "--eval_every=4",
       "--compare_steps=4", "--seeds=1", "--nolamb", "--max_eval_steps=1", "--eval_batch_size=16",
       "--output_figure="]


def run_bench(args):
    """`python -m bench.bench_reference_pretraining args` from the checkout; the `CompletedProcess` (text)."""
    return subprocess.run([sys.executable, "-m", "bench.bench_reference_pretraining", *args], cwd=REPO,
                          env=subprocess_env(), capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
def test_toy_run_agrees_step_by_step_and_a_wrong_decay_exclusion_fails(tmp_path):
    work = tmp_path / "work"
    good = run_bench(TOY + ["--dupe_factor=1", f"--work_dir={work}", f"--output_json={tmp_path / 'good.json'}"])
    assert good.returncode == 0, log_tail(good)
    result = json.loads((tmp_path / "good.json").read_text())
    assert result["pass"] and result["verdicts"]["adamw"]["step_by_step"]
    steps = result["adamw"]["step_by_step"]
    assert steps["steps"] == 4 and steps["max_relative_loss_difference"] < 1e-4
    here, reference = (result["adamw"][side]["1"]["train_losses"] for side in ("albert_tf", "reference"))
    assert len(here) == len(reference) == 4
    assert list(result["adamw"]["weights"]) == ["4"] and result["adamw"]["weights"]["4"]["pass"]
    assert result["command"].startswith("python -m bench.bench_reference_pretraining --max_seq_length=32")

    # The same batches and initial weights, the reference decaying the LayerNorm weights (in this process, torch
    # only): the losses still agree this early, the weights after 4 steps do not; with the original's patterns
    # they do.
    from bench import bench_reference_pretraining as bench  # pylint: disable=import-outside-toplevel  (torch)
    with np.load(work / "batches-adamw-seed1.npz") as stored:
        batches = [{k: stored[k][i] for k in stored.files} for i in range(4)]
    init_hf, here_hf = str(work / "init_hf"), str(work / "adamw-seed1-hf-4")
    for exclusions, agree in ((bench.EXCLUDE, True), (("layer_norm", "bias"), False)):
        reference = bench.run_reference(init_hf, batches, False, 4, 2, 1e-3, set(), [], keep_weights_at={4},
                                        exclusions=exclusions)
        worst, variable, _ = bench.compare_updates(init_hf, here_hf, reference["weights"][4])
        assert bench.compare_steps(here, reference["losses"], 4)[0] < 1e-4
        assert (worst <= 1e-3) == agree, (exclusions, worst, variable)
        if not agree:
            assert "LayerNorm" in variable
