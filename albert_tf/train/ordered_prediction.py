"""Running a model over every example once, under any strategy, with the outputs back in file order.

The batches come from `albert_tf.data.records.ordered_batches`: each example carries its position
(`example_index`), the stream is padded with index -1 examples to a multiple of the global batch, and each input
pipeline reads every n-th example. Every replica's outputs and indices are gathered from all replicas inside the
step, so the result is complete on every worker whatever the sharding; the indices restore the order and drop
the padding.
"""

import math

import numpy as np
import tensorflow as tf

from albert_tf.errors import UsageError


def predict_in_order(model, dataset_fn, num_examples, global_batch_size, input_keys, strategy=None):
    """Outputs of `model` for examples 0..num_examples-1, as numpy arrays [num_examples, ...].

    Args:
      model: a Keras model; its outputs are a tensor or a dict of tensors with a leading batch axis.
      dataset_fn: `input_context -> dataset` of `ordered_batches` (per-replica batches).
      num_examples: the number of real examples.
      global_batch_size: examples per step over all replicas.
      input_keys: the features passed to the model.
      strategy: the `tf.distribute` strategy (default: the current one).
    Returns:
      an array, or a dict of arrays, like the model's outputs (floats as float32).
    """
    strategy = strategy or tf.distribute.get_strategy()
    if global_batch_size % strategy.num_replicas_in_sync:
        raise UsageError(f"batch size {global_batch_size} is not divisible by the "
                         f"{strategy.num_replicas_in_sync} replicas")
    dataset = strategy.distribute_datasets_from_function(dataset_fn)

    def replica_step(batch):
        outputs = model({k: batch[k] for k in input_keys if k in batch}, training=False)
        outputs = tf.nest.map_structure(lambda t: tf.cast(t, tf.float32) if t.dtype.is_floating else t, outputs)
        index = batch["example_index"]
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            outputs = tf.nest.map_structure(lambda t: context.all_gather(t, axis=0), outputs)
            index = context.all_gather(index, axis=0)
        return outputs, index

    @tf.function(reduce_retracing=True)
    def step(iterator):
        results = strategy.run(replica_step, args=(next(iterator),))
        return tf.nest.map_structure(lambda v: strategy.experimental_local_results(v)[0], results)

    iterator = iter(dataset)
    collected, seen = None, np.zeros(num_examples, bool)
    for _ in range(math.ceil(num_examples / global_batch_size)):
        outputs, index = step(iterator)
        index = index.numpy()
        real = index >= 0
        outputs = tf.nest.map_structure(lambda t: t.numpy(), outputs)
        if collected is None:
            collected = tf.nest.map_structure(
                lambda a: np.zeros((num_examples,) + a.shape[1:], a.dtype), outputs)
        tf.nest.map_structure(lambda store, a: store.__setitem__(index[real], a[real]), collected, outputs)
        seen[index[real]] = True
    if not seen.all():
        raise RuntimeError(f"prediction covered {int(seen.sum())} of {num_examples} examples")
    return collected
