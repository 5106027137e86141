"""The export folder rules (albert_tf/serving/savedmodel.py): what counts as one of this program's exports (and
so may be replaced), why a folder cannot be written, and the size of an export's weights."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.serving import savedmodel
from tests.helpers import SPM, make_files


def test_what_counts_as_an_export(tmp_path):
    assert savedmodel.is_export(make_files(tmp_path / "sm", "saved_model.pb", "fingerprint.pb", "assets.extra/x"))
    assert savedmodel.is_export(make_files(tmp_path / "every_part", "saved_model.pb", "saved_model.pbtxt",
                                           "fingerprint.pb", "variables/variables.index", "assets/a", "assets.extra/x"))
    assert savedmodel.is_export(make_files(tmp_path / "graphless", "variables/variables.index")) is False
    assert savedmodel.is_export(make_files(tmp_path / "with_data", "saved_model.pb", "train.tsv")) is False
    (tmp_path / "nothing").mkdir()
    assert savedmodel.is_export(str(tmp_path / "nothing")) is False
    assert savedmodel.is_export(make_files(tmp_path / "squad_file", "ids")) is False  # `ids` a file, not a folder
    assert savedmodel.is_export(make_files(tmp_path / "squad_half", "ids/saved_model.pb", "text/notes.txt")) is False
    assert savedmodel.is_export(make_files(tmp_path / "squad_versions", "ids/3/saved_model.pb",
                                           "ids/v4/saved_model.pb")) is False
    assert savedmodel.is_export(make_files(tmp_path / "squad_one", "text/1/saved_model.pb"))
    assert savedmodel.is_export(make_files(tmp_path / "squad_both", "ids/saved_model.pb", "text/2/saved_model.pb"))
    lite = make_files(tmp_path / "lite", "model.tflite", "30k-clean.model")
    (tmp_path / "lite" / "tflite_info.json").write_text(json.dumps({"tokenizer_file": "30k-clean.model"}))
    assert savedmodel.is_export(lite)
    (tmp_path / "lite" / "tflite_info.json").write_text("[]")  # no object: not this program's
    assert savedmodel.is_export(lite) is False
    (tmp_path / "lite" / "tflite_info.json").write_text("{}")  # no tokenizer named: the model file is foreign
    assert savedmodel.is_export(lite) is False
    assert savedmodel.is_export(make_files(tmp_path / "empty_ids", "ids/.keep")) is False
    bare = make_files(tmp_path / "lite_bare", "model.tflite")  # a model whose info names no tokenizer file
    (tmp_path / "lite_bare" / "tflite_info.json").write_text("{}")
    assert savedmodel.is_export(bare)


def test_why_a_folder_cannot_be_written(tmp_path):
    assert savedmodel.export_dir_problem(str(tmp_path / "new"), overwrite=False) is None
    (tmp_path / "empty").mkdir()
    assert savedmodel.export_dir_problem(str(tmp_path / "empty"), overwrite=False) is None
    make_files(tmp_path, "file")
    assert savedmodel.export_dir_problem(str(tmp_path / "file"), True) == f"export directory {tmp_path}/file is a file"
    old = make_files(tmp_path / "old", "saved_model.pb", "variables/variables.index")
    assert savedmodel.export_dir_problem(old, False) == \
        f"export directory {old} exists and is not empty; pass --overwrite to replace it"
    assert savedmodel.export_dir_problem(old, True) is None
    notes = make_files(tmp_path / "notes", "a.txt", "b.txt", "c.txt", "d.txt")
    assert savedmodel.export_dir_problem(notes, True) == (
        f"export directory {notes} holds files that are not an export (a.txt, b.txt, c.txt, ...); --overwrite "
        "replaces only an earlier export: choose another --export_dir")
    with pytest.raises(savedmodel.ExportError, match="is not empty"):
        savedmodel.check_export_dir(old, False)
    savedmodel.check_export_dir(old, True)


def test_the_size_counts_the_weights_apart(tmp_path):
    folder = make_files(tmp_path / "sm", "saved_model.pb", content=b"g" * 10)
    make_files(folder, "variables/variables.data-00000-of-00001", content=b"w" * 100)
    make_files(folder, "variables/variables.index", content=b"i" * 5)
    make_files(folder, "assets/variables/x.txt", content=b"a" * 7)  # named like them, not under the top variables/
    assert savedmodel.saved_model_size(folder) == {"variables": 105, "total": 122}


class _Scaler(tf.Module):
    """A nested tf.Module with a Keras layer and a function decorated on its class."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    def scale(self, x):
        return 3.0 * self.layer(x)


