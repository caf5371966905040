"""The load profile, defined once: how a sweep offers load (closed-loop concurrencies or open-loop Poisson
rates), the generative workload when the model streams tokens, and how often the sweep runs.

Each field carries a ``Knob``: its help text, its command-line flag and whether an experiment spec's
``[load]`` / ``[workload]`` table takes it. The ``loadtest`` and ``run`` options (commands/load_options.py), the
spec's tables (experiment/spec.py, through ``from_table``) and the result document's ``load_profile``
(``LoadProfile.to_dict``: its JSON is unchanged, so stored documents stay resumable) all come from here.
Validation is pure and names the field: ``ProfileError.key``; the CLI names the flag, the spec its key
(the machinery, ``knob`` / ``validate`` / ``from_table``: knobs.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from accelbench.errors import BadInputError
from accelbench.loadtests.jsonwire import ProfileWire
from accelbench.loadtests.knobs import (
    REQUIRED,
    ProfileError,
    from_table,
    is_number,
    knob,
    knobs,
    number,
    optional,
    validate,
    whole,
)
from accelbench.loadtests.tokens import DEFAULT_TOKENIZER
from accelbench.models.cards import parse_shape
from accelbench.util import sha256_file

KINDS = ("closed", "open")
PROTOCOLS = ("http", "grpc")
# triton: HTTP generate_stream (SSE); triton-grpc: ModelStreamInfer; openai-*: /v1/completions, chat;
# "openai" is the chat API, the one every OpenAI-compatible engine serves
API_CHOICES = ("triton", "triton-grpc", "openai", "openai-completions", "openai-chat", "openai-embeddings")
CONVERSATION_APIS = ("openai-chat", "openai-completions")  # the history is re-sent as text
SYNTHETIC = "synthetic"

if TYPE_CHECKING:  # pydantic loads when a document is made, not for `accelbench --help`
    from accelbench.documents import LoadProfile as LoadProfileDocument


def _fraction(value: Any) -> str | None:
    if is_number(value) and 0 < value <= 1:
        return None
    return f"{value!r} must be in (0, 1]: lengths uniform in [r·L, L]"


MIN_ENGINE_METRICS_S = 0.1


def _engine_metrics(value: Any) -> str | None:
    """``off``, or seconds between scrapes (at least MIN_ENGINE_METRICS_S)."""
    if value == "off":
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if seconds >= MIN_ENGINE_METRICS_S:
        return None
    return f"{value!r} must be off or seconds between scrapes, >= {MIN_ENGINE_METRICS_S:g}"


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"{value!r} must be true or false"


def _path(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else "must be a path"


def _levels(value: Any) -> str | None:
    if not isinstance(value, tuple) or not value:
        return "must list at least one load level"
    return next((number()(v) for v in value if number()(v)), None)


def _shapes(value: Any) -> str | None:
    if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
        return "must be a list of NAME:D1,D2 texts"
    for text in value:
        parse_shape(text)  # its own one-line error names --shape and the text
    return None


# ---- the generative workload -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Workload:
    """What a generative (streaming) sweep asks for: the API, prompt and output lengths in the model's
    tokens, the prompts and the tokenizer counting them (``load_profile.workload``, documents.Workload).

    ``isl_range`` r in (0, 1]: prompt lengths uniform in [r·isl, isl] (SGLang / InferenceX
    ``--random-range-ratio``); 1 = exactly ``isl``. ``prompts`` is given as a path (or ``synthetic``) and
    recorded by ``recorded`` as the file's name with its sha256."""

    api: str = knob(
        "triton",
        "Generative model: triton (HTTP generate_stream), triton-grpc "
        "(ModelStreamInfer), openai (= openai-chat), openai-completions. Default for a streaming "
        "Triton model: triton.",
        flag="--api",
        choices=API_CHOICES,
    )
    isl: int = knob(
        128,
        "Prompt length in tokens (synthetic prompts; default 128).",
        flag="--isl",
        check=whole(1, " of tokens"),
    )
    osl: int = knob(
        64, "Output length asked (max_tokens; default 64).", flag="--osl", check=whole(1, " of tokens")
    )
    isl_range: float = knob(
        1.0, "Prompt lengths uniform in [r*ISL, ISL] (default 1).", flag="--isl-range", check=_fraction
    )
    osl_range: float = knob(
        1.0, "Output lengths uniform in [r*OSL, OSL] (default 1).", flag="--osl-range", check=_fraction
    )
    ignore_eos: bool = knob(
        True,
        "Ask for exactly the output length (--no-ignore-eos: let the model stop at its end token).",
        flag="--ignore-eos/--no-ignore-eos",
        check=_flag,
    )
    prompts: str = knob(
        SYNTHETIC,
        "Prompts file: JSONL {prompt, output_tokens} per line, or a ShareGPT JSON "
        "file (recorded as its name and sha256).",
        flag="--prompts",
        check=_path,
        path=True,
    )
    prompts_sha256: str | None = knob(None, "sha256 of the prompts file", spec=False)
    ignore_eos_refused: bool | None = knob(None, "the engine refused ignore_eos; it was dropped", spec=False)
    tokenizer: str | None = knob(
        None,
        "Tokenizer folder (tokenizer.json) counting tokens (default: the "
        "model's: its variant's tokenizer/ copy, else its card's (--card, else the "
        "manifest's); else builtin:minilm-wordpiece).",
        flag="--tokenizer",
        check=_path,
    )
    # the step's p99 objectives, one name everywhere: a spec's [slo] ttft_p99_ms / tpot_p99_ms, the report's
    # --slo-ttft-p99-ms / --slo-tpot-p99-ms; goodput counts the requests whose own TTFT / TPOT is within them
    slo_ttft_p99_ms: float | None = knob(
        None,
        "A step's TTFT p99 objective (ms); goodput counts the requests whose own TTFT is within it.",
        flag="--slo-ttft-p99-ms",
        spec=False,
        check=optional(number()),
    )
    slo_tpot_p99_ms: float | None = knob(
        None,
        "A step's TPOT p99 objective (ms); goodput counts the requests whose own TPOT is within it.",
        flag="--slo-tpot-p99-ms",
        spec=False,
        check=optional(number()),
    )
    # the traffic teams run (docs/llm.md "Workloads"); each at its default is left out of the document
    prefix_tokens: int = knob(
        0,
        "Shared prefix: the first N tokens of every prompt are its group's system "
        "prompt (the rest is its own).",
        flag="--prefix-tokens",
        check=whole(0),
    )
    prefix_groups: int = knob(
        1,
        "Shared prefix: distinct prefixes, used in turn (default 1).",
        flag="--prefix-groups",
        check=whole(1),
    )
    turns: int = knob(
        1,
        "Multi-turn: turns per conversation; each turn re-sends the history (its "
        "questions and the answers streamed) with a new question of ISL tokens.",
        flag="--turns",
        check=whole(1),
    )
    think_time_s: float = knob(
        0.0,
        "Multi-turn: seconds a user waits after an answer before the next turn.",
        flag="--think-time",
        check=number(strict=False),
    )
    trace: str | None = knob(
        None,
        "Replay a trace at its timestamps (open loop; --rate R scales it to R "
        "requests/s): Mooncake JSONL or BurstGPT CSV (recorded as its name and sha256).",
        flag="--trace",
        check=_path,
        path=True,
    )
    trace_sha256: str | None = knob(None, "sha256 of the trace file", spec=False)
    trace_block_tokens: int = knob(
        512, "Tokens per Mooncake hash_id block (default 512).", flag="--trace-block-tokens", check=whole(1)
    )
    cancel_after_ms: float | None = knob(
        None,
        "Cancel requests this many ms after they were sent (the connection is closed).",
        flag="--cancel-after-ms",
        check=optional(number()),
    )
    cancel_fraction: float = knob(
        1.0,
        "With --cancel-after-ms: the fraction of requests cancelled (evenly spread; default 1).",
        flag="--cancel-fraction",
        check=_fraction,
    )

    engine_metrics: str = knob(
        "0.5",
        "Scrape the engine's /metrics every SECONDS during each step, in a process of its own (off: not at "
        "all; default 0.5).",
        flag="--engine-metrics",
        check=_engine_metrics,
    )

    def __post_init__(self) -> None:
        if isinstance(self.engine_metrics, int | float) and not isinstance(self.engine_metrics, bool):
            object.__setattr__(self, "engine_metrics", f"{self.engine_metrics:g}")  # a spec's number
        validate(self)
        if self.api == "openai":
            object.__setattr__(self, "api", "openai-chat")
        self._check_combination()

    def _check_combination(self) -> None:
        shortest = max(1, int(round(self.isl * self.isl_range)))
        if self.prefix_tokens and self.prefix_tokens >= shortest:
            raise ProfileError(
                "prefix_tokens",
                f"{self.prefix_tokens} must be below the shortest prompt "
                f"({shortest} tokens) so each prompt keeps tokens of its own",
            )
        if self.turns > 1 and self.api not in CONVERSATION_APIS:
            raise ProfileError(
                "turns",
                f"multi-turn conversations re-send text: use --api "
                f"{' or '.join(CONVERSATION_APIS)}, not {self.api}",
            )
        given = [
            name
            for name, on in (
                ("trace", self.trace),
                ("prompts", self.prompts != SYNTHETIC),
                ("turns", self.turns > 1),
                ("prefix_tokens", self.prefix_tokens),
            )
            if on
        ]
        if len(given) > 1:
            raise ProfileError(
                given[1], f"cannot be combined with {given[0]}: each says where prompts come from"
            )
        if self.api == "triton-grpc" and self.cancel_after_ms is not None:
            raise ProfileError(
                "cancel_after_ms",
                "a cancellation closes the HTTP connection: use --api triton "
                "(HTTP generate_stream) or an OpenAI API",
            )
        if self.api == "openai-embeddings" and (self.turns > 1 or self.cancel_after_ms is not None):
            raise ProfileError("api", "openai-embeddings answers in one piece: no turns, no cancellation")

    @property
    def engine_metrics_s(self) -> float | None:
        """Seconds between /metrics scrapes; None: ``--engine-metrics off``."""
        return None if self.engine_metrics == "off" else float(self.engine_metrics)

    @property
    def is_trace(self) -> bool:
        return self.trace is not None

    @property
    def prompts_file(self) -> str | None:
        """The prompts file given (None: synthetic prompts)."""
        return None if self.prompts == SYNTHETIC or self.prompts_sha256 else self.prompts

    def recorded(self, tokenizer: str | None = None) -> Workload:
        """The workload as recorded: the prompts file's name and sha256 instead of its path, and a tokenizer
        (this one's, else ``tokenizer``, else builtin:minilm-wordpiece), so a different workload never
        resumes another's steps."""
        out = dataclasses.replace(self, tokenizer=self.tokenizer or tokenizer or DEFAULT_TOKENIZER)
        if self.trace is not None and self.trace_sha256 is None:
            if not Path(self.trace).is_file():
                raise BadInputError(f"--trace {self.trace}: no such file")
            out = dataclasses.replace(out, trace=Path(self.trace).name, trace_sha256=sha256_file(self.trace))
        path = self.prompts_file
        if path is None:
            return out
        if not Path(path).is_file():
            raise BadInputError(f"--prompts {path}: no such file")
        return dataclasses.replace(out, prompts=Path(path).name, prompts_sha256=sha256_file(path))

    @property
    def trace_file(self) -> str | None:
        """The trace file given (None: no trace, or one already recorded by name)."""
        return None if self.trace is None or self.trace_sha256 else self.trace

    def to_dict(self) -> ProfileWire:
        """Every field; the workload fields added later are left out at their defaults, so the documents
        written before them stay resumable and unchanged."""
        out = asdict(self)
        for f in dataclasses.fields(self):
            if f.name in _LATER_FIELDS and out[f.name] == f.default:
                del out[f.name]
        return out

    def label(self) -> str:
        """Part of the result file's name: the API, the lengths asked, and the kind of traffic."""
        parts = [f"{self.api}-i{self.isl}-o{self.osl}"]
        if self.prefix_tokens:
            parts.append(f"p{self.prefix_tokens}x{self.prefix_groups}")
        if self.turns > 1:
            parts.append(f"t{self.turns}")
        if self.trace is not None:
            parts.append("trace")
        if self.cancel_after_ms is not None:
            parts.append(f"c{self.cancel_after_ms:g}")
        return "-".join(parts)


