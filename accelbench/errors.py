"""The exceptions accelbench raises, grouped by what the user can do about them.

    AccelbenchError                 base; never raised directly
    ├── BadInputError               fix the input: missing file, malformed model/card/spec/catalog,
    │                               unknown target id, bad option value            → exit 2
    ├── ToolchainMissingError       install something or run on other hardware: TensorRT, Neuron SDK,
    │                               optimum, a GPU, the tritonserver binary          → exit 3
    ├── ServerError                 the inference server: failed to start, model failed to load,
    │                               unreachable, crashed, port in use                 → exit 4
    └── MeasurementError            a measurement could not be trusted or completed  → exit 5

Library code raises these; only the CLI turns them into one line on stderr and an exit code.
"""

from __future__ import annotations


class AccelbenchError(Exception):
    """Base class. ``str(err)`` must be one clear line a user can act on."""

    exit_code = 1


class BadInputError(AccelbenchError):
    """The user's input is wrong: a missing or malformed file, an unknown id, a bad value."""

    exit_code = 2


class ToolchainMissingError(AccelbenchError):
    """A toolchain or device that this step needs is not on this host."""

    exit_code = 3


class ServerError(AccelbenchError):
    """The inference server failed to start, to load a model, or stopped answering."""

    exit_code = 4


class MeasurementError(AccelbenchError):
    """A measurement failed or cannot be trusted (load generator saturated, server died mid-step)."""

    exit_code = 5
