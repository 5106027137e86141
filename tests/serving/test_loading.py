"""albert_tf/serving/loading.py: a SavedModel folder that is missing, empty, or damaged in either of its files is
the caller's error naming the folder; an intact one loads."""

import shutil

import pytest
import tensorflow as tf

from albert_tf.errors import AlbertError
from albert_tf.serving.loading import load_saved_model


class _Refused(AlbertError):
    pass


class _Double(tf.Module):
    def __init__(self):
        super().__init__()
        self.scale = tf.Variable(2.0)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def __call__(self, x):
        return self.scale * x


@pytest.fixture(name="saved", scope="module")
def _saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("saved") / "double"
    tf.saved_model.save(_Double(), str(path))
    return path


def _truncated(saved, tmp_path, relative):
    copy = tmp_path / "copy"
    shutil.copytree(saved, copy)
    target = copy / relative
    target.write_bytes(target.read_bytes()[: len(target.read_bytes()) // 3])
    return copy


def test_an_intact_saved_model_loads(saved):
    assert load_saved_model(saved, _Refused)(tf.constant([1.5])).numpy().tolist() == [3.0]


def test_no_saved_model_is_named(tmp_path):
    for path in (tmp_path, tmp_path / "absent"):
        with pytest.raises(_Refused, match=rf"^no SavedModel in {path}$"):
            load_saved_model(path, _Refused)


@pytest.mark.parametrize("relative, reason", [
    ("saved_model.pb", "Cannot parse file .*saved_model.pb.*"),  # OSError
    ("variables/variables.index", r"not an sstable \(bad magic number\)"),  # an OpError: its message
    ("variables/variables.data-00000-of-00001", "Read less bytes than requested"),  # IndexError
])
def test_a_truncated_file_is_named_in_one_line_with_tensorflows_reason(saved, tmp_path, relative, reason):
    damaged = _truncated(saved, tmp_path, relative)
    with pytest.raises(_Refused, match=rf"^the SavedModel in {damaged} cannot be loaded \(truncated or damaged\?\): "
                                       rf"{reason}$"):
        load_saved_model(damaged, _Refused)


def test_a_reason_over_several_lines_is_given_by_its_first(saved, monkeypatch):
    def refuse(path):
        raise tf.errors.DataLossError(None, None, "checksum mismatch in variables.data\n\t [[{{node RestoreV2}}]]")

    monkeypatch.setattr(tf.saved_model, "load", refuse)
    with pytest.raises(_Refused, match=r"\(truncated or damaged\?\): checksum mismatch in variables.data$"):
        load_saved_model(saved, _Refused)
