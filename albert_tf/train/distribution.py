"""`tf.distribute` strategies from the original's flags: TPU, one or many GPUs, many workers, CPU.

TPUs and GPUs take the same path: the scripts build the model and optimizer under `strategy.scope()` and
hand Keras a per-replica dataset made by `strategy.distribute_datasets_from_function`.
"""

import json
import os
import socket

import tensorflow as tf

from albert_tf.errors import AlbertError

STRATEGIES = ("tpu", "mirrored", "multi_worker", "one_device", "default")
# Seconds allowed for each network step of finding a TPU (metadata server, Cloud TPU API, worker port).
TPU_CONNECT_TIMEOUT = 10.0


class StrategyError(AlbertError, RuntimeError):
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
        where = f"tpu_name={tpu_name!r}, tpu_zone={tpu_zone!r}, gcp_project={gcp_project!r}"
        try:
            resolver = _tpu_resolver(tpu_name or master or "", tpu_zone, gcp_project)
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
        except StrategyError as err:
            raise StrategyError(f"--strategy=tpu (or --use_tpu): no TPU could be reached ({where}): {err}") from None
        except Exception as err:  # pylint: disable=broad-except  (URLError, ValueError, OpError, ImportError...)
            raise StrategyError(f"--strategy=tpu (or --use_tpu): no TPU could be reached ({where}): "
                                f"{type(err).__name__}: {err}") from None
        return tf.distribute.TPUStrategy(resolver)
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise StrategyError("--strategy=multi_worker needs the TF_CONFIG environment variable (cluster and "
                                "task of this worker)")
        tf_config()
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "one_device":
        device = "/gpu:0" if tf.config.list_logical_devices("GPU") else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    return tf.distribute.get_strategy()


def _tpu_resolver(tpu, zone, project):
    """`TPUClusterResolver`, with a time limit on its network look-ups and a check that the TPU's workers listen.

    The resolver asks the GCE metadata server for the zone and project (and the Cloud TPU API for a named
    TPU's address) with no timeout, and `experimental_connect_to_cluster` waits indefinitely for a worker
    address that does not answer; both are bounded by `TPU_CONNECT_TIMEOUT` here.
    """
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(TPU_CONNECT_TIMEOUT)
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu, zone=zone, project=project)
        workers = resolver.cluster_spec().as_dict().get("worker", [])
    finally:
        socket.setdefaulttimeout(previous)
    for address in workers:
        host, _, port = str(address).rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=TPU_CONNECT_TIMEOUT).close()
        except (OSError, ValueError) as err:
            raise StrategyError(f"TPU worker {address} does not answer ({err})") from None
    return resolver


def is_chief(strategy):
    """True on the worker that writes checkpoints, summaries and exports (the only one when not multi-worker)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type in ("chief", None):
        return True
    cluster = tf_config().get("cluster", {})
    return task_type == "worker" and task_id == 0 and "chief" not in cluster


def tf_config():
    """The TF_CONFIG environment variable as a dict ({} when unset); `StrategyError` when it is not a JSON object."""
    try:
        value = json.loads(os.environ.get("TF_CONFIG") or "{}")
    except ValueError as err:
        raise StrategyError(f"the TF_CONFIG environment variable is not valid JSON ({err})") from None
    if not isinstance(value, dict):
        raise StrategyError("the TF_CONFIG environment variable must be a JSON object with 'cluster' and 'task'")
    return value


def worker_dir(output_dir, strategy):
    """Where this worker writes: `output_dir` on the chief, a private scratch directory elsewhere (every
    worker must take part in saving under MultiWorkerMirroredStrategy, but only the chief's copy counts)."""
    if is_chief(strategy):
        return output_dir
    resolver = strategy.cluster_resolver
    return os.path.join(output_dir, ".workers", f"{resolver.task_type}_{resolver.task_id}")
