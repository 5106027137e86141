"""Strategies from the original's flags (albert_tf/train/distribution.py): each name's strategy, the errors a
user meets (an unknown name, no TPU, no or a broken TF_CONFIG), which worker of a multi-worker job writes and
where the others do, and the TPU look-up's worker check with its time limit. A real multi-worker run is
tests/tasks/test_pretraining.py's."""

import json
import socket
import types

import pytest
import tensorflow as tf

from albert_tf.train import distribution
from albert_tf.train.distribution import StrategyError


def test_each_name_builds_its_strategy():
    one = distribution.get_strategy("one_device")
    assert isinstance(one, tf.distribute.OneDeviceStrategy)
    gpu = bool(tf.config.list_logical_devices("GPU"))
    assert one.extended.worker_devices[0].endswith("GPU:0" if gpu else "CPU:0")  # a GPU when there is one
    assert isinstance(distribution.get_strategy("mirrored"), tf.distribute.MirroredStrategy)
    assert distribution.get_strategy("default") is tf.distribute.get_strategy()
    assert distribution.get_strategy() is tf.distribute.get_strategy()
    with pytest.raises(StrategyError, match=r"^--strategy must be one of tpu, mirrored, .*got 'gpu'$"):
        distribution.get_strategy("gpu")


def test_use_tpu_means_tpu_and_a_tpu_not_reached_is_one_error(monkeypatch):
    def unreachable(tpu, zone, project):
        raise StrategyError(f"TPU worker {tpu}:8470 does not answer (refused)")

    monkeypatch.setattr(distribution, "_tpu_resolver", unreachable)
    with pytest.raises(StrategyError, match=r"^--strategy=tpu \(or --use_tpu\): no TPU could be reached "
                                            r"\(tpu_name='v3', tpu_zone='z', gcp_project=None\): TPU worker v3:8470"):
        distribution.get_strategy("one_device", tpu_name="v3", tpu_zone="z", use_tpu=True)

    def broken(tpu, zone, project):
        raise ValueError("Please provide a TPU Name to connect to.")

    monkeypatch.setattr(distribution, "_tpu_resolver", broken)
    with pytest.raises(StrategyError, match=r"reached \(tpu_name=None, .*\): ValueError: Please provide a TPU Name"):
        distribution.get_strategy("tpu")


def test_multi_worker_needs_a_tf_config_that_is_a_json_object(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert distribution.tf_config() == {}
    with pytest.raises(StrategyError, match="^--strategy=multi_worker needs the TF_CONFIG environment variable"):
        distribution.get_strategy("multi_worker")
    monkeypatch.setenv("TF_CONFIG", "{cluster")
    with pytest.raises(StrategyError, match="^the TF_CONFIG environment variable is not valid JSON"):
        distribution.get_strategy("multi_worker")
    monkeypatch.setenv("TF_CONFIG", "[1, 2]")
    with pytest.raises(StrategyError, match="must be a JSON object with 'cluster' and 'task'$"):
        distribution.tf_config()
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1"]}}))
    assert distribution.tf_config() == {"cluster": {"worker": ["a:1"]}}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["localhost:1"]},
                                                "task": {"type": "worker", "index": 0}}))
    monkeypatch.setattr(tf.distribute, "MultiWorkerMirroredStrategy", lambda: "multi-worker strategy")
    assert distribution.get_strategy("multi_worker") == "multi-worker strategy"


class _MultiWorker:
    """Stands in for `MultiWorkerMirroredStrategy` (patched over it): only the task matters here."""

    def __init__(self, task_type, task_id):
        self.cluster_resolver = types.SimpleNamespace(task_type=task_type, task_id=task_id)


@pytest.mark.parametrize("cluster, task_type, task_id, chief", [
    ({"worker": ["a:1", "b:1"]}, "worker", 0, True),  # no chief in the cluster: worker 0 writes
    ({"worker": ["a:1", "b:1"]}, "worker", 1, False),
    ({"chief": ["c:1"], "worker": ["a:1"]}, "chief", 0, True),
    ({"chief": ["c:1"], "worker": ["a:1"]}, "worker", 0, False),
    ({"worker": ["a:1"], "evaluator": ["e:1"]}, "evaluator", 0, False),
    ({}, None, None, True),
])
def test_one_worker_writes_and_the_others_write_aside(monkeypatch, tmp_path, cluster, task_type, task_id, chief):
    monkeypatch.setattr(tf.distribute, "MultiWorkerMirroredStrategy", _MultiWorker)
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": task_type, "index": task_id}}))
    strategy = _MultiWorker(task_type, task_id)
    assert distribution.is_chief(strategy) == chief
    expected = str(tmp_path) if chief else str(tmp_path / ".workers" / f"{task_type}_{task_id}")
    assert distribution.worker_dir(str(tmp_path), strategy) == expected


def test_a_strategy_of_one_process_always_writes(tmp_path):
    for strategy in (tf.distribute.get_strategy(), tf.distribute.OneDeviceStrategy("/cpu:0")):
        assert distribution.is_chief(strategy) and distribution.worker_dir(str(tmp_path), strategy) == str(tmp_path)
    # a strategy with a cluster (a TPU's) that is not multi-worker: its one process writes, whatever the task
    tpu_like = types.SimpleNamespace(cluster_resolver=types.SimpleNamespace(task_type="worker", task_id=1))
    assert distribution.is_chief(tpu_like) and distribution.worker_dir(str(tmp_path), tpu_like) == str(tmp_path)


def test_a_tpu_found_is_connected_then_initialised_then_used(monkeypatch):
    """The resolver of --tpu_name (else --master) is connected to, its TPU system initialised, and the strategy
    built on it, in that order (each stand-in records its call)."""
    calls, resolver = [], object()

    def found(tpu, zone, project):
        calls.append(("resolve", tpu, zone, project))
        return resolver

    monkeypatch.setattr(distribution, "_tpu_resolver", found)
    monkeypatch.setattr(tf.config, "experimental_connect_to_cluster", lambda r: calls.append(("connect", r)))
    monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system", lambda r: calls.append(("initialise", r)))
    monkeypatch.setattr(tf.distribute, "TPUStrategy", lambda r: ("strategy", r))
    assert distribution.get_strategy("default", master="grpc://10.0.0.2:8470", tpu_zone="z",
                                     use_tpu=True) == ("strategy", resolver)
    assert calls == [("resolve", "grpc://10.0.0.2:8470", "z", None), ("connect", resolver),
                     ("initialise", resolver)]


def test_the_tpu_lookup_checks_each_worker_answers_within_the_limit(monkeypatch):
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            dead = closed.getsockname()[1]  # bound, never listening: refused
        seen = []

        class Resolver:
            def __init__(self, tpu, zone, project):
                seen.append((tpu, zone, project, socket.getdefaulttimeout()))
                self.workers = [f"127.0.0.1:{port}"] + ([f"127.0.0.1:{dead}"] if tpu == "two" else [])

            def cluster_spec(self):
                return tf.train.ClusterSpec({"worker": self.workers})

        monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", Resolver)
        before = socket.getdefaulttimeout()
        assert isinstance(distribution._tpu_resolver("one", "z", "p"), Resolver)  # pylint: disable=protected-access
        with pytest.raises(StrategyError, match=rf"^TPU worker 127.0.0.1:{dead} does not answer"):
            distribution._tpu_resolver("two", None, None)  # pylint: disable=protected-access
    assert seen[0] == ("one", "z", "p", distribution.TPU_CONNECT_TIMEOUT)
    assert socket.getdefaulttimeout() == before  # the process-wide limit put back
