"""`predict.py` of a checkout; installed, the same command is `albert-predict`.

Its usage, flags and `main` are in `albert_tf/scripts/predict.py`; `--help` lists them.
"""

from albert_tf.scripts.predict import run

if __name__ == "__main__":
    run()
