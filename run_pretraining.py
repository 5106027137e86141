"""`run_pretraining.py` of a checkout; installed, the same command is `albert-run-pretraining`.

Its usage, flags and `main` are in `albert_tf/scripts/run_pretraining.py`; `--help` lists them.
"""

from albert_tf.scripts.run_pretraining import run

if __name__ == "__main__":
    run()
