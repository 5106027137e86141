"""Learning-rate schedule and optimizers with the original release's semantics.

The original's LAMB and AdamW ("AdamWeightDecayOptimizer") differ from `keras.optimizers.Lamb` and
`keras.optimizers.AdamW` in two ways that change the trajectory, so they are implemented here as Keras
optimizers (`keras.optimizers.Optimizer` subclasses, so `fit`, distribution strategies, loss scaling and
checkpoints all work as for built-in ones):

* no bias correction of the moments (Keras divides m and v by 1 - beta^t);
* LAMB's weight decay is part of the update whose norm forms the trust ratio (Keras decays the weights
  separately, outside the ratio).

LayerNorm and bias variables are excluded from weight decay and from LAMB's trust ratio, as in the original. Each
pattern of `exclude_from_weight_decay` (a regular expression; default "LayerNorm", "layer_norm", "bias") is
searched with `re.search`, as the original's `_do_use_weight_decay` does, in the last two parts of the variable's
path: its layer's name and its own ("LayerNorm/gamma", "query/bias", "predictions/output_bias"), the part of the
original's TF1 names ("bert/embeddings/LayerNorm/gamma") the patterns pick out. The names of the model and of
enclosing layers, which here are the user's, never count (a model named "bias_model" is decayed as any other).
Keras' `exclude_from_weight_decay(var_list=None, var_names=None)` method works as well, before `build`; what it
excludes is excluded too. `tests/train/test_optimization.py` checks the rule on every head's TF1 names and shows
both differences from the Keras optimizers.
"""

import re

import keras
import tensorflow as tf
from keras import ops

from albert_tf import keras_internals
from albert_tf.errors import UsageError

