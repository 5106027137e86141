"""The old name of `albert_tf.data.pretraining` (user code importing it keeps working); new code imports that."""

from albert_tf.data.pretraining import *  # noqa: F401,F403  pylint: disable=wildcard-import,unused-wildcard-import
from albert_tf.data.pretraining import __all__  # noqa: F401
