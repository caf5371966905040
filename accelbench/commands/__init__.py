"""Thin click commands, one module per pipeline stage; ``accelbench.cli`` registers them all."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from accelbench.hardware.catalog import Catalog


def catalog_of(ctx: Any) -> Catalog:
    """The hardware catalog of this command line: the built-in one, with the root's ``--catalog`` file
    (or ACCELBENCH_CATALOG) over it."""
    from accelbench.hardware.catalog import load_catalog

    return load_catalog((ctx.find_root().obj or {}).get("catalog_path"))
