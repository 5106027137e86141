"""`predict.py` of a checkout; installed, the same command is `albert-predict`.

Its flags and `main` are in `albert_tf/scripts/predict.py`; `--help` lists them.
"""

from albert_tf.scripts.predict import __doc__, run  # noqa: F401  (the script's usage is this module's docstring)

if __name__ == "__main__":
    run()
