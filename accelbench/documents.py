"""The two versioned documents, typed once: ``accelbench.result/1`` and ``accelbench.variant/1``.

Every writer builds these models and every reader parses them (docs/architecture.md §3 and §5; the JSON
Schemas in docs/schema/ are exported from here: ``python -m accelbench.documents --export docs/schema``).

Faithful round trip: a document read from disk and dumped again is the same JSON, byte for byte. So
``to_dict`` keeps exactly the keys that were given (``exclude_unset``; a writer states every field it
writes, ``None`` included), numbers keep their int/float spelling, and ``dump_json`` writes sorted keys with a
2-space indent like every other accelbench JSON file. Open parts (``extra="allow"``) keep keys a stage adds
before they are typed here. The one spelling that changes on read: ``offered.request_rate`` (written by
perf_analyzer imports before this schema) becomes ``offered.rate_rps``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from accelbench.errors import BadInputError
from accelbench.util import sha256_json, stable_json_text

RESULT_SCHEMA: Final = "accelbench.result/1"
VARIANT_SCHEMA: Final = "accelbench.variant/1"
PRECISIONS = ("fp32", "fp16", "bf16", "int8")
# Generative variants add weight-only and 8-bit float precisions (docs/llm.md): int4 = 4-bit weights
# (ONNX Runtime MatMulNBits on CPUs, AWQ W4A16 on GPUs), fp8 = E4M3 weights and activations (Ada, Hopper).
VARIANT_PRECISIONS = (*PRECISIONS, "int4", "fp8")
# hf-checkpoint: a generative recipe folder whose model_file is its hf/ checkpoint
FORMATS = ("onnx", "tensorrt-plan", "neuron", "hf-checkpoint")
APIS = ("triton", "triton-grpc", "openai-completions", "openai-chat", "openai-embeddings")
ORIGINS = ("accelbench-loadtest", "perf_analyzer-import", "locust-import", "device-check")


FLOAT_MAX = (
    1.7976931348623157e308  # sys.float_info.max: every number must fit a float (reports compute in float)
)


def _number(value: Any) -> int | float:
    # numpy scalars arrive from measurements; bools are not numbers; ints stay ints so files round-trip
    if type(value) not in (int, float) and hasattr(value, "item"):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be a number, got {str(value)[:40]!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be a finite number, got {value!r}")
    if (
        isinstance(value, int) and not -FLOAT_MAX <= value <= FLOAT_MAX
    ):  # a 4001-digit integer overflows float()
        raise ValueError("must be a number within the float range (about ±1.8e308)")
    return value


def _non_negative(value: Any) -> int | float:
    number = _number(value)
    if number < 0:
        raise ValueError(f"must not be negative, got {number!r}")
    return number


_BOUNDED = {"minimum": -FLOAT_MAX, "maximum": FLOAT_MAX}
Number = Annotated[int | float, PlainValidator(_number), WithJsonSchema({"type": "number", **_BOUNDED})]
# durations, latencies, rates: never negative
Amount = Annotated[
    int | float,
    PlainValidator(_non_negative),
    WithJsonSchema({"type": "number", "minimum": 0, "maximum": FLOAT_MAX}),
]
Count = Annotated[int, Field(ge=0, le=2**63 - 1)]  # requests, errors, processes: whole and never negative
# the strings the results service indexes, bounded to their database columns (the same on SQLite and
# PostgreSQL: SQLite would store a longer one, PostgreSQL would refuse it)
RUN_ID_MAX, MODEL_MAX, VARIANT_MAX, TARGET_MAX, PRECISION_MAX, ORIGIN_MAX, HASH_MAX = (
    300,
    200,
    300,
    100,
    20,
    60,
    64,
)
Verdict = Literal["VALID", "LOW-PRECISION", "INVALID"]
AccuracyVerdict = Literal["PASS", "FAIL", "NOT_RUN"]


class _Part(BaseModel):
    """A part of a document: open to keys a stage adds (kept on dump), names by alias or by field name."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


