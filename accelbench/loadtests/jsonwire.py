"""The JSON objects loadtests/ passes on as they are, named: other programs' wire formats (the OpenAI API,
Triton's, Locust's messages, perf_analyzer's data files, a user's JSONL lines) and this package's own
between its processes (the child's events and config, a load process's generative record) or into the
result document (blocks pydantic validates there, in documents.py). Each name below is the one place such
an object is typed loosely; everything else in loadtests/ is a dataclass or a TypedDict.
"""

from __future__ import annotations

from typing import Any

# the OpenAI API's objects as sent or received: a request body, an SSE chunk and its usage, a /v1/models entry
OpenAIJson = dict[str, Any]
# Triton's JSON: a model's configuration, per-model statistics and metrics snapshots and their deltas
# (serving/stats.py, serving/metrics.py), the header of a binary-tensor inference request
TritonJson = dict[str, Any]
# Locust's custom message data (runner <-> load processes)
LocustMessage = dict[str, Any]
# a user's JSONL line (a prompts file, a Mooncake trace) and perf_analyzer's JSON input-data entries
UserJson = dict[str, Any]
# an expected output of a model {"name", "dtype", "shape"[, "batched"]} (its metadata, manifest or card)
OutputSpec = dict[str, Any]
# between processes: an event the Locust child writes on its stdout (events.to_wire), one JSON line
EventWire = dict[str, Any]
# between processes: the child's config.json (edge.ChildConfig, LoadConfig)
ConfigWire = dict[str, Any]
# between processes: one load process's generative record (genstats.Record.encode), merged in the parent
RecordWire = dict[str, Any]
# into the document: a step's ``generative`` block (documents.GenerativeStep) and its parts, before validation
GenerativeBlock = dict[str, Any]
# into the document: the engine's /metrics block (documents.EngineMetrics), as the poller's process writes it
EngineBlock = dict[str, Any]
# into the document: the load profile and workload as recorded (documents.LoadProfile, documents.Workload)
ProfileWire = dict[str, Any]
# into the document: the host probe and the server's identity (documents.Provenance)
ProvenanceWire = dict[str, Any]
