"""Models whose labels are named features (pretraining, SQuAD), under Keras' train/test steps.

The pretraining model reads its targets (`masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`) and the
SQuAD model its answer positions (`start_positions`, `end_positions`, `is_impossible`) from the same feature dict
as the inputs, as the original's records hold them; the SQuAD v2.0 head even needs `start_positions` in its
forward pass (the end logits are conditioned on the gold start). Keras hands a step either that dict or
`(x, y)` / `(x, y, sample_weight)`; `LabelsInFeatures` merges a dict `y` into `x` before the step, so every form
works with `fit`, `evaluate`, `train_on_batch` and `test_on_batch`.
"""

import keras


def merge_labels(model_name, x, y):
    """`x` with the labels dict `y` merged in (`x` itself when `y` is None)."""
    if y is None:
        return x
    if not isinstance(x, dict) or not isinstance(y, dict):
        raise TypeError(f"{model_name} reads its labels as named features: give one dict of features, or "
                        f"(x, y) with both dicts; got x of type {type(x).__name__} and y of type "
                        f"{type(y).__name__}")
    both = sorted(set(x) & set(y))
    if both:
        raise ValueError(f"{model_name}: {', '.join(both)} given in both x and y")
    return {**x, **y}


class LabelsInFeatures:
    """Mixin (before `keras.Model`) for models whose `compute_loss` reads the labels from the features: a step's
    data becomes `(features, None, sample_weight)` before Keras' (or `TrainStep`'s) step runs."""

    def merge_labels(self, data):
        """Keras' step data with a labels dict `y` merged into the features (see `merge_labels`)."""
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        return merge_labels(type(self).__name__, x, y), None, sample_weight

    def train_step(self, data):
        return super().train_step(self.merge_labels(data))

    def test_step(self, data):
        return super().test_step(self.merge_labels(data))


def example_weights(sample_weight):
    """A step's sample weights as float32 [batch] (None stays None)."""
    if sample_weight is None:
        return None
    return keras.ops.reshape(keras.ops.cast(sample_weight, "float32"), (-1,))