# ---------------------------------------------------------------- shared by both documents
class Accuracy(_Part):
    """The accuracy gate's verdict (the manifest adds worst/tolerance/samples; a result copies a subset)."""

    metric: str | None = None
    value: Number | None = None
    verdict: AccuracyVerdict | None = None
    worst: Number | None = None
    tolerance: Number | None = None
    samples: int | None = None
    reason: str | None = None


class GraphCost(_Part):
    """Bytes moved by a batch of b ≈ ``weight_bytes + b × activation_bytes_per_inference``."""

    params: Number | None = None
    flops_per_inference: Number | None = None
    weight_bytes: Number | None = None
    activation_bytes_per_inference: Number | None = None
    precision: str | None = None
    # what places the fixed cost of a batch (models/graph_cost.py); absent from documents written before the count
    ops: Count | None = Field(None, description="nodes that launch work (shape and view ops left out)")
    depth: Count | None = Field(None, description="the longest chain of those ops from an input to an output")
    # generative models (docs/llm.md): per-token costs; attention's share grows with the context
    flops_per_prefill_token: Number | None = Field(None, description="≈ 2 × params, plus attention at ISL")
    flops_per_decode_token: Number | None = Field(None, description="≈ 2 × params, plus attention at context")
    kv_cache_bytes_per_token: Number | None = Field(
        None, description="2 × layers × KV heads × head size × bytes of the KV dtype"
    )
    kv_dtype: str | None = None
    context_length: int | None = None