_LATER_FIELDS = frozenset(
    {
        "ignore_eos_refused",
        "prefix_tokens",
        "prefix_groups",
        "turns",
        "think_time_s",
        "trace",
        "trace_sha256",
        "trace_block_tokens",
        "cancel_after_ms",
        "cancel_fraction",
        "engine_metrics",
    }
)


SEARCH_MODES = ("concurrency", "rate")
DEFAULT_SEARCH_BUDGET_S = 300.0


@dataclass(frozen=True)
class Search:
    """The SLO-capacity search (loadtests/search.py): the highest concurrency, or Poisson rate, whose TTFT
    p99 and TPOT p99 meet the workload's objectives (``--slo-ttft-p99-ms``, ``--slo-tpot-p99-ms``; a spec's
    ``[slo]``). The spec's ``[search]`` table takes these keys."""

    mode: str = knob(
        "concurrency",
        "Search for the highest load that meets the TTFT/TPOT p99 objectives: "
        "concurrency (closed loop) or rate (Poisson requests/s).",
        flag="--search",
        choices=SEARCH_MODES,
    )
    max_concurrency: int = knob(
        64,
        "Search: the saturation step's concurrency (default 64).",
        flag="--search-max-concurrency",
        check=whole(1),
    )
    between: int = knob(
        3,
        "Search: loads measured between the synchronous and the saturation step.",
        flag="--search-between",
        check=whole(1),
    )
    refinements: int = knob(
        4,
        "Search: bisection steps at most after those (concurrencies stop 1 apart).",
        flag="--search-refinements",
        check=whole(0),
    )
    budget_s: float = knob(
        DEFAULT_SEARCH_BUDGET_S,
        "Search: seconds for the whole search; each step gets its share of what is left, and the answer "
        "carries the interval its samples give (default 300).",
        flag="--search-budget-s",
        check=number(),
    )

    def __post_init__(self) -> None:
        validate(self)


