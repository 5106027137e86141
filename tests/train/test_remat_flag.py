"""`--remat` through the runner: the trained model recomputes its blocks, and training ends at the same weights
(dropout on, so the recomputation must redraw the forward pass's masks)."""

import numpy as np
import pytest

from albert_tf.checkpoints import native
from albert_tf.config import AlbertConfig
from albert_tf.tasks.pretraining import PretrainingParams, run_pretraining
from albert_tf.train import runner


def _params(records, output_dir, remat):
    path, seq, preds = records
    config = AlbertConfig(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=3,
                          num_hidden_groups=2, num_attention_heads=4, intermediate_size=64,
                          max_position_embeddings=128, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    return PretrainingParams(albert_config=config, input_file=path, output_dir=str(output_dir), max_seq_length=seq,
                             max_predictions_per_seq=preds, train_batch_size=4, num_train_steps=2,
                             num_warmup_steps=0, learning_rate=5e-3, save_checkpoints_steps=1, iterations_per_loop=1,
                             do_eval=False, log_every=0, remat=remat)


@pytest.mark.slow
def test_remat_run_reaches_the_same_weights(tmp_path, pretraining_records, monkeypatch):
    seen = []
    build = runner.set_remat
    monkeypatch.setattr(runner, "set_remat", lambda model, enabled: seen.append(enabled) or build(model, enabled))
    weights = {}

    def read(remat, step):
        return {k: v for k, v in native.read_native(str(tmp_path / str(remat) / f"ckpt-{step}"))[0].items()
                if not k.startswith("model/optimizer/")}

    for remat in (False, True):
        run_pretraining(_params(pretraining_records, tmp_path / str(remat), remat))
        weights[remat] = read(remat, 2)
    assert seen == [False, True]
    assert weights[False].keys() == weights[True].keys() and len(weights[False]) > 20
    for key, value in weights[False].items():
        np.testing.assert_allclose(weights[True][key], value, rtol=0, atol=1e-5, err_msg=key)
    # the second step moved the weights far more than that tolerance, so other dropout masks would show
    step1 = read(False, 1)
    moved = max(float(np.abs(value - step1[key]).max()) for key, value in weights[False].items())
    assert moved > 1e-3, moved
