"""The errors a user can cause, and fix: each names the flag, file, field, line or checkpoint at fault.

Every package raises a subclass of `AlbertError` for bad input (a config field, a data file, a checkpoint, a
flag). The scripts print such an error as one line and exit with status 1 (`UsageError`: status 2); anything
else is a bug and keeps its traceback. The family, by where each is defined:

* here: `UsageError` (a flag), `DataError` and `MissingDataError` (a data file), `RunError` (a run that cannot go
  on as asked);
* `config.ConfigError` (an `albert_config.json` field); `fileio.OutputError` (an output that cannot be written);
  `text.common.TokenizerError` (a tokenizer file);
* `checkpoints.errors`: `CheckpointError` and its `CheckpointNotFoundError`, `CorruptCheckpointError`,
  `CheckpointMismatchError`;
* `data`: `glue.GlueDataError` (`glue.DataError` is its old name; with `UnknownTaskError`, `MissingSplitError`,
  `MalformedRowError`, `UnknownLabelError`), `squad.SquadDataError`, `race.RaceFormatError`,
  `pretraining.PretrainingDataError`, all `DataError`s;
* `train`: `callbacks.NonFiniteLossError` (a `RunError`), `distribution.StrategyError`;
* `serving`: `savedmodel.ExportError`, `batch_prediction.PredictError` (with `InputRefused`), `rest.RestError`.
"""


from absl import app


class AlbertError(ValueError):
    """Bad input that the user can correct; the message says what and where."""


class UsageError(AlbertError, app.UsageError):
    """A flag is missing, contradicts another, or does not fit the model; the message names it (absl's
    `UsageError` too, so absl code that expects one sees it)."""


class DataError(AlbertError):
    """A data file cannot be read as asked (format, encoding, lengths, an empty split); the message names it."""


class MissingDataError(DataError, FileNotFoundError):
    """An input file or directory is not there; the message names it (and what was expected)."""


class RunError(AlbertError):
    """The run cannot proceed as asked (a reused or locked directory, nothing to evaluate or predict with)."""
