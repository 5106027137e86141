"""`run_classifier.py` of a checkout; installed, the same command is `albert-run-classifier`.

Its usage, flags and `main` are in `albert_tf/scripts/run_classifier.py`; `--help` lists them.
"""

from albert_tf.scripts.run_classifier import run

if __name__ == "__main__":
    run()
