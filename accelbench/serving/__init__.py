"""Serving stage: Triton model repositories per target, the embedded local tritonserver, remote
endpoints, and server-side statistics and metrics (docs/architecture.md §4)."""

from accelbench.serving.metrics import parse_metrics, scrape_metrics
from accelbench.serving.remote import RemoteTriton
from accelbench.serving.repository import RepoModel, write_repository
from accelbench.serving.server import LocalTriton
from accelbench.serving.stats import stats_delta, stats_snapshot

__all__ = [
    "LocalTriton",
    "RemoteTriton",
    "RepoModel",
    "parse_metrics",
    "scrape_metrics",
    "stats_delta",
    "stats_snapshot",
    "write_repository",
]