# ---- the load profile ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadProfile:
    """How load is offered. ``levels`` are concurrencies (closed) or requests/s (open).

    ``duration_s`` set: each step measures at least that long. ``duration_s`` None (or 0): each step runs
    until its judged percentile's sample floor, at most ``max_duration_s``.
    """

    kind: str = knob(
        REQUIRED,
        "closed: a concurrency sweep (--concurrency); open: Poisson arrivals (--rate)",
        choices=KINDS,
    )
    levels: tuple[float, ...] = knob(
        REQUIRED, "concurrencies (closed loop) or requests/s (open loop)", check=_levels
    )
    protocol: str = knob("http", "How requests reach Triton.", flag="--protocol", choices=PROTOCOLS)
    duration_s: float | None = knob(
        None,
        "Least seconds measured per step; it then runs until p99's sample floor, at most --max-duration.",
        flag="--duration",
        check=optional(number(strict=False)),
    )
    warmup_s: float = knob(2.0, "Seconds of unmeasured warm-up.", flag="--warmup", check=number(strict=False))
    processes: int = knob(1, "Locust load processes.", flag="--processes", check=whole(1))
    seed: int = knob(
        0, "Seed of the request payloads and of open-loop arrivals.", flag="--seed", check=whole(None)
    )
    batch_size: int = knob(1, "Batch size per request.", flag="--batch", check=whole(1))
    window_s: float = knob(
        1.0, "Seconds per window of the progress lines and of a step's windows", check=number()
    )
    max_duration_s: float = knob(
        60.0,
        "The longest a step may run while waiting for its warm-up cut and sample floor.",
        flag="--max-duration",
        check=number(),
    )
    # open loop: arrivals beyond this many outstanding requests are dropped, counted
    max_in_flight: int = knob(
        256, "Open loop: outstanding requests beyond which arrivals are dropped", check=whole(1)
    )
    timeout_s: float = knob(30.0, "Seconds before a request counts as a timeout", check=number())
    # every answer gets the lean check (status, names, dtypes, shapes, sizes); every Nth and every failed
    # one also the full check (each tensor decoded)
    check_every: int = knob(
        100,
        "Decode every output fully on every Nth answer (and on each failed lean check).",
        flag="--check-every",
        check=whole(1),
    )
    # payloads from the server's model metadata (served.py): zero | random | a perf_analyzer JSON data file;
    # None: from the model card when there is one
    input_data: str | None = knob(
        None,
        "Payloads from the server's model metadata: zero, random, or a "
        "perf_analyzer JSON data file (default without a card or manifest: random).",
        flag="--input-data",
        spec=False,
        check=_path,
    )
    shapes: tuple[str, ...] = knob(
        (),
        "NAME:D1,D2 size of an input's dynamic dimensions, batch excluded (repeatable).",
        flag="--shape",
        spec=False,
        check=_shapes,
    )
    # which of ``--repeats N`` independent runs this is (1..N); repeat 1 is recorded as before (no key)
    repeat: int = knob(1, "which of N repeated runs this is", spec=False, check=whole(1))
    # generative sweeps: streamed requests, token-level figures
    workload: Workload | None = knob(None, "the generative workload", spec=False)
    # the SLO-capacity search: its steps are planned as they are measured (levels: the bracketing ones)
    search: Search | None = knob(None, "the SLO-capacity search", spec=False)

    def __post_init__(self) -> None:
        if isinstance(self.levels, list):
            object.__setattr__(self, "levels", tuple(self.levels))
        if isinstance(self.shapes, list):
            object.__setattr__(self, "shapes", tuple(self.shapes))
        if isinstance(self.workload, Mapping):
            object.__setattr__(self, "workload", Workload(**self.workload))
        if isinstance(self.search, Mapping):
            object.__setattr__(self, "search", Search(**self.search))
        validate(self)
        self._check_workload()
        if self.kind == "closed" and any(int(v) != v for v in self.levels):
            raise ProfileError(
                "levels", f"closed-loop concurrency must be whole numbers, got {list(self.levels)}"
            )
        if self.duration_s == 0:  # 0, as a spec writes it: until the sample floor
            object.__setattr__(self, "duration_s", None)

    def _check_workload(self) -> None:
        w = self.workload
        if w is not None and w.trace is not None and self.kind != "open":
            raise ProfileError(
                "trace",
                "a trace is replayed at its timestamps: give --rate R (its own rate, or "
                "another to scale it to)",
            )
        if self.search is None or w is None:  # a classic profile refuses a search where it is made
            return
        if w.slo_ttft_p99_ms is None and w.slo_tpot_p99_ms is None:
            raise ProfileError(
                "search",
                "needs an objective: --slo-ttft-p99-ms and/or --slo-tpot-p99-ms "
                "(a spec's [slo] ttft_p99_ms, tpot_p99_ms)",
            )
        if self.kind != ("closed" if self.search.mode == "concurrency" else "open"):
            raise ProfileError(
                "search",
                f"a {self.search.mode} search cannot run a {self.kind} loop "
                "(LoadProfile.searching sets the kind)",
            )
        if w.trace is not None:
            raise ProfileError("search", "a trace is replayed at its own timestamps, not searched")

    def searching(self, search: Search) -> LoadProfile:
        """This profile for an SLO-capacity search: its kind follows the mode, its levels are the bracketing
        steps' concurrencies (1 and max_concurrency); the steps between are planned as they are measured."""
        kind = "closed" if search.mode == "concurrency" else "open"
        levels = (1.0, float(search.max_concurrency))
        return dataclasses.replace(self, kind=kind, levels=levels, search=search)

    def to_dict(self) -> ProfileWire:
        """The ``load_profile`` of the result document; equal dicts mean a rerun may resume."""
        out = asdict(self)
        out["levels"] = [int(v) if self.kind == "closed" else float(v) for v in self.levels]
        out["shapes"] = list(self.shapes)  # as JSON reads it back, so a rerun compares equal
        if self.repeat == 1:  # documents written before repeats existed stay resumable and unchanged
            del out["repeat"]
        if self.workload is None:  # classic documents stay unchanged and resumable
            del out["workload"]
        else:
            out["workload"] = self.workload.to_dict()
        if self.search is None:
            del out["search"]
        else:
            out["levels"] = [int(v) for v in self.levels]
            if self.search.budget_s == DEFAULT_SEARCH_BUDGET_S:  # searches recorded before it resume
                del out["search"]["budget_s"]
        return out

    def to_document(self) -> LoadProfileDocument:
        from accelbench.documents import LoadProfile as LoadProfileDocument

        return LoadProfileDocument.model_validate(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | LoadProfileDocument) -> LoadProfile:
        """The profile a document (or its ``to_dict``) recorded."""
        if not isinstance(data, Mapping):  # the document's part
            from accelbench.documents import to_dict

            data = to_dict(data)
        return cls(**data)

    def streaming(self, workload: Workload, tokenizer: str | None = None) -> LoadProfile:
        """This profile for a generative model: ``workload`` as recorded (``Workload.recorded``), the protocol
        its API speaks, one prompt per request."""
        w = workload.recorded(tokenizer)
        protocol = "grpc" if w.api == "triton-grpc" else "http"
        return dataclasses.replace(self, protocol=protocol, batch_size=1, workload=w)

    def steps(self) -> list[StepPlan]:
        """One plan per level: its index and its offered load (a concurrency, or a rate); none for a search,
        whose steps are planned as they are measured (search_run.py)."""
        if self.search is not None:
            return []
        if self.kind == "closed":
            return [StepPlan(i, concurrency=int(v)) for i, v in enumerate(self.levels)]
        return [StepPlan(i, rate_rps=float(v)) for i, v in enumerate(self.levels)]

    def label(self) -> str:
        if self.search is not None and self.workload:
            return f"search-{self.search.mode}-{self.workload.label()}"
        if self.workload:
            return f"{self.kind}-{self.workload.label()}"
        return f"{self.kind}-{self.protocol}-b{self.batch_size}"