def test_the_serving_root_keeps_every_weight_once_and_every_function(tmp_path):
    """Keras layers held in a list, in a dict, shared by two holders and inside a nested tf.Module are saved with
    their weights, the shared one once; the functions of the module, of the nested one and of its class come
    back and compute what the originals did."""
    keras.utils.set_random_seed(0)
    shared, other, third = (keras.layers.Dense(2) for _ in range(3))
    x = tf.constant([[1.0, 2.0], [3.0, -1.0]])
    for layer in (shared, other, third):
        layer(x)
    module = tf.Module()
    module.layers = [shared, None, other]
    module.by_name = {"third": third, "again": shared, "text": "not trackable"}
    module.nested = _Scaler(shared)
    module.total = tf.function(lambda v: shared(v) + other(v) + third(v),
                               input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    export_dir = savedmodel.save_module(module, str(tmp_path / "m"), {"serving_default": module.total})
    loaded = tf.saved_model.load(export_dir)
    expected = (shared(x) + other(x) + third(x)).numpy()
    np.testing.assert_allclose(loaded.signatures["serving_default"](x)["output_0"].numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(loaded.total(x).numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(loaded.nested.scale(x).numpy(), 3.0 * shared(x).numpy(), rtol=1e-6)
    assert len(loaded.layers) == 2 and sorted(loaded.by_name) == ["again", "third"]  # nothing untrackable kept
    reader = tf.train.load_checkpoint(os.path.join(export_dir, "variables", "variables"))
    kernels = [name for name in reader.get_variable_to_shape_map() if "kernel" in name]
    assert len({tuple(reader.get_tensor(k).ravel()) for k in kernels}) == 3  # three layers, each saved
    assert len(kernels) == 3  # the shared layer once, however many hold it
    with pytest.raises(savedmodel.ExportError, match="exists and is not empty; pass --overwrite"):
        savedmodel.save_module(module, export_dir, {"serving_default": module.total})


def test_the_tokenizer_travels_as_an_asset_with_its_casing(tmp_path):
    module = tf.Module()
    info = savedmodel.attach_tokenizer(module, SPM, do_lower_case=0)
    export_dir = savedmodel.save_module(module, str(tmp_path / "m"), {"tokenization_info": info})
    loaded = tf.saved_model.load(export_dir)
    answer = loaded.tokenization_info()
    assert os.path.basename(answer["vocab_file"].numpy().decode()) == os.path.basename(SPM)
    assert answer["do_lower_case"].dtype == tf.bool and not answer["do_lower_case"].numpy()
    assert loaded.do_lower_case.trainable is False
    with pytest.raises(savedmodel.ExportError, match="^tokenizer file not found: .*nothing.model$"):
        savedmodel.attach_tokenizer(tf.Module(), str(tmp_path / "nothing.model"), True)


def test_a_refusal_is_the_checks_own_line():
    class Error:
        def __init__(self, message):
            self.message = message

    graph = "Graph execution error:\n\nDetected at node assert\nassertion failed: [sequence length exceeds " \
            "max_position_embeddings (128)] [Condition x <= y did not hold]\n\t [[{{node Assert}}]]"
    assert savedmodel.refusal(Error(graph)) == "sequence length exceeds max_position_embeddings (128)"
    assert savedmodel.refusal(Error("input_ids outside the vocabulary [0, 30000) held")) == \
        "input_ids outside the vocabulary [0, 30000)"
    assert savedmodel.refusal(Error("Graph execution error:\n\nsomething else\nmore")) == "something else"
    # another export's own assertion, as TF words it for a loaded SavedModel: its message, not TF's context
    loaded = ("Graph execution error:\n\nDetected at node assert_less_equal/Assert/Assert defined at (most recent "
              "call last):\n<stack traces unavailable>\nassertion failed: [batch of more than 2] [Condition x <= y "
              "did not hold element-wise:] [x (Size:0) = ] [3]\n\t [[{{node assert_less_equal/Assert/Assert}}]]")
    assert savedmodel.refusal(Error(loaded)) == "batch of more than 2"
    assert savedmodel.refusal(Error("assertion failed: [no condition follows]")) == "no condition follows"
    traced = "Graph execution error:\n\nDetected at node x defined at (most recent call last):\n  File \"a.py\"\nbad"
    assert savedmodel.refusal(Error(traced)) == "bad"
