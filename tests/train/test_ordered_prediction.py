"""`predict_in_order` (albert_tf/train/ordered_prediction.py) on a stand-in model whose outputs name their example:
every example once, in file order whatever order the batches bring them, padding dropped, floats as float32, on
one device and gathered from two replicas; an uneven batch and a missing example are errors."""


import numpy as np
import pytest
import tensorflow as tf

from albert_tf.errors import UsageError
from albert_tf.train.ordered_prediction import predict_in_order
from tests.helpers import json_on_two_cpus


def _model(inputs, training):
    assert training is False
    x = inputs["x"]
    return {"double": tf.cast(x, tf.float64) * 2.0, "id": x, "pair": tf.stack([x, -x], axis=1)}  # [batch, 2]


def _dataset_fn(order, global_batch, drop=()):
    """Batches of `order`'s examples (`x` = the example's index) padded with index -1 to whole global batches."""
    def make(context):
        kept = [i for i in order if i not in drop]
        padded = kept + [-1] * (-len(kept) % global_batch)
        batch = context.get_per_replica_batch_size(global_batch)
        data = {"x": tf.constant([max(i, 0) for i in padded], tf.int32), "example_index": tf.constant(padded)}
        return tf.data.Dataset.from_tensor_slices(data).shard(context.num_input_pipelines,
                                                              context.input_pipeline_id).batch(batch)
    return make


def test_outputs_come_back_in_file_order_without_the_padding():
    order = [7, 2, 9, 0, 4, 1, 8, 3, 6, 5]  # the order batches bring them
    outputs = predict_in_order(_model, _dataset_fn(order, 4), 10, 4, ["x"])
    assert outputs["double"].dtype == np.float32 and outputs["id"].dtype == np.int32
    np.testing.assert_array_equal(outputs["double"], np.arange(10) * 2.0)
    np.testing.assert_array_equal(outputs["id"], np.arange(10))
    np.testing.assert_array_equal(outputs["pair"], np.stack([np.arange(10), -np.arange(10)], axis=1))


def test_an_example_the_batches_never_bring_is_an_error():
    with pytest.raises(RuntimeError, match=r"^prediction covered 9 of 10 examples$"):
        predict_in_order(_model, _dataset_fn(list(range(10)), 4, drop={6}), 10, 4, ["x"])


TWO_REPLICAS = """
import json
from albert_tf.errors import UsageError
from albert_tf.train.ordered_prediction import predict_in_order
from tests.train.test_ordered_prediction import _dataset_fn, _model
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
order = [5, 3, 0, 6, 1, 4, 2]
outputs = predict_in_order(_model, _dataset_fn(order, 4), 7, 4, ["x"], strategy=strategy)
try:
    predict_in_order(_model, _dataset_fn(order, 3), 7, 3, ["x"], strategy=strategy)
    uneven = None
except UsageError as err:
    uneven = str(err)
print(json.dumps({"id": outputs["id"].tolist(), "double": outputs["double"].tolist(), "pair": outputs["pair"].tolist(),
                  "uneven": uneven}))
"""


def test_two_replicas_gather_every_example_in_order():
    result = json_on_two_cpus(TWO_REPLICAS)
    assert result["id"] == list(range(7)) and result["double"] == [2.0 * i for i in range(7)]
    assert result["pair"] == [[i, -i] for i in range(7)]  # a second axis gathered along the batch
    assert result["uneven"] == "batch size 3 is not divisible by the 2 replicas"


def test_an_uneven_batch_is_refused_before_any_step():
    class TwoReplicas:
        num_replicas_in_sync = 2

    with pytest.raises(UsageError, match="^batch size 5 is not divisible by the 2 replicas$"):
        predict_in_order(_model, None, 10, 5, ["x"], strategy=TwoReplicas())
