"""CLI commands for the hardware stage. Thin: parse options, call the library, print."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    """Add this stage's commands to the top-level group."""
