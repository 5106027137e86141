"""absl flags shared by several scripts: the original's TPU flags and this project's runtime flags."""

from absl import flags

from albert_tf.distribution import STRATEGIES


def define_tpu_flags():
    """The original release's TPU flags (same names and defaults)."""
    flags.DEFINE_bool("use_tpu", False, "Whether to use TPU (same as --strategy=tpu).")
    flags.DEFINE_string("tpu_name", None, "The Cloud TPU to use: its name, grpc:// address, or 'local' on a "
                                          "TPU VM.")
    flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU (found from metadata if not given).")
    flags.DEFINE_string("gcp_project", None, "GCP project of the Cloud TPU (found from metadata if not given).")
    flags.DEFINE_string("master", None, "[Optional] TensorFlow master URL.")
    flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility: TPUStrategy finds the cores itself.")


def define_runtime_flags():
    """Strategy, precision and compilation flags this project adds."""
    flags.DEFINE_enum("strategy", "default", list(STRATEGIES),
                      "tf.distribute strategy: tpu, mirrored (GPUs of one machine), multi_worker (TF_CONFIG), "
                      "one_device, or default (no distribution).")
    flags.DEFINE_enum("mixed_precision", None, ["bf16", "fp16"],
                      "Mixed precision: bf16 (TPUs, recent GPUs) or fp16 (GPUs, with loss scaling).")
    flags.DEFINE_bool("jit_compile", False, "Compile the training step with XLA.")


def strategy_kwargs(flag_values):
    """Keyword arguments for `albert_tf.distribution.get_strategy` from parsed flags."""
    return {"name": flag_values.strategy, "tpu_name": flag_values.tpu_name, "tpu_zone": flag_values.tpu_zone,
            "gcp_project": flag_values.gcp_project, "master": flag_values.master,
            "use_tpu": flag_values.use_tpu}
