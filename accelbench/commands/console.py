"""What the command line prints besides its answer: the stages' log records, once each, on stderr."""

from __future__ import annotations

import logging

import click

LIBRARY = "accelbench.models"  # the stages that report progress as log records (quantize, exports)


class _Echo(logging.Handler):
    """Library progress records as ``accelbench: ...`` lines on this command's stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(f"accelbench: {record.getMessage()}", err=True)


def library_output(quiet: bool = False, verbose: bool = False) -> None:
    """Show the stages' log records once each, as ``accelbench: ...`` on stderr: progress (INFO) by default,
    warnings only with ``quiet``, debug records too with ``verbose``.

    The records do not propagate to the root logger: a library that logs through the root logger
    (onnxruntime's quantizer calls ``logging.warning``) installs a root handler on first use, and every
    progress line would then print a second time as ``INFO:accelbench.models.variants: ...``."""
    library = logging.getLogger(LIBRARY)
    library.setLevel(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO)
    library.propagate = False
    if not any(isinstance(h, _Echo) for h in library.handlers):
        library.addHandler(_Echo())
