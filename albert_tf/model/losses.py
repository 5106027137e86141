"""Loss reductions over the global batch, so that a step on N replicas equals one on a single device.

Under a `tf.distribute` strategy Keras sums the replicas' gradients, so `Model.compute_loss` returns this
replica's share of the global-batch loss (Keras' own losses divide their local mean by N for this). The
original normalises the masked-LM loss by the number of masked positions in the whole batch; here every mean
divides a replica's sum by the total over all replicas (`global_sum`), which on one device is the plain mean.
"""

import tensorflow as tf


def global_sum(value):
    """Sum of `value` over all replicas (identity on one replica or outside a strategy)."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def global_mean(values, weights=None, epsilon=0.0):
    """This replica's share of the global weighted mean: sum(values * weights) / (sum of the weights over every
    replica + epsilon), 0 when that total is 0. Without weights, every value has weight 1."""
    values = tf.cast(values, tf.float32)
    weights = tf.ones_like(values) if weights is None else tf.cast(weights, tf.float32)
    return tf.math.divide_no_nan(tf.reduce_sum(values * weights), global_sum(tf.reduce_sum(weights)) + epsilon)
