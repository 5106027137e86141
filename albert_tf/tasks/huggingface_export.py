"""The Hugging Face folder a fine-tuning run writes after it runs (`--export_huggingface_dir`): its own module so
that the tasks (classification, SQuAD) and `exports` reach it without importing each other."""

import os

from albert_tf import checkpoints, fileio
from albert_tf.checkpoints import huggingface
from albert_tf.errors import RunError
from albert_tf.serving.savedmodel import ExportError
from albert_tf.train.best_checkpoint import best_checkpoint_prefix


def export_huggingface(model, params, labels=None, regression=False):
    """Writes the Hugging Face folder (`huggingface.write_folder`: weights, config, tokenizer) of a fine-tuning
    run's final weights at `params.export_huggingface_dir`; returns (the folder, the weights used).

    The weights are those the run predicts and exports with: the best checkpoint, else the latest, else
    `init_checkpoint`, loaded into `model` (the task's model; every weight must load). `labels` name a
    classifier's outputs. The folder is staged and moved into place whole; an earlier export there is replaced.
    """
    path = params.export_huggingface_dir
    what = f"--export_huggingface_dir {path}"
    huggingface.check_export_folder(path, what)
    with fileio.DirectoryLock(params.output_dir, "--output_dir"):  # no run writes checkpoints meanwhile
        prefix = (best_checkpoint_prefix(params.output_dir) or checkpoints.latest_checkpoint(params.output_dir)
                  or params.init_checkpoint)
        if not prefix:
            raise RunError(f"nothing to export to {what}: no checkpoint in {params.output_dir} and no "
                           "--init_checkpoint")
        result = checkpoints.load_checkpoint(model, prefix)
    if result.missing:
        raise ExportError(f"{prefix} lacks weights of the {type(model).__name__} to export to {what} (missing: "
                          f"{', '.join(result.missing[:4])})")
    spm_model_file = params.spm_model_file
    huggingface.write_folder(path, params.albert_config, checkpoints.model_arrays(model),
                             spm_model_file=spm_model_file,
                             vocab_file=None if spm_model_file else getattr(params, "vocab_file", None),
                             do_lower_case=params.do_lower_case, labels=labels, regression=regression,
                             overwrite=huggingface.is_folder(path), model_max_length=params.max_seq_length,
                             what=what)
    return os.path.abspath(path), prefix
