"""Load and save ALBERT weights in every format users hold, detected from the path.

Formats, one module each behind one interface (`format.CheckpointFormat`: detect, read by the original's TF1
names, load, write), asked in the order of `registry.REGISTRY`:
  * `huggingface`: a directory with `config.json` + `model.safetensors` (or the `.safetensors` file);
  * `keras_hub` (`keras_hub_format`, written by `keras_hub_writer`): a keras-hub ALBERT preset directory, or a
    live `keras_hub.models.AlbertBackbone`;
  * `model_garden`: TF Model Garden's TF2 checkpoints (`AlbertEncoder`, `BertPretrainerV2`) and TF-Hub style TF2
    SavedModels (Model Garden's `export_tfhub`, e.g. `albert_en_base/3`; this project's `tfhub` export);
  * `native`: this project's own TF2 checkpoints (`tf.train.Checkpoint(model=...)`, as training writes);
  * `original`: a TF1 name-based checkpoint of the original release (`bert/...`, `cls/...`; a TF-Hub `module/`
    prefix is accepted; optimizer slots and `global_step` are ignored), or a TF1 TF-Hub module directory.
`name_table` holds the original's TF1 names of every weight, which every format but `native` reads by,
`loading` holds `load_checkpoint` / `save_checkpoint`, `tf_checkpoint` where a TF checkpoint's prefix is,
`run_files` the files a fine-tuning run leaves beside its checkpoints and the task head a checkpoint holds, and
`conversion` (with `input_tokenizer` and `task_heads`) one conversion between formats, what
`python -m albert_tf.convert` runs.
"""

from albert_tf.checkpoints import (
    errors,
    huggingface,
    keras_hub_format,
    model_garden,
    native,
    original,
    registry,
    run_files,
    tf_checkpoint,
)
from albert_tf.checkpoints.errors import (
    CheckpointError,
    CheckpointMismatchError,
    CheckpointNotFoundError,
    CorruptCheckpointError,
    reading,
)
from albert_tf.checkpoints.format import CheckpointFormat, LoadResult, ensure_built
from albert_tf.checkpoints.loading import load_checkpoint, read_arrays, save_checkpoint
from albert_tf.checkpoints.name_table import model_arrays, tf1_entries
from albert_tf.checkpoints.registry import FORMATS, detect_format
from albert_tf.checkpoints.tf_checkpoint import STATE_FILE, latest_checkpoint, resolve

__all__ = [
    "FORMATS", "STATE_FILE", "CheckpointError", "CheckpointFormat", "CheckpointMismatchError",
    "CheckpointNotFoundError", "CorruptCheckpointError", "LoadResult", "detect_format", "ensure_built", "errors",
    "huggingface", "keras_hub_format", "latest_checkpoint", "load_checkpoint", "model_arrays", "model_garden",
    "native", "original", "read_arrays", "reading", "registry", "resolve", "run_files", "save_checkpoint",
    "tf1_entries", "tf_checkpoint",
]
