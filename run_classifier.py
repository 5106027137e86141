"""`run_classifier.py` of a checkout; installed, the same command is `albert-run-classifier`.

Its flags and `main` are in `albert_tf/scripts/run_classifier.py`; `--help` lists them.
"""

from albert_tf.scripts.run_classifier import __doc__, run  # noqa: F401  (the script's usage is this module's docstring)

if __name__ == "__main__":
    run()
