"""Beam's command-line options and the runner they choose: unknown arguments refused in one line, and Beam's
local Python runner built directly for `DirectRunner` (or no runner)."""

import contextlib
import io

from apache_beam.options import pipeline_options as beam_options

from albert_tf.errors import UsageError

# Runner names that mean Beam's local Python runner (run here as its FnApiRunner, never through Prism).
_DIRECT_RUNNERS = {"direct", "directrunner", "switchingdirectrunner", "fnapirunner"}


def _option_parser():
    parser = beam_options._BeamArgumentParser(allow_abbrev=False)  # pylint: disable=protected-access
    pending = [beam_options.PipelineOptions]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        cls._add_argparse_args(parser)  # pylint: disable=protected-access
    return parser


def pipeline_options(args):
    """`PipelineOptions` of Beam command-line arguments; an argument Beam does not know raises `UsageError`."""
    args = list(args)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            _, unknown = _option_parser().parse_known_args(args)
    except SystemExit:  # argparse printed its usage and, last, why (a bad value of a Beam option)
        why = (printed.getvalue().strip().splitlines() or ["bad value"])[-1].split(" error: ", 1)[-1]
        raise UsageError(f"Beam pipeline option {why}") from None
    flags_unknown = [a for a in unknown if a.startswith("-")]
    if flags_unknown:
        raise UsageError(f"unknown flag {flags_unknown[0].split('=')[0]} (neither this script's flag nor a Beam "
                         "pipeline option)")
    if unknown:
        raise UsageError(f"unexpected arguments: {unknown}")
    return beam_options.PipelineOptions(args)


def is_direct(options):
    """Whether `options` choose Beam's local Python runner."""
    runner = options.view_as(beam_options.StandardOptions).runner
    return runner is None or (isinstance(runner, str) and runner.lower() in _DIRECT_RUNNERS)


def direct_runner(options):
    """Beam's local Python runner (the FnApiRunner, as `DirectRunner` ends up using for batch pipelines), built
    directly: `DirectRunner` first tries the Prism runner, whose binary it would download."""
    from apache_beam.portability.api import beam_provision_api_pb2  # pylint: disable=import-outside-toplevel
    from apache_beam.runners.portability.fn_api_runner import fn_runner  # pylint: disable=import-outside-toplevel
    from apache_beam.runners.portability.portable_runner import \
        JobServiceHandle  # pylint: disable=import-outside-toplevel

    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    info = fn_runner.ExtendedProvisionInfo(beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded))
    return fn_runner.FnApiRunner(provision_info=info)
