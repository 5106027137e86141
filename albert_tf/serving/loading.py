"""Loading a SavedModel a user names (an export to convert, run or check): one line naming the folder when it holds
no SavedModel or one that cannot be read, never a traceback. Needs only `tensorflow`."""

import tensorflow as tf


def require_saved_model(path, error):
    """Raises `error` (an `AlbertError` class) naming `path` when it holds no SavedModel."""
    if not tf.saved_model.contains_saved_model(path):
        raise error(f"no SavedModel in {path}")


def load_saved_model(path, error, load=None):
    """`load(path)` (default `tf.saved_model.load`); raises `error` naming `path` when there is no SavedModel there
    or its files are truncated or damaged (TF raises OSError, OpError, ValueError, IndexError or KeyError depending
    on which file and where)."""
    require_saved_model(path, error)
    try:
        return (load or tf.saved_model.load)(path)
    except (OSError, tf.errors.OpError, ValueError, IndexError, KeyError) as err:
        reason = (getattr(err, "message", None) or str(err) or type(err).__name__).splitlines()[0]
        raise error(f"the SavedModel in {path} cannot be loaded (truncated or damaged?): {reason}") from None
