"""The converter's command, `albert-convert` (and `python -m albert_tf.convert`): its flags are the settings of
`albert_tf.convert.ConvertRequest` (usage: `albert_tf/convert.py`'s docstring, which `--help` prints), its `main`
`albert_tf.convert.main`, run under `albert_tf.cli.run` and so under the guard of its declared files."""

from albert_tf import cli, convert

convert.define_flags()
main = convert.main


def run():
    """The console command: `main` under `albert_tf.cli.run`."""
    cli.run(main, convert.__doc__)


if __name__ == "__main__":
    run()