@dataclass(frozen=True)
class StepPlan:
    """One step of a sweep as planned: its index and the load it offers, a closed loop's ``concurrency`` or an
    open loop's ``rate_rps`` (exactly one). ``offered`` is the result document's ``offered``; ``to_wire`` /
    ``from_wire`` the JSON the sweep sends its Locust child (``{"index", "offered"}``)."""

    index: int
    concurrency: int | None = None
    rate_rps: float | None = None
    max_duration_s: float | None = None  # a search step's share of its time budget (None: the profile's)

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate_rps is None):
            raise ValueError(f"step {self.index}: a concurrency or a rate, exactly one")

    @property
    def closed(self) -> bool:
        return self.concurrency is not None

    @property
    def offered(self) -> dict[str, float]:
        if self.concurrency is not None:
            return {"concurrency": self.concurrency}
        return {"rate_rps": float(self.rate_rps or 0.0)}

    def to_wire(self) -> StepWire:
        out: StepWire = {"index": self.index, "offered": self.offered}
        if self.max_duration_s is not None:
            out["max_duration_s"] = self.max_duration_s
        return out

    @classmethod
    def from_wire(cls, data: StepWire) -> StepPlan:
        offered, cap = data["offered"], data.get("max_duration_s")
        cap_s = None if cap is None else float(cap)
        if "concurrency" in offered:
            return cls(int(data["index"]), concurrency=int(offered["concurrency"]), max_duration_s=cap_s)
        return cls(int(data["index"]), rate_rps=float(offered["rate_rps"]), max_duration_s=cap_s)


