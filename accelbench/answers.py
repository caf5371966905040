"""The results service's JSON answers, typed once: the server returns them (``/openapi.json`` shows them as
its responses) and its client (``accelbench/client/``, the CLI's server commands) reads them by attribute.

Below both (a base module, like ``documents``): the service and its client are composition roots that may
not import each other. The fields are the answers' keys, in the order the server has always sent them, so
the JSON is what it was when the routes built dicts: every field is sent, a missing value as ``null``. A
number a stored row or document carries is a ``Number`` (``int | float``): a plain ``float`` field would turn
``5`` into ``5.0`` and change the bytes. A client ignores keys it does not know (a newer server may add some).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

Number = int | float  # as stored: an integer stays an integer in the answer


class Answer(BaseModel):
    """Every answer: frozen, extra keys ignored when read (a newer server)."""

    model_config = ConfigDict(frozen=True)


class Error(Answer):
    """Every refusal and failure (4xx, 5xx): one line saying why."""

    error: str


# ---- the service and results -------------------------------------------------------------------------------


class Health(Answer):
    """``GET /api/v1/health``."""

    status: str
    database: str  # the SQLAlchemy backend name: sqlite, postgresql
    version: str  # the server's accelbench version


class Stored(Answer):
    """``POST /api/v1/results`` (and a job's result): 201 when stored now, 200 when it was already."""

    id: str  # the content hash
    created: bool
    url: str


class BatchStored(Answer):
    """``POST /api/v1/results/batch``: how many were new, how many already stored, every id in order."""

    created: int
    existing: int
    ids: list[str]


class ResultSummary(Answer):
    """A stored result as listings show it: the columns copied out of its document at ingest."""

    id: str  # the content hash
    run_id: str
    source: str
    model: str
    variant: str | None
    target: str
    precision: str
    manifest_hash: str | None
    host: str | None
    accelbench_version: str | None
    origin: str | None
    created_at: str | None  # ISO 8601, with its zone
    received_at: str | None
    steps: int | None
    verdicts: dict[str, int] | None  # verdict → how many steps
    url: str


class ResultList(Answer):
    """``GET /api/v1/results``: one page, newest first, and how many match."""

    total: int
    results: list[ResultSummary]


class ResultDetail(ResultSummary):
    """``GET /api/v1/results/{id}``: the summary, the provenance, the document as pushed, its variant
    manifest."""

    provenance: dict[str, Any]
    document: dict[str, Any]  # schema accelbench.result/1 (docs/schema/)
    variant_manifest: dict[str, Any] | None


class HideLogEntry(Answer):
    action: str  # hide | unhide
    by: str  # the token's name
    at: str  # ISO 8601
    reason: str


class HideAnswer(Answer):
    """``POST /api/v1/results/{id}/hide`` and ``/unhide``."""

    id: str
    hidden: bool
    log: list[HideLogEntry]


# ---- history -----------------------------------------------------------------------------------------------


class Change(Answer):
    """How a run moved from the run before of the same load: the relative changes, then the --compare
    judgement's fields (``reports.compare.Judgement``, the same names)."""

    capacity_change: Number | None  # (new - old) / old
    latency_change: Number | None
    regression: bool
    judged: bool
    flags: list[str]
    capacity_ratio: Number | None
    capacity_ratio_low: Number | None
    capacity_ratio_high: Number | None
    basis: str | None
    verdict: str


class GenerativeFigures(Answer):
    """One generative run at the objective (its fastest step when none meets it)."""

    output_tokens_per_s: Number
    ttft_p99_ms: Number | None
    tpot_p99_ms: Number | None
    tokens_per_s_per_user: Number | None
    concurrency: Number | None
    usd_per_million_output_tokens: Number | None
    ttft_objective_ms: Number
    tpot_objective_ms: Number
    meets_objective: bool
    reason: str


class HistoryRun(ResultSummary):
    """One run of the series: its capacity at the SLO with the intervals and the change from the run before
    of the same load (null for the first); a generative run has its token figures instead."""

    host_label: str | None
    capacity_rps: Number | None
    latency_us: Number | None
    capacity_low: Number | None
    capacity_high: Number | None
    latency_low_us: Number | None
    latency_high_us: Number | None
    meets_slo: bool
    cost_per_million_usd: Number | None
    reason: str
    change: Change | None
    generative: GenerativeFigures | None


class History(Answer):
    """``GET /api/v1/history``: every run of one (model, target, precision), oldest first."""

    model: str
    target: str
    precision: str
    rule: str  # the --compare rule, in words
    slo_ms: Number
    percentile: str
    runs: list[HistoryRun]


# ---- campaigns, runners, jobs ------------------------------------------------------------------------------


class Job(Answer):
    """A campaign's job as the API shows it (``POST /jobs/{id}/cancel`` and ``/requeue`` answer it)."""

    id: int
    target: str
    labels: dict[str, str]
    status: str  # queued running done failed expired cancelled (service/jobs.py)
    runner: str | None  # the runner's name
    attempts: int
    max_attempts: int
    lease_s: Number
    heartbeat_at: str | None
    lease_until: str | None
    finished_at: str | None
    reason: str | None  # one line: why it failed or expired
    log_tail: str
    history: list[dict[str, Any]]  # one entry per attempt: runner, outcome
    time_limit_s: Number | None


class Campaign(Answer):
    """``POST /api/v1/campaigns`` (201) and ``GET /api/v1/campaigns/{id}``."""

    id: int
    name: str
    status: str
    counts: dict[str, int]  # status → how many jobs
    projected: list[str]  # target ids the report projects
    created_by: str
    created_at: str | None
    url: str  # the campaign's page
    results: list[str]  # content hashes of its stored results
    jobs: list[Job]


class CampaignList(Answer):
    campaigns: list[Campaign]  # newest first


def heartbeat_interval_s(lease_s: float) -> float:
    """How often an agent extends a lease of ``lease_s`` (a third of it: two beats may be lost before it
    ends), and how long the server waits for the first beat that acknowledges a claim."""
    return max(0.5, float(lease_s) / 3)


class ClaimedJob(Job):
    """``POST /api/v1/jobs/claim``: the job, its campaign's spec, the partial documents to resume from, and
    the lease secret every later call about it carries."""

    campaign_id: int
    campaign: str  # its name
    spec: str  # the TOML as submitted
    attempt: int
    documents: list[dict[str, Any]]  # partial result documents (schema accelbench.result/1)
    lease_secret: str


class RunnerRegistered(Answer):
    """``POST /api/v1/runners``: the runner's id, and its secret when one was issued now (shown once)."""

    id: int
    name: str
    secret: str | None


class Runner(Answer):
    """A runner as ``GET /api/v1/runners`` lists it: what it registered with and a summary of its probe."""

    id: int
    name: str
    target: str
    labels: dict[str, str]
    version: str
    last_seen: str  # ISO 8601
    token: str  # the registration token's name
    online: bool
    catalog_match: str
    accelerator: str
    driver: str
    toolchains: str


class RunnerList(Answer):
    runners: list[Runner]  # by name


class RunnerRemoved(Answer):
    id: int
    removed: bool


class Heartbeat(Answer):
    """``POST /api/v1/jobs/{id}/heartbeat``: the lease's new end and the job's time limit."""

    lease_until: str | None
    time_limit_s: Number | None


class JobDocuments(Answer):
    documents: list[dict[str, Any]]  # the partial result documents pushed so far


class DocumentKept(Answer):
    """``PUT /api/v1/jobs/{id}/documents``: the run the document belongs to and its steps so far."""

    run_id: str
    steps: int


class JobStatus(Answer):
    """``POST /api/v1/jobs/{id}/done``, ``/fail``, ``/release``."""

    id: int
    status: str
