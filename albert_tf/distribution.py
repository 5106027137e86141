"""`tf.distribute` strategies from the original's flags: TPU, one or many GPUs, many workers, CPU.

TPUs and GPUs take the same path: the scripts build the model and optimizer under `strategy.scope()` and
hand Keras a per-replica dataset made by `strategy.distribute_datasets_from_function`.
"""

import json
import os

import tensorflow as tf

STRATEGIES = ("tpu", "mirrored", "multi_worker", "one_device", "default")


class StrategyError(RuntimeError):
    """The requested strategy cannot run here (no TPU found, no TF_CONFIG for multi-worker, ...)."""


def get_strategy(name="default", tpu_name=None, tpu_zone=None, gcp_project=None, master=None, use_tpu=False):
    """Builds the `tf.distribute.Strategy` named by `--strategy` (or TPU when `--use_tpu`, as the original).

    Args:
      name: one of `STRATEGIES`.
      tpu_name, tpu_zone, gcp_project, master: the original's TPU flags, passed to the cluster resolver
        (`tpu_name` "local" or empty on a TPU VM).
      use_tpu: the original's flag; implies name "tpu".
    """
    if use_tpu:
        name = "tpu"
    if name not in STRATEGIES:
        raise StrategyError(f"--strategy must be one of {', '.join(STRATEGIES)}, got {name!r}")
    if name == "tpu":
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
                tpu=tpu_name or master or "", zone=tpu_zone, project=gcp_project)
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
        except (ValueError, RuntimeError, tf.errors.OpError) as err:
            raise StrategyError(f"--strategy=tpu (or --use_tpu): no TPU could be reached (tpu_name="
                                f"{tpu_name!r}, tpu_zone={tpu_zone!r}, gcp_project={gcp_project!r}): {err}") from None
        return tf.distribute.TPUStrategy(resolver)
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise StrategyError("--strategy=multi_worker needs the TF_CONFIG environment variable (cluster and "
                                "task of this worker)")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "one_device":
        device = "/gpu:0" if tf.config.list_logical_devices("GPU") else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    return tf.distribute.get_strategy()


def is_chief(strategy):
    """True on the worker that writes checkpoints, summaries and exports (the only one when not multi-worker)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type in ("chief", None):
        return True
    cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
    return task_type == "worker" and task_id == 0 and "chief" not in cluster


def worker_dir(output_dir, strategy):
    """Where this worker writes: `output_dir` on the chief, a private scratch directory elsewhere (every
    worker must take part in saving under MultiWorkerMirroredStrategy, but only the chief's copy counts)."""
    if is_chief(strategy):
        return output_dir
    resolver = strategy.cluster_resolver
    return os.path.join(output_dir, ".workers", f"{resolver.task_type}_{resolver.task_id}")
