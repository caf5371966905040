"""The generative workloads and the SLO-capacity search as pure code: trace files read (and refused) line by
line, shared-prefix prompts and conversations of the asked lengths, and the search against simulated
servers of known capacity (N slots: concurrency above N queues, so TTFT jumps)."""

from __future__ import annotations

import pytest

from accelbench.errors import BadInputError
from accelbench.loadtests import search, traces, workloads
from accelbench.loadtests.knobs import ProfileError
from accelbench.loadtests.profiles import LoadProfile, Search, Workload

DATA = __import__("pathlib").Path(__file__).parent / "data" / "traces"


def test_mooncake_and_burstgpt_samples_are_read():
    moon = traces.read_trace(DATA / "mooncake_sample.jsonl")
    assert moon[0].at_s == 0 and all(a.at_s <= b.at_s for a, b in zip(moon, moon[1:], strict=False))
    assert moon[0].hash_ids and moon[0].isl >= 1
    assert traces.own_rate_rps(moon) == pytest.approx((len(moon) - 1) / moon[-1].at_s)
    burst = traces.read_trace(DATA / "burstgpt_sample.csv")
    assert len(burst) >= 10 and all(e.osl >= 1 and not e.hash_ids for e in burst)


@pytest.mark.parametrize("text, message", [
    ('{"timestamp": 0, "input_length": 5}\n', "missing output_length"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 0}\n', "output_length must be a whole number >= 1"),
    ('{"timestamp": -1, "input_length": 5, "output_length": 2}\n', "timestamp must be a number >= 0"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": "x"}\n', "hash_ids must be"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 2}\nnope\n', ":2: not a JSON object"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 2}\n', "fewer than two requests"),
])  # fmt: skip
def test_bad_mooncake_lines_are_one_line(tmp_path, text, message):
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    with pytest.raises(BadInputError, match=message):
        traces.read_trace(path)


def test_bad_burstgpt_files(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text("Timestamp,Model\n1,gpt\n")
    with pytest.raises(BadInputError, match="needs the columns"):
        traces.read_trace(path)
    path.write_text("Timestamp,Model,Request tokens,Response tokens\n1,gpt,x,3\n")
    with pytest.raises(BadInputError, match=":2: Timestamp, Request tokens"):
        traces.read_trace(path)
    with pytest.raises(BadInputError, match="no such file"):
        traces.read_trace(tmp_path / "none.csv")


def test_trace_prompts_share_their_hash_blocks():
    w = Workload(api="openai-chat", trace="x", trace_block_tokens=8)
    path = DATA / "mooncake_sample.jsonl"
    prompts = workloads.trace_prompts(w, path)
    entries = traces.read_trace(path)
    assert [len(p["input_ids"]) for p in prompts] == [e.isl for e in entries]
    assert [p["osl"] for p in prompts] == [e.osl for e in entries]
    # two requests whose hash_ids begin alike share those blocks' tokens exactly
    a, b = next(
        (i, j)
        for i in range(len(entries))
        for j in range(i + 1, len(entries))
        if entries[i].hash_ids[:1] == entries[j].hash_ids[:1] and entries[i].isl >= 8 <= entries[j].isl
    )
    assert prompts[a]["input_ids"][:8] == prompts[b]["input_ids"][:8]
    back = [workloads.from_payload(p) for p in workloads.as_payloads(prompts[:3])]
    assert [p["at_s"] for p in back] == [e.at_s for e in entries[:3]]


def test_shared_prefix_prompts_and_conversations():
    w = Workload(api="openai-chat", isl=40, osl=4, prefix_tokens=30, prefix_groups=3)
    got = workloads.shared_prefix_prompts(w, count=9)
    assert all(len(p["input_ids"]) == 40 for p in got)
    for g in range(3):
        heads = {tuple(p["input_ids"][:30]) for p in got if p["group"] == g}
        assert len(heads) == 1
    assert len({tuple(p["input_ids"][:30]) for p in got}) == 3
    assert len({tuple(p["input_ids"][30:]) for p in got}) == 9
    conv = workloads.conversations(Workload(api="openai-chat", isl=6, osl=3, turns=3), count=2)
    assert all(len(c["turns"]) == 3 for c in conv)
    back = workloads.from_payload(workloads.as_payloads(conv)[0])
    assert back["turns"] == conv[0]["turns"] and len(back["turns"][2].split()) == 6


def test_workload_combinations_are_refused_in_one_line():
    for kw, key in (({"prefix_tokens": 128}, "prefix_tokens"), ({"turns": 2, "api": "triton"}, "turns"),
                    ({"trace": "t.jsonl", "turns": 2, "api": "openai-chat"}, "turns"),
                    ({"api": "openai-embeddings", "turns": 2}, "turns"),
                    ({"api": "openai-embeddings", "cancel_after_ms": 5}, "api"),
                    ({"cancel_fraction": 0}, "cancel_fraction"),
                    ({"api": "triton-grpc", "cancel_after_ms": 5}, "cancel_after_ms")):  # fmt: skip
        with pytest.raises(ProfileError) as err:
            Workload(**kw)
        assert err.value.key == key, (kw, err.value)
    # a workload at its defaults is recorded as before (old documents stay resumable)
    assert set(Workload().to_dict()) == {
        "api",
        "isl",
        "osl",
        "isl_range",
        "osl_range",
        "ignore_eos",
        "prompts",
        "prompts_sha256",
        "tokenizer",
        "slo_ttft_p99_ms",
        "slo_tpot_p99_ms",
    }
    w = Workload(api="openai-chat", prefix_tokens=8, turns=1)
    assert w.to_dict()["prefix_tokens"] == 8 and w.label() == "openai-chat-i128-o64-p8x1"
    assert LoadProfile(kind="open", levels=(1.0,), workload=w.to_dict()).workload == w


# ---- the search against simulated servers ---------------------------------------------------------------
TTFT_MS, SERVICE_MS = 50.0, 80.0


def slots_server(n: int, offered: dict[str, float], index: int) -> search.Point:
    """A server of ``n`` slots, each request ``SERVICE_MS`` long: up to n in flight no queue; above, the
    queued ones wait a service time (closed loop), or a rate above n / service saturates it."""
    capacity_rps = n / (SERVICE_MS / 1000)
    if "concurrency" in offered:
        c = offered["concurrency"]
        ttft = TTFT_MS if c <= n else TTFT_MS + SERVICE_MS
        return search.Point(index, offered, ttft, 10.0, min(c, n) / (SERVICE_MS / 1000))
    r = offered["rate_rps"]
    ttft = TTFT_MS if r <= 0.7 * capacity_rps else TTFT_MS + 5 * SERVICE_MS
    return search.Point(index, offered, ttft, 10.0, min(r, capacity_rps), achieved_rps=min(r, capacity_rps))


def run_search(plan: search.Plan, measure) -> tuple[search.Answer, list[search.Point]]:
    points: list[search.Point] = []
    phases: dict[int, str] = {}
    for _ in range(40):
        loads = search.next_loads(plan, points, phases)
        if not loads:
            break
        for offered, phase in loads:
            phases[len(points)] = phase
            points.append(measure(offered, len(points)))
    return search.answer(plan, points, phases), points


@pytest.mark.parametrize("n", [1, 3, 4, 16, 31])
@pytest.mark.parametrize("top, between", [(32, 3), (64, 3), (32, 2)])
def test_closed_loop_search_finds_the_slots(n, top, between):
    plan = search.Plan("concurrency", search.Objectives(TTFT_MS + 20, 15.0), top, between, refinements=8)
    got, points = run_search(plan, lambda offered, i: slots_server(n, offered, i))
    assert got.level == n and got.above == n + 1, (got, [p.level for p in points])
    assert [got.phases[0], got.phases[1]] == ["synchronous", "saturation"]
    assert len(points) <= 2 + between + 6


def test_closed_loop_search_ends_and_says_why():
    plan = search.Plan("concurrency", search.Objectives(TTFT_MS + 20, None), 8, 2)
    got, _ = run_search(plan, lambda offered, i: slots_server(64, offered, i))
    assert got.level == 8 and got.above is None and "raise max_concurrency" in got.reason
    strict = search.Plan("concurrency", search.Objectives(TTFT_MS - 1, None), 8, 2)
    got, points = run_search(strict, lambda offered, i: slots_server(4, offered, i))
    assert got.level is None and len(points) == 2 and "one request at a time" in got.reason
    few = search.Plan("concurrency", search.Objectives(TTFT_MS + 20, None), 64, 3, refinements=1)
    got, _ = run_search(few, lambda offered, i: slots_server(16, offered, i))
    assert got.level <= 16 < got.above  # one refinement: the interval still holds the capacity


def test_rate_search_brackets_then_refines():
    n = 4
    capacity = n / (SERVICE_MS / 1000)  # 50 requests/s; the objectives hold up to 70 % of it
    plan = search.Plan("rate", search.Objectives(TTFT_MS + 20, None), 16, 3, refinements=4)
    got, points = run_search(plan, lambda offered, i: slots_server(n, offered, i))
    rates = [p for p in points if p.is_rate]
    assert [got.phases[p.index] for p in rates][:3] == ["between"] * 3
    assert got.level <= 0.7 * capacity < got.above and got.above - got.level <= capacity / 4 / 2**3
    assert (
        search.Objectives(1.0).met_by(search.Point(0, {"rate_rps": 10}, 0.5, None, 5, achieved_rps=5))
        is False
    )


# ---- the spec's [workload] and [search], the command line's one-line refusals ----------------------------
EXAMPLE = DATA.parent.parent.parent / "examples" / "llm.toml"


def test_spec_workload_keys_and_search_table():
    from accelbench.experiment.spec import parse_spec

    text = EXAMPLE.read_text().replace("isl = 64", "isl = 64\nprefix_tokens = 48\nprefix_groups = 2")
    spec = parse_spec(
        text + '\n[search]\nmode = "concurrency"\nmax_concurrency = 8\nbetween = 2\n', "llm.toml"
    )
    assert (spec.workload.prefix_tokens, spec.workload.prefix_groups) == (48, 2)
    assert spec.load.profile.search is None  # a classic model in the spec measures [load]'s levels
    assert spec.search is not None
    profile = spec.load.profile.searching(spec.search)
    assert profile.search is not None and profile.search.max_concurrency == 8 and profile.kind == "closed"
    assert profile.levels == (1.0, 8.0) and profile.steps() == []
    streaming = profile.streaming(
        spec.workload.__class__(**{**spec.workload.to_dict(), "slo_ttft_p99_ms": 500})
    )
    assert streaming.to_dict()["search"] == {"mode": "concurrency", "max_concurrency": 8, "between": 2,
                                             "refinements": 4}  # fmt: skip
    assert streaming.label() == "search-concurrency-triton-i64-o32-p48x2"
    for extra, message in (('\n[search]\nmode = "fast"\n', "search.mode: 'fast' is not one of"),
                           ("\n[search]\nbogus = 1\n", "search.bogus: unknown key"),
                           ):  # fmt: skip
        with pytest.raises(BadInputError, match=message):
            parse_spec(text + extra, "llm.toml")
    no_slo = text.replace("ttft_p99_ms = 500", "").replace("tpot_p99_ms = 50", "")
    with pytest.raises(BadInputError, match="search: needs an objective"):
        parse_spec(no_slo + '\n[search]\nmode = "rate"\n', "llm.toml")
    with pytest.raises(
        BadInputError, match=r'workload.trace: a trace is replayed at its timestamps: \[load\] kind = "open"'
    ):
        parse_spec(EXAMPLE.read_text().replace("isl = 64", 'isl = 64\ntrace = "t.jsonl"'), "llm.toml")
    with pytest.raises(BadInputError, match="workload.turns: multi-turn"):
        parse_spec(text.replace("isl = 64", "isl = 64\nturns = 3"), "llm.toml")


@pytest.mark.parametrize("args, line", [
    (["--api", "triton", "--turns", "2", "--concurrency", "1"], "--turns: multi-turn conversations re-send text"),
    (["--api", "openai", "--trace", str(DATA / "mooncake_sample.jsonl"), "--concurrency", "1"],
     "--trace: a trace is replayed at its timestamps"),
    (["--api", "openai", "--search", "concurrency"], "search: needs an objective"),
    (["--api", "openai", "--search", "rate", "--rate", "2", "--slo-ttft-p99-ms", "9"], "drop --rate"),
    (["--api", "openai", "--search-between", "2", "--concurrency", "1"], "go with --search"),
    (["--api", "openai", "--prefix-tokens", "200", "--isl", "100", "--concurrency", "1"], "--prefix-tokens: 200"),
    (["--api", "openai", "--trace", "/nonexistent.jsonl", "--rate", "1"], "--trace /nonexistent.jsonl: no such"),
])  # fmt: skip
def test_bad_workload_options_are_one_line(tmp_path, args, line):
    from click.testing import CliRunner

    from accelbench.cli import main

    res = CliRunner().invoke(main, ["loadtest", "--url", "http://127.0.0.1:9/v1", "--model", "m",
                                    "--out", str(tmp_path), *args])  # fmt: skip
    assert res.exit_code != 0 and line in res.output and "Traceback" not in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1, res.output


def test_a_search_cut_short_goes_on_from_its_steps():
    """search_run.SearchRun over a document: measured steps (here made by a simulated 16-slot server) are
    ordinary steps, their phases kept in the document's search; a run stopped after 4 steps and run again
    on the same document ends where an uninterrupted one does."""
    from accelbench.documents import GenerativeStep, LatencyUs, Step
    from accelbench.loadtests import results, search_run

    profile = LoadProfile(kind="closed", levels=(1,)).searching(
        Search(mode="concurrency", max_concurrency=32, between=3, refinements=6)
    )
    profile = profile.streaming(Workload(api="openai-chat", slo_ttft_p99_ms=TTFT_MS + 20, tokenizer="t"))

    def new_doc():
        return results.new_document(model="m", variant="m", manifest=None, profile=profile, server={},
                                    repository_config="", command="")  # fmt: skip

    def measure_into(doc, budget):
        def measure(kind, plans, more):
            queue = list(plans)
            while queue and budget[0] > 0:
                plan = queue.pop(0)
                p = slots_server(16, {"concurrency": float(plan.concurrency)}, plan.index)
                lat = LatencyUs(p99=p.ttft_p99_ms * 1000)
                doc.steps.append(Step(index=plan.index, offered=plan.offered, verdict="VALID", requests=100,
                                      duration_s=1.0, error_rate=0.0, throughput_rps=p.throughput_rps,
                                      generative=GenerativeStep(requests=100, ttft_us=lat, tpot_us=lat)))  # fmt: skip
                budget[0] -= 1
                if not queue:
                    queue = more()

        return measure

    whole = new_doc()
    search_run.SearchRun(whole, profile, lambda: None).run(measure_into(whole, [99]), lambda: False)
    assert to_offered(whole.search.answer) == {"concurrency": 16} and whole.search.complete
    cut = new_doc()
    budget = [4]
    search_run.SearchRun(cut, profile, lambda: None).run(measure_into(cut, budget), lambda: budget[0] <= 0)
    assert len(cut.steps) == 4 and not cut.search.complete
    budget[0] = 99
    search_run.SearchRun(cut, profile, lambda: None).run(measure_into(cut, budget), lambda: False)
    assert [s.offered for s in cut.steps] == [s.offered for s in whole.steps]
    assert cut.search.answer == whole.search.answer and cut.search.above == whole.search.above
    assert [(s.index, s.phase) for s in cut.search.steps] == [(s.index, s.phase) for s in whole.search.steps]


def to_offered(offered):
    from accelbench.documents import to_dict

    return to_dict(offered)


def test_a_specs_search_is_the_generative_variants_alone(tmp_path):
    from accelbench.experiment import pipeline
    from accelbench.experiment.spec import parse_spec
    from tests.test_manifest import variant_manifest

    spec = parse_spec(EXAMPLE.read_text() + '\n[search]\nmode = "rate"\nmax_concurrency = 16\n', "llm.toml")
    gen = pipeline._Variant(tmp_path, variant_manifest(name="llama-tiny__cpu-local__fp32",
                                                       card={"task": "text-generation"}))  # fmt: skip
    profile = pipeline._profile(spec, 1, gen)
    assert profile.search.mode == "rate" and profile.kind == "open" and profile.levels == (1.0, 16.0)
    assert profile.label().startswith("search-rate-triton-i64-o32")
    classic = pipeline._profile(
        spec, 1, pipeline._Variant(tmp_path, variant_manifest(name="x", card={"task": "x"}))
    )
    assert classic.search is None and classic.levels == (1, 8)
