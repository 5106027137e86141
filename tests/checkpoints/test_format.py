"""What every checkpoint format inherits (albert_tf/checkpoints/format.py): the load report's line, a format's
defaults (not writable, no config carried, reading refused by name) and `ensure_built` for each model kind."""

import pytest

from albert_tf.checkpoints import CheckpointError
from albert_tf.checkpoints.format import CheckpointFormat, LoadResult, ensure_built
from albert_tf.model import AlbertForMultipleChoice, AlbertForPretraining, AlbertModel
from tests.helpers import tiny_config


def test_the_load_report_counts_and_names_the_first_five_missing():
    missing = [f"w{i}" for i in range(7)]
    assert str(LoadResult("original", ["a", "b"], missing, ["u"])) == \
        "original checkpoint: 2 weights loaded, 7 missing (w0, w1, w2, w3, w4...), 1 unused"
    assert str(LoadResult("native", ["a"], ["w0", "w1"], [])) == \
        "native checkpoint: 1 weights loaded, 2 missing (w0, w1), 0 unused"
    assert str(LoadResult("huggingface", ["a"], [], [])) == \
        "huggingface checkpoint: 1 weights loaded, 0 missing, 0 unused"


def test_a_format_by_default_is_not_writable_carries_no_config_and_refuses_by_name():
    class Bare(CheckpointFormat):
        def detect(self, path):
            return False

    bare = Bare()
    assert (bare.name, bare.description, bare.reads_prefix, bare.saves_models, bare.writable) == \
        ("", "", False, False, False)
    assert bare.read_config("anywhere") is None
    with pytest.raises(CheckpointError, match="^read_arrays does not handle the '' format$"):
        bare.read("anywhere")
    with pytest.raises(CheckpointError, match="^the  format cannot be written$"):
        bare.write(None, "anywhere")

    class Written(Bare):
        name = "mine"

        def write(self, model, path, exclude_ids=frozenset(), **options):
            return path

    assert Written().writable and not Bare().writable


@pytest.mark.parametrize("model_class", [AlbertModel, AlbertForPretraining, AlbertForMultipleChoice])
def test_ensure_built_builds_each_kind_of_model_once(model_class):
    model = model_class(tiny_config())
    assert not model.weights
    ensure_built(model)
    weights = [w.path for w in model.weights]
    assert weights and model.built
    ensure_built(model)  # built already: nothing new
    assert [w.path for w in model.weights] == weights
    if model_class is AlbertForMultipleChoice:
        assert model.output_layer.kernel.shape == (tiny_config().hidden_size, 1)
