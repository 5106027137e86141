"""Layer groups as the original's `transformer_model`: layer l runs group int(l / L * G), in float arithmetic,
for any L and G; a group no layer runs has no weights."""

import numpy as np
import pytest

from albert_tf.config import AlbertConfig, layer_group
from albert_tf.model import AlbertModel, dummy_inputs
from albert_tf.model.layers import SharedTransformerStack


def _original_table(layers, groups):
    """The original's expression, written out here as its modeling.py has it."""
    return [int(layer_idx / layers * groups) for layer_idx in range(layers)]


def _exact_floor_table(layers, groups):
    return [l * groups // layers for l in range(layers)]


def _hugging_face_table(layers, groups):
    """transformers' modeling_albert: int(i / (num_hidden_layers / num_hidden_groups))."""
    return [int(i / (layers / groups)) for i in range(layers)]


@pytest.mark.parametrize("layers,groups", [(22, 22), (23, 23), (44, 22), (46, 23), (18, 14), (27, 21), (5, 2),
                                           (6, 4), (12, 1), (12, 12), (2, 3)])
def test_layer_to_group_table_is_the_originals(layers, groups):
    expected = _original_table(layers, groups)
    assert [layer_group(l, layers, groups) for l in range(layers)] == expected
    encoder = SharedTransformerStack(layers, groups, 1, 2, 8)
    assert [encoder.group_of_layer(l) for l in range(layers)] == expected
    # Only the groups some layer runs have blocks.
    assert [len(g) for g in encoder.groups] == [int(g in expected) for g in range(groups)]


def test_the_formulas_differ_where_claimed():
    """Float rounding: 15 / 22 * 22 = 14.999..., so the original runs group 14 twice and never group 15,
    where exact arithmetic (and keras-hub) would run each group once; Hugging Face differs elsewhere."""
    table = _original_table(22, 22)
    assert table[15] == 14 and 15 not in table
    assert _exact_floor_table(22, 22) == list(range(22))
    assert _hugging_face_table(22, 22) == list(range(22))
    assert _original_table(18, 14) == _exact_floor_table(18, 14)
    assert _hugging_face_table(18, 14)[9] == 6 and _original_table(18, 14)[9] == 7


def _config(layers, groups):
    return AlbertConfig(vocab_size=40, embedding_size=8, hidden_size=8, num_hidden_layers=layers,
                        num_hidden_groups=groups, num_attention_heads=2, intermediate_size=16,
                        max_position_embeddings=16)


@pytest.mark.parametrize("layers,groups", [(5, 2), (22, 22)])
def test_encoder_runs_the_originals_groups(layers, groups):
    """A model with such a config computes each layer with the blocks of the original's group (checked by
    running the blocks by hand), and has exactly the weights of the groups used."""
    config = _config(layers, groups)
    model = AlbertModel(config)
    model(dummy_inputs(), training=False)
    rng = np.random.RandomState(0)
    for variable in model.weights:
        variable.assign(rng.normal(0, 0.3, tuple(variable.shape)).astype("float32")
                        + (1.0 if variable.path.endswith("gamma") else 0.0))
    assert model.count_params() == config.num_parameters()
    ids = rng.randint(0, 40, (2, 6)).astype("int32")
    mask = np.array([[1] * 6, [1, 1, 1, 1, 0, 0]], "int32")
    out = model({"input_ids": ids, "input_mask": mask, "segment_ids": np.zeros_like(ids)})
    hidden = out["embedding_output"]
    for l, group in enumerate(_original_table(layers, groups)):
        for block in model.encoder.groups[group]:
            hidden = block(hidden, padding_mask=mask.astype(bool))
        np.testing.assert_allclose(out["encoder_outputs"][l].numpy(), hidden.numpy(), atol=1e-5,
                                   err_msg=f"layer {l}")
    # The groups really differ, so running another group would have been caught.
    x = out["embedding_output"]
    used = sorted(set(_original_table(layers, groups)))
    a, b = (model.encoder.groups[g][0](x, padding_mask=mask.astype(bool)).numpy() for g in used[:2])
    assert np.abs(a - b).max() > 1e-2