# ---------------------------------------------------------------- accelbench.result/1
class Offered(_Part):
    """The load a step offered: closed loop ``concurrency``, open loop ``rate_rps``, Locust ``users``."""

    concurrency: Count | None = None
    rate_rps: Amount | None = None
    users: Count | None = None

    @model_validator(mode="before")
    @classmethod
    def _old_rate_spelling(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "request_rate" in data:
            data = dict(data)
            rate = data.pop("request_rate")
            data.setdefault("rate_rps", rate)
        return data


class Errors(_Part):
    connection: Count = 0
    timeout: Count = 0
    server: Count = 0
    wrong_output: Count = 0


class LatencyUs(_Part):
    """Latency percentiles in µs (``None`` when nothing was recorded)."""

    p50: Amount | None = None
    p90: Amount | None = None
    p95: Amount | None = None
    p99: Amount | None = None
    p99_9: Amount | None = Field(None, alias="p99.9")
    max: Amount | None = None
    mean: Amount | None = None

    def at(self, key: str) -> int | float | None:
        """The value under a document key ("p99", "p99.9", "max"; a key a stage added), None when absent."""
        return getattr(self, "p99_9" if key == "p99.9" else key, None)


class ServerStats(_Part):
    """Triton's per-step statistics (serving ``stats_delta``), µs per request."""

    queue_us: Number | None = None
    compute_input_us: Number | None = None
    compute_infer_us: Number | None = None
    compute_output_us: Number | None = None
    request_us: Number | None = None
    success_count: int | None = None
    fail_count: int | None = None
    inference_count: int | None = None
    execution_count: int | None = None
    mean_batch_size: Number | None = None


class Metrics(_Part):
    cpu_utilization: Number | None = None
    gpu_power_w: Number | None = None
    energy_j: Number | None = None


class Loadgen(_Part):
    """The load generator's own health during a step (docs/loadtests.md)."""

    processes: int | None = None
    per_process: list[dict[str, Any]] | None = None
    cpu_fraction: list[Number] | None = None
    cpu_us_per_request: Number | None = None
    event_loop_lag_us: Any = None


class Window(_Part):
    throughput_rps: Number | None = None
    p99_us: Number | None = None


class Interval(_Part):
    """A measured figure and its interval (``high``/``low`` None where no order statistic bounds it)."""

    value: Number | None = None
    low: Number | None = None
    high: Number | None = None
    confidence: Number | None = None

    def rounded(self, digits: int) -> Interval:
        """A copy with value, low and high rounded to ``digits`` decimals (as a step writes them)."""
        given = {
            k: round(float(v), digits)
            for k in ("value", "low", "high")
            if (v := getattr(self, k)) is not None
        }
        return self.model_copy(update=given)


class ThroughputInterval(Interval):
    """Throughput from equal-time batch means: the Student-t interval, its standard error and df."""

    se: Number | None = None
    df: Number | None = None


class Trend(_Part):
    """Mann–Kendall p and Kendall tau over batch means; ``change`` = Sen line end ÷ start − 1."""

    p: Number | None = None
    tau: Number | None = None
    change: Number | None = None
    drift: bool | None = None


class Drift(_Part):
    batches: int | None = None
    latency: Trend | None = None
    throughput: Trend | None = None


class Truncated(_Part):
    """What MSER-5 cut from the start of the measured window as warm-up."""

    requests: Count | None = None
    seconds: Amount | None = None


class StepStatistics(_Part):
    """A step's statistics from its completion-ordered latencies (docs/statistics.md); summaries only."""

    requests: int | None = None
    truncated: Truncated | None = None
    n: int | None = None
    sample_floor: int | None = None
    judged: str | None = None
    throughput_rps: ThroughputInterval | None = None
    latency_us: dict[str, Interval] | None = None  # "p50" … "p99.9": exact order-statistic 95 % intervals
    upper_99_us: Number | None = None  # one-sided 99 % upper bound of the judged percentile
    early_stopping_us: Number | None = None  # MLPerf LoadGen's early-stopping estimate of it
    drift: Drift | None = None


# ---------------------------------------------------------------- generative steps (docs/llm.md)
class TokenCounts(_Part):
    """Tokens per request in the model's own tokenizer, over a step's completed requests."""

    total: int | None = None
    mean: Number | None = None
    min: int | None = None
    max: int | None = None
    asked: Number | None = Field(None, description="mean tokens asked for (ISL or max_tokens = OSL)")


class Goodput(_Part):
    """Requests/s whose own TTFT and TPOT both met the objectives (DistServe; AIPerf, vLLM)."""

    ttft_ms: Number | None = None
    tpot_ms: Number | None = None
    requests: int | None = Field(None, description="completed requests that met both objectives")
    fraction: Number | None = None
    rps: Number | None = None


class ReasoningTokens(_Part):
    """Tokens streamed as ``delta.reasoning_content`` / ``delta.reasoning`` (counted in output_tokens too)."""

    total: int | None = None
    mean: Number | None = None
    requests: int | None = Field(None, description="requests with at least one reasoning token")


class CachedTokens(_Part):
    """``usage.prompt_tokens_details.cached_tokens``: prompt tokens the engine served from its prefix cache."""

    total: int | None = None
    requests: int | None = Field(None, description="requests whose usage said it")
    fraction: Number | None = Field(None, description="cached / prompt tokens of those requests")


class EngineMetrics(_Part):
    """The engine's Prometheus ``/metrics`` during the step (vLLM, SGLang, TGI or Triton names,
    serving/engine_metrics.py): gauges sampled about every 0.5 s (mean and max), prefix-cache counters as the
    step's difference. A scrape that failed is counted in ``failures``, never fatal."""

    engine: str | None = Field(
        None, description="vllm | sglang | tgi | triton: whose metric names were found"
    )
    samples: int | None = Field(None, description="scrapes that answered during the step")
    failures: int | None = Field(
        None,
        description="scrapes that failed (the endpoint is asked no more after 3 failures without an answer)",
    )
    last_error: str | None = None
    running_mean: Number | None = Field(
        None, description="requests the engine was running, mean of the samples"
    )
    running_max: Number | None = None
    queue_mean: Number | None = Field(None, description="requests waiting in the engine's queue, mean")
    queue_max: Number | None = None
    kv_cache_usage_mean: Number | None = Field(None, description="fraction of the KV cache in use, 0-1, mean")
    kv_cache_usage_max: Number | None = None
    prefix_cache_hit_rate: Number | None = Field(
        None, description="prefix-cache hits / queries (tokens) during the step, 0-1"
    )
    prefix_cache_hit_rate_from: str | None = Field(
        None, description="counters (the step's difference) | gauge (the engine's own hit-rate gauge, mean)"
    )
    interval_s: Number | None = Field(None, description="seconds between scrapes (--engine-metrics)")
    scrape_ms_mean: Number | None = Field(
        None, description="mean wall time of one scrape (GET and parse), in the poller's own process"
    )
    scrape_ms_max: Number | None = None


class GenerativeStep(_Part):
    """A generative step's token-level figures: streamed TTFT, every inter-token gap (ITL), per-request
    TPOT = (e2e - TTFT) / (output tokens - 1), e2e, token counts and rates (docs/llm.md defines each)."""

    requests: int | None = Field(None, description="completed requests measured (warm-up excluded)")
    failed: int | None = None
    truncated_requests: int | None = Field(None, description="completed requests MSER-5 cut as warm-up")
    usage_mismatches: int | None = Field(
        None,
        description="answers whose usage.completion_tokens differed from the tokens counted in the stream",
    )
    ttft_us: LatencyUs | None = Field(
        None, description="send -> first token of any kind (reasoning or output)"
    )
    ttfo_us: LatencyUs | None = Field(
        None, description="send -> first output token, after any reasoning tokens (AIPerf's TTFO)"
    )
    ttst_us: LatencyUs | None = Field(None, description="first -> second token event (AIPerf's TTST)")
    itl_us: LatencyUs | None = Field(None, description="percentiles over every gap between two tokens")
    tpot_us: LatencyUs | None = Field(None, description="percentiles over requests of their TPOT")
    e2e_us: LatencyUs | None = None
    intervals: dict[str, dict[str, Interval]] | None = Field(
        None, description="metric (ttft_us, itl_us, tpot_us, e2e_us) -> percentile -> exact 95 % interval"
    )
    sample_floors: dict[str, int] | None = Field(
        None, description="samples each judged percentile needs: TTFT/TPOT/e2e count requests, ITL gaps"
    )
    gaps: int | None = Field(None, description="inter-token gaps recorded (the ITL sample count)")
    input_tokens: TokenCounts | None = None
    output_tokens: TokenCounts | None = Field(None, description="reasoning tokens included")
    reasoning_tokens: ReasoningTokens | None = None
    cached_tokens: CachedTokens | None = None
    output_token_sources: dict[str, int] | None = Field(
        None,
        description="requests per source of their output count: output_ids (Triton), token_ids or logprobs "
        "(the engine's own tokens), usage (usage.completion_tokens), tokenizer (the chunks re-tokenized)",
    )
    output_length_forced: bool | None = Field(
        None, description="ignore_eos was sent (false: --no-ignore-eos, or the engine refused it)"
    )
    output_length_honoured: bool | None = Field(
        None, description="every measured request streamed exactly the output length it asked"
    )
    engine_metrics: EngineMetrics | None = None
    streamed: bool | None = Field(
        None,
        description="false: more than 5 % of the answers arrived in one burst (>= 90 % of their tokens under "
        "1 ms apart): TTFT, ITL and TPOT do not describe a stream, and the step is INVALID",
    )
    burst_answers: int | None = Field(
        None, description="answers whose output arrived in one burst (>= 90 % of its tokens under 1 ms apart)"
    )
    burst_answers_loop_late: int | None = Field(
        None,
        description="of those, answers while the load process was late by more than 10 ms (perhaps the "
        "client's merge, not the server's burst)",
    )
    token_times: str | None = Field(
        None,
        description="kernel (the socket's receive timestamps, SO_TIMESTAMPNS) | loop (when the read returned)",
    )
    short_outputs: int | None = Field(
        None, description="requests that ended before their asked output length"
    )
    output_length_ratio: Number | None = Field(
        None, description="mean output tokens / asked; under 0.9 the step is flagged (MLPerf)"
    )
    output_tokens_per_s: ThroughputInterval | None = None
    input_tokens_per_s: Number | None = None
    requests_per_s: Number | None = None
    tokens_per_s_per_user: Number | None = Field(None, description="1000 / TPOT p50 in ms (InferenceX)")
    tokens_per_s_per_user_by_throughput: Number | None = Field(
        None, description="output tokens/s / concurrency (vLLM plot_pareto)"
    )
    goodput: Goodput | None = None
    cancelled: int | None = Field(
        None, description="requests cancelled on purpose (workload cancel_after_ms)"
    )
    client_cpu_us_per_token: Number | None = None
    histograms: dict[str, str] | None = Field(
        None, description="metric -> base64 HDR histogram (µs), mergeable across processes"
    )


class Workload(_Part):
    """What a generative sweep asked for: prompt and output lengths in the model's tokens, the API used."""

    api: str | None = Field(None, description="triton | triton-grpc | openai-completions | openai-chat")
    isl: int | None = Field(None, description="input sequence length asked, tokens")
    osl: int | None = Field(None, description="output sequence length asked (max_tokens), tokens")
    isl_range: Number | None = Field(None, description="prompt lengths uniform within ±this fraction of isl")
    osl_range: Number | None = None
    ignore_eos: bool | None = None
    ignore_eos_refused: bool | None = Field(
        None, description="the engine refused ignore_eos (HTTP 4xx); it was dropped and lengths not forced"
    )
    prompts: str | None = Field(None, description="synthetic | the prompts file's name (JSONL or ShareGPT)")
    prompts_sha256: str | None = None
    tokenizer: str | None = None
    slo_ttft_p99_ms: Number | None = None
    slo_tpot_p99_ms: Number | None = None
    # the traffic measured (docs/llm.md "Workloads"); absent: none of it (plain prompts, one turn, no trace)
    prefix_tokens: int | None = Field(
        None, description="shared prefix: tokens of every prompt that are its group's"
    )
    prefix_groups: int | None = Field(None, description="shared prefix: distinct prefixes, used in turn")
    turns: int | None = Field(None, description="multi-turn: turns per conversation, the history re-sent")
    think_time_s: Number | None = Field(
        None, description="multi-turn: a user's wait between an answer and its next turn"
    )
    trace: str | None = Field(
        None, description="the replayed trace's file name (Mooncake JSONL or BurstGPT CSV)"
    )
    trace_sha256: str | None = None
    trace_block_tokens: int | None = Field(None, description="tokens per Mooncake hash_id block")
    cancel_after_ms: Number | None = Field(
        None, description="requests cancelled this long after they were sent"
    )
    cancel_fraction: Number | None = Field(None, description="the fraction of requests cancelled")
    engine_metrics: str | None = Field(
        None, description="seconds between the engine's /metrics scrapes (in a process of their own), or off"
    )


class SearchPlan(_Part):
    """How the SLO-capacity search was asked to run (loadtests/search.py)."""

    mode: Literal["concurrency", "rate"]
    max_concurrency: int | None = None
    between: int | None = None
    refinements: int | None = None
    budget_s: Number | None = Field(None, description="the search's time budget, seconds (absent: 300)")


class SearchStep(_Part):
    index: int
    phase: str = Field(description="synchronous | saturation | between | refinement")
    met: bool | None = Field(None, description="whether the step met the TTFT p99 and TPOT p99 objectives")


class SearchResult(_Part):
    """The search's answer: the highest load that met the objectives (``answer``) and the lowest above it
    that did not (``above``; absent: unbounded), with the phase of every step it measured."""

    mode: Literal["concurrency", "rate"]
    ttft_p99_ms: Number | None = None
    tpot_p99_ms: Number | None = None
    answer: Offered | None = None
    above: Offered | None = None
    answer_step: int | None = Field(None, description="the index of the step measured at the answer")
    steps: list[SearchStep] = Field(default_factory=list)
    reason: str | None = None
    complete: bool = False


class Step(_Part):
    """One offered load level, measured to its end (or ``aborted`` with the reason)."""

    index: int
    offered: Offered
    started_at: str | None = None
    duration_s: Amount | None = None
    requests: Count | None = None
    inferences: Count | None = None
    errors: Errors | None = None
    error_rate: Amount | None = None
    dropped: Count | None = None
    throughput_rps: Amount | None = None
    throughput_ips: Amount | None = None
    latency_us: LatencyUs | None = None
    latency_from: str | None = None
    latency_resolution_us: Amount | None = None
    histogram: str | None = None
    server_stats: ServerStats | None = None
    metrics: Metrics | None = None
    energy_per_request_j: Amount | None = None
    loadgen: Loadgen | None = None
    windows: list[Window] | None = None
    stable: bool | None = None  # written before step statistics replaced the window-agreement rule
    statistics: StepStatistics | None = None
    generative: GenerativeStep | None = Field(
        None, description="generative models: token-level figures (latency_us then holds e2e)"
    )
    aborted: str | None = None
    last_error: str | None = None
    verdict: Verdict
    reasons: list[str] = Field(default_factory=list)
    attempt: int | None = Field(
        None, ge=1, description="which measurement of this step this is (1 = first); absent: the first"
    )
    earlier_attempts: list[Step] | None = Field(
        None,
        description="the earlier measurements of this step, judged INVALID (drift, no steady state) and "
        "measured again (--retries); oldest first, each with its own figures, verdict and reasons",
    )


class ServerInfo(_Part):
    url: str | None = None
    version: str | None = None


class ImportedFrom(_Part):
    file: str
    sha256: str


class EngineProvenance(_Part):
    """The generative engine that served the model (``engine = "vllm"``): its name, version, arguments."""

    name: str
    version: str | None = None
    args: dict[str, Any] = Field(default_factory=dict, description="the engine arguments (vLLM: model.json)")


class Provenance(_Part):
    """Where and how the document was made."""

    host: dict[str, Any] = Field(default_factory=dict)
    packages: dict[str, str] = Field(default_factory=dict)
    manifest_hash: str | None = Field(None, max_length=HASH_MAX)
    repository_config: str | None = None
    server: ServerInfo | None = None
    created_at: str | None = None
    command: str | None = None
    imported_from: ImportedFrom | None = None
    method: str | None = None
    note: str | None = None
    engine: EngineProvenance | None = None


class LoadProfile(_Part):
    """The sweep's plan (loadtests ``LoadProfile.to_dict()``); equal profiles mean a rerun may resume."""

    kind: Literal["closed", "open"]
    protocol: str | None = None
    levels: list[Amount] = Field(default_factory=list)
    duration_s: Amount | None = None
    warmup_s: Amount | None = None
    processes: Count | None = None
    seed: int | None = None
    batch_size: int | None = Field(None, ge=1, le=2**31 - 1)
    window_s: Amount | None = None
    max_duration_s: Amount | None = None
    max_in_flight: int | None = None
    timeout_s: Amount | None = None
    check_every: int | None = Field(
        None, description="every Nth answer's outputs were fully decoded and checked (every answer leanly)"
    )
    input_data: str | None = Field(
        None, description="payloads from the server's metadata: zero | random | a perf_analyzer JSON file"
    )
    shapes: list[str] | None = Field(None, description="NAME:D1,D2 sizes given for dynamic input dimensions")
    repeat: int | None = Field(
        None, ge=1, description="which of N repeated runs (--repeats N) this is; absent: the first (or only)"
    )
    workload: Workload | None = Field(None, description="generative models: ISL/OSL, API, prompts")
    search: SearchPlan | None = Field(
        None, description="an SLO-capacity search: its plan (levels: its bracketing steps)"
    )


class ResultDocument(_Part):
    """``accelbench.result/1``: one (variant, target, load profile) run and its steps."""

    model_config = ConfigDict(title="accelbench.result/1")

    schema_id: Literal["accelbench.result/1"] = Field(RESULT_SCHEMA, alias="schema")
    run_id: str = Field(min_length=1, max_length=RUN_ID_MAX)
    origin: str = Field(
        max_length=ORIGIN_MAX,
        description="accelbench-loadtest | perf_analyzer-import | locust-import | device-check",
    )
    model: str = Field(max_length=MODEL_MAX)
    variant: str = Field(max_length=VARIANT_MAX)
    target: str | None = Field(max_length=TARGET_MAX)
    precision: str | None = Field(max_length=PRECISION_MAX)
    batch_size: int = Field(ge=1, le=2**31 - 1)
    task: str | None = Field(
        None, max_length=PRECISION_MAX, description="the card's task; text-generation for generative models"
    )
    accuracy: Accuracy | None = None
    graph_cost: GraphCost | None = None
    provenance: Provenance
    load_profile: LoadProfile
    steps: list[Step]
    search: SearchResult | None = Field(
        None, description="an SLO-capacity search's answer and its steps' phases"
    )
    complete: bool = False

    def model_post_init(self, context: Any, /) -> None:
        self.__pydantic_fields_set__.add("schema_id")  # always written, even when a writer leaves it implied

    def content_hash(self) -> str:
        """sha256 of the document's content (sorted keys): identifies it across hosts and the database."""
        return sha256_json(to_dict(self))


# ---------------------------------------------------------------- accelbench.variant/1
class Source(_Part):
    uri: str
    sha256: str


class Toolchain(_Part):
    name: str
    version: str | None = None


class TensorSpec(_Part):
    name: str
    dtype: str = Field(description="numpy dtype name")
    shape: list[int] = Field(
        description="the whole tensor, -1 = dynamic; shape[batch_axis] is the batch (-1 dynamic, N fixed)"
    )
    batch_axis: int | Literal["none"] | None = Field(
        None, description="the batch axis when not 0; 'none': the tensor has none (card field batch_axis)"
    )
    value: Any = Field(None, description="a fixed value fed on every run (a sample rate, a flag)")
    state_from: str | None = Field(None, description="recurrent state: the output that carries it on")


class Calibration(_Part):
    """How a quantized variant was calibrated; QDQ recipes add smoothquant, matmuls, excluded_nodes."""

    method: str | None = None
    samples: int | None = None
    seed: int | None = None


class Engine(_Part):
    status: Literal["built", "must-build-on-target"]
    script: str | None = None
    host_requirement: Any = None


class Attempt(_Part):
    """One quantization recipe tried for a variant (accelbench.models.toolchains.attempts)."""

    recipe: str
    outcome: Literal["ok", "failed"]
    reason: str = Field(description="one line: why it failed, or what the working graph passed")


class VariantManifest(_Part):
    """``accelbench.variant/1``: how one (model, target, precision) variant was made (``manifest.json``)."""

    model_config = ConfigDict(title="accelbench.variant/1")

    schema_id: Literal["accelbench.variant/1"] = Field(VARIANT_SCHEMA, alias="schema")
    name: str = Field(max_length=MODEL_MAX)
    model: str
    card: dict[str, Any]
    source: Source
    target: str
    precision: Literal["fp32", "fp16", "bf16", "int8", "int4", "fp8"]
    recipe: str
    format: Literal["onnx", "tensorrt-plan", "neuron", "hf-checkpoint"] = Field(
        description="hf-checkpoint: a generative recipe folder whose model_file is the hf/ checkpoint"
    )
    model_file: str
    toolchain: Toolchain
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    calibration: Calibration | None
    accuracy: Accuracy | None
    graph_cost: GraphCost | None
    engine: Engine | None
    attempts: list[Attempt] | None = Field(
        None, description="the recipes tried in order, the last one ok when the variant was made"
    )
    files: dict[str, str]
    created_at: str
    manifest_hash: str = Field(max_length=HASH_MAX)

    def model_post_init(self, context: Any, /) -> None:
        self.__pydantic_fields_set__.add("schema_id")

    @property
    def verdict(self) -> str:
        """The accuracy verdict, NOT_RUN when no accuracy block was written."""
        return (self.accuracy.verdict if self.accuracy else None) or "NOT_RUN"


# ---------------------------------------------------------------- load and dump
def to_dict(doc: BaseModel) -> dict[str, Any]:
    """The document as JSON-ready data with exactly the keys it was given (see the module docstring)."""
    return doc.model_dump(mode="python", by_alias=True, exclude_unset=True)


def dump_json(doc: BaseModel) -> str:
    """The document as accelbench writes it: sorted keys, 2-space indent, trailing newline."""
    return stable_json_text(to_dict(doc))


def load_result(
    source: str | os.PathLike[str] | Mapping[str, Any], name: str | None = None
) -> ResultDocument:
    """A result document from a file or a parsed mapping; BadInputError naming the file and the field."""
    return _load(ResultDocument, RESULT_SCHEMA, source, name)


def load_manifest(
    source: str | os.PathLike[str] | Mapping[str, Any], name: str | None = None
) -> VariantManifest:
    """A variant manifest from a file or a parsed mapping; BadInputError naming the file and the field."""
    return _load(VariantManifest, VARIANT_SCHEMA, source, name)


Document = TypeVar("Document", bound=BaseModel)


def _load(cls: type[Document], schema: str, source: Any, name: str | None) -> Document:
    if isinstance(source, Mapping):
        where, data = name or "document", source
    else:
        where = name or os.fspath(source)
        data = read_json(source, where)
    if not isinstance(data, Mapping):
        raise BadInputError(f"{where}: not an {schema} document (not a JSON object)")
    if data.get("schema") != schema:
        raise BadInputError(f"{where}: field 'schema' must be '{schema}', got {data.get('schema')!r}")
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise BadInputError(f"{where}: {describe_error(err)}") from None


def read_json(path: str | os.PathLike[str], where: str | None = None) -> Any:
    """Parsed JSON of a file, BadInputError with one line when it is missing or not JSON."""
    where = where or os.fspath(path)
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInputError(f"{where}: file not found") from None
    except (OSError, UnicodeDecodeError) as err:
        raise BadInputError(f"{where}: cannot read ({err})") from None
    except json.JSONDecodeError as err:
        raise BadInputError(f"{where}: not valid JSON: {err.msg} at line {err.lineno}") from None


def describe_error(
    err: ValidationError | Sequence[Mapping[str, Any]], *, skip: Collection[str] = (), whole: str = "document"
) -> str:
    """The first problem as ``field 'steps[3].latency_us.p99': <why>`` on one line, and how many more there are.

    ``err`` is pydantic's error or its ``errors()`` list (what FastAPI's request validation hands over);
    ``skip``: a leading location part that says where a value came from rather than naming a field (FastAPI's
    ``body``, ``query``, ``path``); ``whole``: the name used when the problem is the value as a whole."""
    errors = err.errors(include_url=False) if isinstance(err, ValidationError) else list(err)
    if not errors:
        return f"field '{whole}': invalid"
    first = errors[0]
    parts = list(first.get("loc") or ())
    if parts and parts[0] in skip:
        parts = parts[1:]
    loc = ""
    for part in parts:
        loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
    why = str(first.get("msg") or "invalid").removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"field '{loc or whole}': {why}{more}".replace("\n", " ")


# ---------------------------------------------------------------- JSON Schema export
SCHEMA_FILES: dict[str, type[BaseModel]] = {
    "result.schema.json": ResultDocument,
    "variant.schema.json": VariantManifest,
}


def json_schemas() -> dict[str, str]:
    """File name → JSON Schema text of each document (what docs/schema/ holds)."""
    return {
        name: stable_json_text(cls.model_json_schema(by_alias=True)) for name, cls in SCHEMA_FILES.items()
    }


def export_schemas(out_dir: str | os.PathLike[str]) -> list[Path]:
    from accelbench.util import atomic_write_text

    paths = []
    for name, text in json_schemas().items():
        atomic_write_text(Path(out_dir) / name, text)
        paths.append(Path(out_dir) / name)
    return paths


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export", metavar="DIR", required=True, help="write the JSON Schemas here")
    for written in export_schemas(parser.parse_args().export):
        print(written)
