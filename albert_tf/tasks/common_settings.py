"""The settings every training task declares alike (its model's config, its output folder, its initial weights,
its tokenizer, lowercasing), written once: each task's params call these with its own help text and the names its run writes."""

from albert_tf.settings import setting

INIT_CHECKPOINT_HELP = "Initial weights: an original TF1, Hugging Face, keras-hub or albert_tf checkpoint"


def albert_config_setting(help_text):
    """`--albert_config_file`: the model's `albert_config.json`, read into an `AlbertConfig`; a run needs it."""
    return setting(help_text=help_text, flag="albert_config_file", kind="string", flag_default=None,
                   role="input_file", required=True)


def output_dir_setting(help_text, writes):
    """`--output_dir`: the folder the run writes `writes` into; a run needs it, and may move it on resume."""
    return setting(help_text=help_text, flag_default=None, role="output_dir", writes=writes, trains=False,
                   required=True)


def init_checkpoint_setting(what="."):
    """`--init_checkpoint`: the weights a run starts from, in any format `load_checkpoint` reads; `what` ends the
    help text."""
    return setting(None, f"{INIT_CHECKPOINT_HELP}{what}", role="input_checkpoint")


def spm_model_file_setting(help_text="The SentencePiece model (30k-clean.model).", required=("vocab_file",),
                           why=None):
    """`--spm_model_file`: the SentencePiece model; by default a run needs it or `--vocab_file`."""
    return setting(None, help_text, role="input_file", required=required, why=why)


def vocab_file_setting(help_text="The WordPiece vocabulary (used when no --spm_model_file is given, e.g. the "
                                 "Chinese models)."):
    """`--vocab_file`: a WordPiece vocabulary, read when no SentencePiece model is given."""
    return setting(None, help_text, role="input_file")


def do_lower_case_setting():
    """`--do_lower_case`, as the fine-tuning scripts of the original define it."""
    return setting(True, "Lowercase the input text (True for the uncased English models).")
