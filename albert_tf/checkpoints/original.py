"""The original release's format: TF1 name-based checkpoints, read and written by the original's variable names.

`FORMAT` is a TF1 name-based checkpoint (a TF-Hub `module/` prefix is accepted; optimizer slots and `global_step`
are ignored), or a TF1 TF-Hub module directory (`tfhub_module.pb`, the original's `export_to_tfhub.py`), whose
variables are one. Its names are those of the name table (`name_table.tf1_entries`), so it reads and writes the
arrays as they are.
"""

import re

import tensorflow as tf

from albert_tf import fileio
from albert_tf.checkpoints import tf_checkpoint
from albert_tf.checkpoints.name_table import NamedFormat, model_arrays

# Names in TF1 checkpoints that are training state, not weights.
_NON_WEIGHT = re.compile(r"(^|/)(global_step|good_steps|loss_scale|current_loss_scale)$|"
                         r"/(adam|lamb)_[mv]$|/(Adam|LAMB|Momentum)(_\d+)?$|beta[12]_power")


def is_training_state(name):
    """True for names that hold optimizer or step state rather than weights."""
    return bool(_NON_WEIGHT.search(name))


def read_tf1(path):
    """Reads every weight array of a TF1 name-based checkpoint, stripping a TF-Hub `module/` prefix."""
    reader = tf.train.load_checkpoint(path)
    arrays = {}
    for name in reader.get_variable_to_shape_map():
        if is_training_state(name):
            continue
        key = name[len("module/"):] if name.startswith("module/") else name
        arrays[key] = reader.get_tensor(name)
    return arrays


def write_tf1(arrays, prefix):
    """Writes `{name: array}` as a TF1 name-based checkpoint at `prefix` (the original's format), through a
    temporary prefix (`fileio.atomic_prefix`), so a crash never leaves a half-written checkpoint at `prefix`."""
    names = sorted(arrays)
    with fileio.atomic_prefix(prefix) as tmp_prefix, tf.device("/cpu:0"):
        tf.raw_ops.SaveV2(prefix=tmp_prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                          tensors=[tf.convert_to_tensor(arrays[n]) for n in names])
    return prefix


class OriginalFormat(NamedFormat):
    """The original release's TF1 checkpoints: any TF checkpoint no other format claims."""

    name = "original"
    description = ("a TF1 checkpoint of the original release (a TF-Hub module/ prefix and optimizer slots are "
                   "fine), or a TF1 TF-Hub module directory")
    reads_prefix = True
    saves_models = True

    def detect(self, path):
        return tf_checkpoint.open_prefix(path) is not None

    def read(self, path, names=None, config=None):
        return read_tf1(tf_checkpoint.resolve(path))

    def write(self, model, path, exclude_ids=frozenset()):
        return write_tf1(model_arrays(model, exclude_ids), path)


FORMAT = OriginalFormat()
