r"""Export a trained ALBERT for serving: one command per export type.

    # the encoder (TF-Hub style: serving_default, mlm, sop, tokenization_info)
    python export_model.py --export_type=encoder --albert_config_file=albert_base/albert_config.json \
      --init_checkpoint=albert_base/model.ckpt-best --spm_model_file=albert_base/30k-clean.model \
      --export_dir=export/encoder

    # text in, ids out (pair it with the encoder)
    python export_model.py --export_type=preprocessing --spm_model_file=albert_base/30k-clean.model \
      --max_seq_length=128 --export_dir=export/preprocessing

    # a fine-tuned classifier (signatures on ids, tf.Examples, text and text pairs)
    python export_model.py --export_type=classifier --num_labels=2 --albert_config_file=... \
      --init_checkpoint=out/sst2/best_checkpoint --spm_model_file=... --export_dir=export/sst2

    # SQuAD (<export_dir>/ids and <export_dir>/text) and RACE
    python export_model.py --export_type=squad [--version_2_with_negative] --init_checkpoint=out/squad ...
    python export_model.py --export_type=race --init_checkpoint=out/race ...

    # TF Model Garden's TF-Hub interface, as albert_en_base/3 and albert_en_preprocess/3 (inputs input_word_ids,
    # input_mask, input_type_ids; outputs pooled_output, sequence_output, encoder_outputs, default; .mlm)
    python export_model.py --export_type=tfhub --init_checkpoint=out/pretraining \
      --albert_config_file=albert_base/albert_config.json --spm_model_file=... --export_dir=export/albert_hub
    python export_model.py --export_type=tfhub_preprocessing --spm_model_file=albert_base/30k-clean.model \
      --export_dir=export/albert_preprocess

    # computing in bfloat16 (float32 weights and outputs): faster on CPUs with AVX512_BF16 or AMX
    python export_model.py --export_type=encoder --mixed_precision=bf16 ... --export_dir=export/encoder_bf16

    # TFLite (fixed sequence length; float32 or dynamic-range int8), of the encoder or of a task model
    python export_model.py --export_type=tflite --tflite_model=classifier --num_labels=2 --quantize=dynamic_int8 \
      --max_seq_length=128 --init_checkpoint=out/sst2/best_checkpoint ... --export_dir=export/sst2_tflite \
      --eval_task=sst-2 --eval_data_dir=glue_data

--init_checkpoint takes any format `albert_tf.checkpoints.load_checkpoint` reads: the original TF1 release (or its
TF-Hub module), Hugging Face, keras-hub, TF Model Garden (TF2 checkpoints and TF-Hub SavedModels), or this project's
own (pretraining or fine-tuned task checkpoints, a directory or a prefix). A task export needs a checkpoint with that
task's head. Without --albert_config_file, an albert_config.json beside the checkpoint (or in its assets/) is used.

TFLite writes <export_dir>/model.tflite, a copy of the tokenizer file, and tflite_info.json (size, and the max
abs difference of each output from the float32 model on sample inputs); with --eval_task (a GLUE task, with a
classifier) it also reports the accuracy of both on the task's dev set (at most --eval_max_examples) and the change.
It uses TFLite builtin ops only; a model needing other TensorFlow ops stops naming them, unless
--allow_select_tf_ops.
"""

import dataclasses

from absl import flags
from absl import logging as absl_logging

from albert_tf import cli
from albert_tf.tasks.export_request import ExportRequest

FLAGS = flags.FLAGS

cli.define_flags(ExportRequest)


def main(argv):
    del argv  # cli.run refuses positional arguments
    absl_logging.set_verbosity(absl_logging.WARNING)  # TensorFlow logs each step of writing a SavedModel at INFO
    from albert_tf.tasks import exports  # pylint: disable=import-outside-toplevel

    options = {field.name: FLAGS[field.name].value for field in dataclasses.fields(ExportRequest)
               if field.name not in ("export_type", "export_dir")}  # the flags are the request's fields
    outcome = exports.export(FLAGS.export_type, FLAGS.export_dir, **options)
    print(exports.describe(outcome))


run = cli.console_command(main, __doc__)

if __name__ == "__main__":
    run()
