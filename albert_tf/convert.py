"""`python -m albert_tf.convert`: runs the converter's command, `albert_tf.scripts.convert` (`albert-convert`)."""

from albert_tf.scripts import convert

if __name__ == "__main__":
    convert.run()