class StepWire(TypedDict, total=False):
    """A StepPlan as the sweep sends it to its Locust child (JSON)."""

    index: int
    offered: dict[str, float]
    max_duration_s: float


@dataclass(frozen=True)
class LoadPlan:
    """A profile and how often it runs: the spec's ``[load]`` table, the loadtest command's options."""

    profile: LoadProfile
    repeats: int = knob(
        1,
        "Independent runs of the whole sweep, one result document each (the report combines them).",
        flag="--repeats",
        check=whole(1),
    )
    retries: int = knob(
        2,
        "Re-measure a step judged INVALID for drift or no steady state up to N times; every attempt is kept.",
        flag="--retries",
        check=whole(0),
    )

    def __post_init__(self) -> None:
        validate(self)

    def runs(self) -> list[LoadProfile]:
        """The profile of each repeat, 1..repeats."""
        return [dataclasses.replace(self.profile, repeat=r) for r in range(1, self.repeats + 1)]


def plan_from_table(table: Mapping[str, Any], defaults: Mapping[str, Any]) -> LoadPlan:
    """A spec's ``[load]`` table: the profile's spec keys and ``repeats``/``retries``."""
    own = {f.name for f, _ in knobs(LoadPlan)}
    allowed = [f.name for f, _ in knobs(LoadProfile, spec=True)] + sorted(own)
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise ProfileError(unknown[0], f"unknown key; allowed: {', '.join(allowed)}")
    profile = from_table(LoadProfile, {k: v for k, v in table.items() if k not in own}, defaults)
    return LoadPlan(profile, **{k: v for k, v in table.items() if k in own})


def offered_label(offered: Mapping[str, Any]) -> str:
    """A step's offered load for people: ``concurrency 4`` or ``200 requests/s``."""
    if "concurrency" in offered:
        return f"concurrency {offered['concurrency']}"
    return f"{offered['rate_rps']:g} requests/s"


def parse_levels(text: str) -> tuple[float, ...]:
    """``"1,2,4"`` → (1.0, 2.0, 4.0); a clear error for anything else."""
    try:
        levels = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise BadInputError(f"load levels {text!r}: expected comma-separated numbers like 1,2,4") from None
    if not levels:
        raise BadInputError(f"load levels {text!r}: expected comma-separated numbers like 1,2,4")
    return levels
