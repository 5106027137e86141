"""The one interface every checkpoint format implements (`CheckpointFormat`), and what a load returns.

A format is one module with one `CheckpointFormat` object in it, listed once in `registry.REGISTRY`. It names
and describes itself (`name`, `description`: what the error of a path no format recognises, the converter's usage
and the table of formats in docs/compatibility.md are made of), says whether a path holds it (`detect`) and
whether that path carries the model's config (`read_config`), reads its weights as `{original TF1 name: array}`
(`read`), loads them into a model (`load`: by the TF1 name table for every format but `native`, which is keyed by
object paths) and, where it can be written, writes a model (`write`). `load_checkpoint`, `save_checkpoint` and the
converter only ever talk to this interface, so adding a format is one module and one line in the registry.
"""

import dataclasses

import tensorflow as tf

from albert_tf.checkpoints.errors import CheckpointError
from albert_tf.model import dummy_inputs


@dataclasses.dataclass
class LoadResult:
    """What `load_checkpoint` did: names (in the source format) loaded, missing from it, and left unused."""

    format: str
    loaded: list
    missing: list
    unused: list

    def __str__(self):
        return (f"{self.format} checkpoint: {len(self.loaded)} weights loaded, {len(self.missing)} missing"
                f"{' (' + ', '.join(self.missing[:5]) + ('...' if len(self.missing) > 5 else '') + ')' if self.missing else ''}"
                f", {len(self.unused)} unused")


class CheckpointFormat:
    """One checkpoint format. Subclasses set `name` and `description` and implement `detect` and `load` (or `read`,
    through `name_table.NamedFormat`), `read_config` where the format carries its config, and `write` where it
    can be written.

    Attributes:
      name: what `detect_format` returns and `save_checkpoint` / `--output_format` take.
      description: one line saying what a path holding the format is.
      reads_prefix: the weights are a TF checkpoint, read at `tf_checkpoint.resolve(path)` (a directory means
        its latest checkpoint or its variables); errors reading it name that prefix.
      saves_models: `save_checkpoint` writes it from the model alone (a keras-hub preset also needs a tokenizer,
        so only the converter writes one).
    """

    name = ""
    description = ""
    reads_prefix = False
    saves_models = False

    @property
    def writable(self):
        """Whether the format can be written (it implements `write`): what `--output_format` may name."""
        return type(self).write is not CheckpointFormat.write

    def detect(self, path):
        """Whether `path` (a path, or an object such as a keras-hub backbone) holds this format. Raises
        `CorruptCheckpointError` for what is recognisably this format but cannot be read."""
        raise NotImplementedError

    def read_config(self, path):
        """The `AlbertConfig` the checkpoint at `path` carries, or None when it carries none (the weights do not
        give the number of layers, so the config then comes from elsewhere). Raises `CheckpointError` for a
        config that is there but cannot be read."""
        del path
        return None

    def read(self, path, names=None, config=None):
        """{TF1 name: array} of the weights at `path`; `names` are the TF1 names a model wants (a format that
        selects by them needs them), `config` the model's `AlbertConfig` (a format that checks shapes by it)."""
        raise CheckpointError(f"read_arrays does not handle the {self.name!r} format")

    def load(self, model, path, init_from_group0=False):
        """(pairs of (variable, value) to assign, `LoadResult`, encoder weights missing) for `model` (built)
        from `path`; assigns nothing. `init_from_group0`: initialise every group from group_0, where the format
        has groups."""
        raise NotImplementedError

    def write(self, model, path, exclude_ids=frozenset(), **options):
        """Writes `model`'s weights, less the variables whose id is in `exclude_ids` (heads an input lacked),
        at `path`; returns `path`. `options` are the format's own (a tokenizer, labels, `overwrite`, `what`)."""
        raise CheckpointError(f"the {self.name} format cannot be written")


def ensure_built(model):
    """Builds `model`'s weights with a tiny forward pass if it has none yet."""
    if not model.weights:
        inputs = dummy_inputs(num_predictions=1 if hasattr(model, "masked_lm") else None)
        if hasattr(model, "num_choices"):  # multiple choice: [batch, num_choices, seq]
            inputs = {k: tf.repeat(v[:, None], model.num_choices, axis=1) for k, v in inputs.items()}
        model(inputs, training=False)