DEFAULT_EXCLUDE = ("LayerNorm", "layer_norm", "bias")


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Polynomial decay from `learning_rate` to 0 over `num_train_steps`, after a linear warmup.

    As the original: lr(step) = learning_rate * (1 - min(step, num_train_steps) / num_train_steps) ** power,
    except while step - start_warmup_step < num_warmup_steps, where it is
    learning_rate * (step - start_warmup_step) / num_warmup_steps.
    """

    def __init__(self, learning_rate, num_train_steps, num_warmup_steps=0, start_warmup_step=0, power=1.0):
        self.learning_rate = learning_rate
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps
        self.start_warmup_step = start_warmup_step
        self.power = power

    def __call__(self, step):
        step = ops.cast(step, "float32")
        total = float(max(self.num_train_steps, 1))
        decayed = self.learning_rate * ops.power(1.0 - ops.minimum(step, total) / total, self.power)
        if not self.num_warmup_steps:
            return decayed
        warm_steps = step - float(self.start_warmup_step)
        warmup = self.learning_rate * warm_steps / float(self.num_warmup_steps)
        return ops.where(warm_steps < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {"learning_rate": self.learning_rate, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps, "start_warmup_step": self.start_warmup_step,
                "power": self.power}


def _pattern_name(variable):
    """The name exclusion patterns are searched in: the layer's and the variable's (last two parts of its path)."""
    return "/".join(variable.path.split("/")[-2:])


def _excluded(variable, patterns):
    name = _pattern_name(variable)
    return any(re.search(p, name) is not None for p in patterns)


class _OriginalAdamBase(keras.optimizers.Optimizer):
    """Shared moments and decay bookkeeping of the original's Adam-style optimizers."""

    def __init__(self, learning_rate=0.001, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 exclude_from_weight_decay=DEFAULT_EXCLUDE, name=None, **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        # Not `exclude_from_weight_decay`: that is Keras' method, which stays usable.
        self.weight_decay_exclusions = tuple(exclude_from_weight_decay or ())

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._v = self.add_optimizer_variables(var_list, ["m", "v"])
        # Decided here from the Keras paths: in distributed updates only raw TF variables reach update_step.
        self._decayed = [self.weight_decay_rate > 0 and not self._decay_excluded(v) for v in var_list]

    def exclude_from_weight_decay(self, var_list=None, var_names=None):
        """Keras' method (`keras.optimizers.Optimizer.exclude_from_weight_decay`). Here it must come before
        `build`, which decides once which variables are decayed (Keras' own check of that no longer fires)."""
        if self.built:
            raise ValueError("exclude_from_weight_decay() can only be configured before the optimizer is built")
        super().exclude_from_weight_decay(var_list=var_list, var_names=var_names)

    def _decay_excluded(self, variable):
        """Excluded by a pattern, or by Keras' `exclude_from_weight_decay(var_list=..., var_names=...)`."""
        return (_excluded(variable, self.weight_decay_exclusions)
                or keras_internals.excluded_by_keras_weight_decay(self, variable))

    def _update(self, gradient, variable):
        """The original's Adam direction m / (sqrt(v) + eps), plus decay; returns (direction, var index)."""
        index = self._get_variable_index(variable)
        m, v = self._m[index], self._v[index]
        if isinstance(gradient, tf.IndexedSlices):  # an embedding's gradient, from Keras' own train_step
            gradient = tf.convert_to_tensor(gradient)
        gradient = ops.cast(gradient, variable.dtype)
        self.assign(m, self.beta_1 * m + (1.0 - self.beta_1) * gradient)
        self.assign(v, self.beta_2 * v + (1.0 - self.beta_2) * ops.square(gradient))
        update = m / (ops.sqrt(v) + self.epsilon)
        if self._decayed[index]:
            update = update + self.weight_decay_rate * variable
        return update, index

    def get_config(self):
        config = super().get_config()
        config.update(weight_decay_rate=self.weight_decay_rate, beta_1=self.beta_1, beta_2=self.beta_2,
                      epsilon=self.epsilon, exclude_from_weight_decay=list(self.weight_decay_exclusions))
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamWeightDecay(_OriginalAdamBase):
    """The original's AdamWeightDecayOptimizer: Adam without bias correction, decoupled L2 decay.

    w <- w - lr * (m / (sqrt(v) + eps) + weight_decay_rate * w), decay skipped for excluded variables.
    """

    def update_step(self, gradient, variable, learning_rate):
        update, _ = self._update(gradient, variable)
        self.assign_sub(variable, ops.cast(learning_rate, variable.dtype) * update)


@keras.saving.register_keras_serializable(package="albert_tf")
class LAMB(_OriginalAdamBase):
    """The original's LAMB: the AdamWeightDecay update scaled per variable by the trust ratio.

    ratio = ||w|| / ||update|| (1 when either norm is 0), not applied to variables excluded from layer
    adaptation (patterns matched as those of weight decay; by default the variables excluded from weight decay,
    as in the original: LayerNorm and biases, and any excluded through Keras' method).
    """

    def __init__(self, *args, exclude_from_layer_adaptation=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._adaptation_follows_decay = exclude_from_layer_adaptation is None
        if exclude_from_layer_adaptation is None:
            exclude_from_layer_adaptation = self.weight_decay_exclusions
        self.exclude_from_layer_adaptation = tuple(exclude_from_layer_adaptation)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        if self._adaptation_follows_decay:
            self._adapted = [not self._decay_excluded(v) for v in var_list]
        else:
            self._adapted = [not _excluded(v, self.exclude_from_layer_adaptation) for v in var_list]

    def update_step(self, gradient, variable, learning_rate):
        update, index = self._update(gradient, variable)
        if self._adapted[index]:
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where(w_norm > 0.0, ops.where(u_norm > 0.0, w_norm / u_norm, 1.0), 1.0)
            update = ratio * update
        self.assign_sub(variable, ops.cast(learning_rate, variable.dtype) * update)

    def get_config(self):
        config = super().get_config()
        config["exclude_from_layer_adaptation"] = list(self.exclude_from_layer_adaptation)
        return config


def create_optimizer(name, learning_rate, num_train_steps, num_warmup_steps=0, start_warmup_step=0,
                     poly_power=1.0, weight_decay_rate=0.01):
    """The original's `create_optimizer`: schedule + LAMB or AdamW (beta 0.9/0.999, eps 1e-6).

    Gradient clipping by global norm 1.0 is done by the training step (`albert_tf.training`), across
    replicas, so it matches single-device training exactly.
    """
    schedule = WarmupPolynomialDecay(learning_rate, num_train_steps, num_warmup_steps, start_warmup_step,
                                     poly_power)
    if name == "lamb":
        return LAMB(schedule, weight_decay_rate=weight_decay_rate)
    if name == "adamw":
        return AdamWeightDecay(schedule, weight_decay_rate=weight_decay_rate)
    raise UsageError(f"--optimizer must be 'lamb' or 'adamw', got {name!r}")
