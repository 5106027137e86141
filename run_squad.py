"""`run_squad.py` of a checkout; installed, the same command is `albert-run-squad`.

Its usage, flags and `main` are in `albert_tf/scripts/run_squad.py`; `--help` lists them.
"""

from albert_tf.scripts.run_squad import run

if __name__ == "__main__":
    run()
