"""Where a TF checkpoint lies in a folder (albert_tf/checkpoints/tf_checkpoint.py): a TF2 SavedModel's variables
only with its graph and without a TF1 hub module's marker, a TF1 hub module's only with its variables, and a
folder that is neither left as it is."""

import os

import tensorflow as tf

from albert_tf.checkpoints import tf_checkpoint
from tests.helpers import make_files


def test_a_saved_models_variables_need_its_graph_and_no_hub_marker(tmp_path):
    folder = str(tmp_path / "export")
    make_files(folder, "variables/variables.index")
    assert tf_checkpoint.saved_model_variables(folder) is None  # variables without a graph
    make_files(folder, "saved_model.pb")
    assert tf_checkpoint.saved_model_variables(folder) == os.path.join(folder, "variables", "variables")
    make_files(folder, "tfhub_module.pb")
    assert tf_checkpoint.saved_model_variables(folder) is None  # a TF1 hub module's
    assert tf_checkpoint.saved_model_variables(object()) is None  # a live model is no folder
    assert tf_checkpoint.saved_model_variables(os.path.join(folder, "saved_model.pb")) is None


def test_a_hub_module_resolves_to_its_variables_only_when_they_are_there(tmp_path):
    folder = str(tmp_path / "hub")
    make_files(folder, "tfhub_module.pb")
    assert tf_checkpoint.resolve(folder) == folder  # the marker alone: nothing to read there
    make_files(folder, "variables/variables.index")
    assert tf_checkpoint.resolve(folder) == os.path.join(folder, "variables", "variables")
    assert tf_checkpoint.resolve(object) is object


def test_loose_variables_without_a_graph_or_marker_are_not_resolved(tmp_path):
    folder = str(tmp_path / "loose")
    make_files(folder, "variables/variables.index")
    assert tf_checkpoint.resolve(folder) == folder
    make_files(folder, "model.ckpt-7.index")  # one checkpoint at the top: that one
    assert tf_checkpoint.resolve(folder) == os.path.join(folder, "model.ckpt-7")


class _Reader:
    """Stands in for a checkpoint reader whose object graph reads, is absent, or is damaged."""

    def __init__(self, has_graph=True, damage=None):
        self.has_graph, self.damage = has_graph, damage

    def has_tensor(self, key):
        return self.has_graph and key == tf_checkpoint.GRAPH_KEY

    def get_tensor(self, key):
        if self.damage:
            raise self.damage
        return b"graph"


def test_a_damaged_object_graph_is_told_from_a_readable_or_absent_one():
    assert tf_checkpoint.object_graph_damaged("ck", _Reader()) is False
    assert tf_checkpoint.object_graph_damaged("ck", _Reader(has_graph=False)) is False
    damaged = _Reader(damage=tf.errors.DataLossError(None, None, "Checksum does not match"))
    assert tf_checkpoint.object_graph_damaged("ck", damaged) is True
