"""The streaming load generator's parts without Locust: the SSE client against a real socket that sends
recorded answers in pieces, the token counting, the step statistics on known records, the workloads."""

from __future__ import annotations

import json
import socket
import threading

import numpy as np
import pytest

from accelbench.errors import BadInputError
from accelbench.loadtests import genstats, streams, workloads
from accelbench.loadtests.profiles import LoadProfile, Workload
from accelbench.loadtests.wire import ServerAnswer


def chunked(*events: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
CHAT = SSE_HEAD + chunked(
    b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n',
    b'data: {"choices":[{"delta":{"content":" alpha"}}]}\r\n\r\ndata: {"choices":[{"delta":{"content":" beta"},',
    b'"finish_reason":"length"}]}\r\n\r\n',
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n',
    b"data: [DONE]\n\n",
)
TRITON = SSE_HEAD + chunked(
    b'data: {"model_name":"m","model_version":"1","output_ids":[11],"text_output":"a","input_tokens":5}\n\n',
    b'data: {"model_name":"m","model_version":"1","output_ids":[12,13,14],"text_output":"bcd","input_tokens":5}\n\n',
)


def serve_once(answers: list[bytes], piece: int):
    """A loopback server that answers each request on one connection with the next recorded answer, sent
    ``piece`` bytes at a time, then closes the connection."""
    listener = socket.create_server(("127.0.0.1", 0))

    def run() -> None:
        conn, _ = listener.accept()
        with conn:
            for answer in answers:
                conn.recv(65536)
                for i in range(0, len(answer), piece):
                    conn.sendall(answer[i : i + piece])
        listener.close()

    threading.Thread(target=run, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/v1"


PROMPT = {"input_ids": [5, 6, 7], "text": "a b c", "osl": 4}


@pytest.mark.parametrize("piece", [1, 7, 100000])
def test_chat_stream_in_pieces(piece):
    url = serve_once([CHAT, CHAT], piece)
    client = streams.SseClient(url, "openai-chat", 30)  # one byte per send is slow on a shared machine
    for _ in range(2):  # the same keep-alive connection twice
        answer = client.exchange(streams.build_request("openai-chat", url, "m", PROMPT, True))
        assert answer.texts == [" alpha", " beta"] and len(answer.times_ns) == 2
        assert answer.usage["completion_tokens"] == 2 and answer.finish_reason == "length"
        assert streams.output_counts(answer, "builtin:minilm-wordpiece") == ([1, 1], 2, False, "usage")
    assert len(client.idle) == 1


@pytest.mark.parametrize("piece", [3, 100000])
def test_triton_generate_stream_counts_ids(piece):
    url = serve_once([TRITON], piece)
    answer = streams.SseClient(url, "triton", 5).exchange(
        streams.build_request("triton", url, "m", PROMPT, True)
    )
    assert answer.counts == [1, 3] and answer.input_tokens == 5
    assert streams.output_counts(answer, "builtin:minilm-wordpiece") == ([1, 3], 4, False, "output_ids")


def test_requests_are_what_each_api_expects():
    chat = streams.build_request("openai-chat", "http://h:1/v1", "m", PROMPT, True)
    head, body = chat.split(b"\r\n\r\n", 1)
    assert (
        head.startswith(b"POST /v1/chat/completions HTTP/1.1") and b"Content-Length: %d" % len(body) in head
    )
    sent = json.loads(body)
    assert sent["stream"] and sent["stream_options"] == {"include_usage": True} and sent["max_tokens"] == 4
    assert sent["messages"] == [{"role": "user", "content": "a b c"}] and sent["ignore_eos"]
    triton = json.loads(
        streams.build_request("triton", "http://h:1", "m/x", PROMPT, False).split(b"\r\n\r\n")[1]
    )
    assert triton == {"input_ids": [5, 6, 7], "max_tokens": 4}
    assert b"POST /v2/models/m%2Fx/generate_stream" in streams.build_request(
        "triton", "http://h:1", "m/x", PROMPT, 1
    )


def test_broken_error_and_plain_answers():
    cut = SSE_HEAD + CHAT[len(SSE_HEAD) : len(SSE_HEAD) + 90]
    url = serve_once([cut], 1000)
    with pytest.raises(streams.StreamBroken):
        streams.SseClient(url, "openai-chat", 5).exchange(
            streams.build_request("openai-chat", url, "m", PROMPT, 1)
        )
    body = b'{"error":{"message":"The model `x` does not exist."}}'
    url = serve_once([b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)], 1000)
    with pytest.raises(ServerAnswer, match="does not exist"):
        streams.SseClient(url, "openai-chat", 5).exchange(
            streams.build_request("openai-chat", url, "x", PROMPT, 1)
        )
    body = b'{"choices":[{"text":"whole"}]}'
    url = serve_once([b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(body), body)], 1000)  # fmt: skip
    with pytest.raises(streams.NotStreaming):
        streams.SseClient(url, "openai-chat", 5).exchange(
            streams.build_request("openai-chat", url, "m", PROMPT, 1)
        )
    error = SSE_HEAD + chunked(b'data: {"error": "prompt of 9000 tokens + 64 beyond max_context 2048"}\n\n')
    url = serve_once([error], 1000)
    with pytest.raises(ServerAnswer, match="max_context"):
        streams.SseClient(url, "triton", 5).exchange(streams.build_request("triton", url, "m", PROMPT, 1))


def test_counts_with_the_tokenizer_when_usage_disagrees():
    answer = streams.StreamAnswer(times_ns=[1, 2], texts=[" the cat", " sat"], usage={"completion_tokens": 4})
    assert streams.output_counts(answer, "builtin:minilm-wordpiece") == ([2, 1], 4, True, "usage")
    answer.usage = None
    assert streams.output_counts(answer, "builtin:minilm-wordpiece") == ([2, 1], 3, False, "tokenizer")


def record_of(requests: list[tuple[int, list[int], list[int], int]], osl: int = 4) -> dict:
    """Records from (start µs, event times µs, tokens per event, end µs)."""
    rec = genstats.Record()
    rec.t0_ns = 0
    for start, times, counts, end in requests:
        rec.add(start * 1000, [t * 1000 for t in times], counts, sum(counts), end * 1000, 10, 10, osl, False)
    return rec.encode({"slo_ttft_p99_ms": 15, "slo_tpot_p99_ms": 6})


def test_step_statistics_known_answer():
    # request i: sent at 100 i ms, first token 10 ms later (i odd: 20 ms), then tokens every 5 ms, end at the last
    reqs = []
    for i in range(40):
        s = 100_000 * i
        ttft = 10_000 if i % 2 == 0 else 20_000
        times = [s + ttft + 5_000 * k for k in range(4)]
        reqs.append((s, times, [1, 1, 1, 1], times[-1]))
    gen = genstats.combine([record_of(reqs[::2]), record_of(reqs[1::2])])  # two processes, merged
    out, invalid, low = genstats.step(gen, {"concurrency": 1}, 4.0, cpu_s=0.016, failed=0, sample_floor=662)
    assert out["requests"] + out["truncated_requests"] == 40
    assert out["ttft_us"]["p50"] in (10_000, 15_000, 20_000)
    assert out["itl_us"]["p50"] == 5_000 and out["itl_us"]["max"] == 5_000
    assert out["tpot_us"]["p50"] == 5_000 and out["tokens_per_s_per_user"] == 200.0
    assert out["gaps"] == 3 * out["requests"]
    assert out["output_tokens"] == {
        "total": 4 * out["requests"],
        "mean": 4.0,
        "min": 4,
        "max": 4,
        "asked": 4.0,
    }
    assert out["client_cpu_us_per_token"] == 100.0  # 16 ms over 160 tokens
    # goodput: only the requests with a 10 ms TTFT meet 15 ms (TPOT 5 ms meets 6 ms)
    kept_even = out["goodput"]["requests"]
    assert 0 < kept_even <= out["requests"] and abs(out["goodput"]["fraction"] - 0.5) <= 0.05
    assert out["intervals"]["itl_us"]["p50"].value == 5_000
    assert not invalid and any("ITL sample floor" in r for r in low)


def test_multi_token_events_and_short_outputs():
    gen = genstats.combine([record_of([(0, [10_000, 40_000], [2, 3], 40_000)] * 3, osl=10)])
    out, invalid, _ = genstats.step(gen, {"rate_rps": 1.0}, 1.0, 0.0, 0, 662)
    # first event: one extra token at gap 0; second: 30 ms over 3 tokens -> three gaps of 10 ms
    itl = genstats._unpack(gen["itl"])
    assert list(itl[:4]) == [0, 10_000, 10_000, 10_000]
    assert out["short_outputs"] == out["requests"] and out["output_length_ratio"] == 0.5
    assert invalid and invalid[0].startswith("short outputs")


def test_prompts_files(tmp_path):
    w = Workload(isl=16, osl=8, isl_range=0.5)
    synth = workloads.synthetic_prompts(w, count=50)
    assert (
        all(8 <= len(p["input_ids"]) <= 16 for p in synth) and len({len(p["input_ids"]) for p in synth}) > 3
    )
    assert workloads.file_prompts  # the files:
    good = tmp_path / "p.jsonl"
    good.write_text('{"prompt": "hello world", "output_tokens": 3}\n\n{"text": "again"}\n')
    got = workloads.file_prompts(good, w)
    assert [(p["osl"], len(p["input_ids"])) for p in got] == [(3, 2), (8, 1)]
    for text, message in (('{"prompt": "x"}\nnot json\n', ":2: not a JSON object"),
                          ('{"prompt": "x", "output_tokens": 0}\n', ":1: output_tokens must be"),
                          ('["a"]\n', ":1: expected a JSON object")):  # fmt: skip
        bad = tmp_path / "bad.jsonl"
        bad.write_text(text)
        with pytest.raises(BadInputError, match=message):
            workloads.file_prompts(bad, w)
    share = tmp_path / "sg.json"
    share.write_text(json.dumps([{"conversations": [{"from": "human", "value": "tell me"},
                                                    {"from": "gpt", "value": "a short story"}]},
                                 {"conversations": [{"from": "human", "value": "alone"}]}]))  # fmt: skip
    assert [(p["text"], p["osl"]) for p in workloads.file_prompts(share, w)] == [("tell me", 3)]
    share.write_text(json.dumps([{"conversations": "no"}]))
    with pytest.raises(BadInputError, match="entry 1"):
        workloads.file_prompts(share, w)


def test_payloads_round_trip_and_classic_profiles_unchanged():
    prompts = [{"input_ids": [1, 2], "text": "é x", "osl": 5}]
    assert [workloads.from_payload(p) for p in workloads.as_payloads(prompts)] == prompts
    classic = LoadProfile(kind="closed", protocol="http", levels=(1,))
    assert "workload" not in classic.to_dict() and classic.label() == "closed-http-b1"
    gen = LoadProfile(kind="closed", protocol="http", levels=(1,), workload=Workload(api="openai").to_dict())
    assert gen.to_dict()["workload"]["api"] == "openai-chat" and gen.label() == "closed-openai-chat-i128-o64"
    with pytest.raises(BadInputError, match=r"isl_range: 1.5 must be in \(0, 1\]"):
        Workload(isl_range=1.5)
    assert np.all(workloads.as_payloads(prompts)[0]["osl"] == 5)


def test_a_variants_own_tokenizer_comes_before_its_cards(tmp_path):
    from accelbench.loadtests.generative import variant_tokenizer

    assert variant_tokenizer(None, None) is None  # Workload.recorded then takes the built-in one
    assert variant_tokenizer(tmp_path, "/card/tokenizer") == "/card/tokenizer"  # no copy kept here
    (tmp_path / "1" / "tokenizer").mkdir(parents=True)  # a Triton repository's model folder
    assert (
        variant_tokenizer(tmp_path, "/card/tokenizer") == "/card/tokenizer"
    )  # a folder without tokenizer.json
    (tmp_path / "1" / "tokenizer" / "tokenizer.json").write_text("{}")
    assert variant_tokenizer(tmp_path, "/card/tokenizer") == str(tmp_path / "1" / "tokenizer")
    (tmp_path / "tokenizer").mkdir()  # a variant folder
    (tmp_path / "tokenizer" / "tokenizer.json").write_text("{}")
    assert variant_tokenizer(tmp_path, None) == str(tmp_path / "tokenizer")


def test_the_manifest_folder_is_where_find_manifest_reads(tmp_path):
    from accelbench.loadtests.api import manifest_folder

    variant = tmp_path / "m__cpu-local__fp32"
    (variant / "1").mkdir(parents=True)
    assert manifest_folder("m", None, None) is None
    assert manifest_folder("m", variant / "manifest.json", None) == variant
    assert manifest_folder("m", variant, None) == variant
    assert manifest_folder("m__cpu-local__fp32", None, tmp_path) is None  # no manifest kept beside the model
    (variant / "1" / "manifest.json").write_text("{}")
    assert manifest_folder("m__cpu-local__fp32", None, tmp_path) == variant / "1"


# transformers serve 4.57: a role chunk, content chunks, a finish_reason chunk, then the body ends (no [DONE],
# no usage)
NO_DONE = SSE_HEAD + chunked(
    b'data: {"choices":[{"delta":{"role":"assistant"},"index":0}]}\n\n',
    b'data: {"choices":[{"delta":{"content":"alpha "},"index":0}]}\n\n',
    b'data: {"choices":[{"delta":{"content":"beta"},"index":0}]}\n\n',
    b'data: {"choices":[{"delta":{},"index":0,"finish_reason":"stop"}]}\n\n',
)
REASONING = SSE_HEAD + chunked(
    b'data: {"choices":[{"delta":{"reasoning_content":" hmm"},"logprobs":{"content":[{"token":"hmm"}]}}]}\n\n',
    b'data: {"choices":[{"delta":{"reasoning":" so"},"logprobs":{"content":[{"token":"so"}]}}]}\n\n',
    b'data: {"choices":[{"delta":{"content":" [unused614]"},"logprobs":{"content":[{"token":"x"}]},'
    b'"finish_reason":"length"}]}\n\n',
    b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,'
    b'"prompt_tokens_details":{"cached_tokens":2}}}\n\n',
    b"data: [DONE]\n\n",
)


def test_a_stream_that_ends_after_its_finish_reason_is_complete():
    url = serve_once([NO_DONE, NO_DONE], 5)
    client = streams.SseClient(url, "openai-chat", 10)
    for _ in range(2):  # and the connection stays usable
        answer = client.exchange(streams.build_request("openai-chat", url, "m", PROMPT, False))
        assert answer.texts == ["alpha ", "beta"] and answer.finish_reason == "stop" and answer.usage is None
        assert streams.output_counts(answer, "builtin:minilm-wordpiece") == ([1, 1], 2, False, "tokenizer")
    cut = SSE_HEAD + chunked(b'data: {"choices":[{"delta":{"content":"alpha "},"index":0}]}\n\n')
    url = serve_once([cut], 1000)
    with pytest.raises(streams.StreamBroken, match="finish_reason"):
        streams.SseClient(url, "openai-chat", 5).exchange(
            streams.build_request("openai-chat", url, "m", PROMPT, False)
        )


def test_reasoning_chunks_logprobs_counts_and_cached_tokens():
    url = serve_once([REASONING], 1000)
    answer = streams.SseClient(url, "openai-chat", 5).exchange(
        streams.build_request("openai-chat", url, "m", PROMPT, False)
    )
    assert answer.reasoning == [True, True, False] and answer.cached_tokens == 2
    # the engine's logprobs say one token per chunk: "[unused614]" would re-tokenize to 5
    counts, total, mismatch, source = streams.output_counts(answer, "builtin:minilm-wordpiece")
    assert (counts, total, mismatch, source) == ([1, 1, 1], 3, False, "logprobs")
    x = genstats.extra(answer, counts, source)
    assert x.reasoning == 2 and x.first_output_ns == answer.times_ns[2] and x.cached == 2
    ids = {"choices": [{"delta": {"content": " a b"}, "token_ids": [7, 8]}]}
    one = streams.StreamAnswer()
    streams._openai_event(ids, one, 5)
    assert streams.output_counts(one, "builtin:minilm-wordpiece") == ([2], 2, False, "token_ids")


def test_ttfo_ttst_reasoning_and_cached_in_the_step():
    rec = genstats.Record()
    rec.t0_ns = 0
    for i in range(6):
        s = 100_000_000 * i
        times = [s + 10_000_000, s + 15_000_000, s + 40_000_000, s + 45_000_000]  # 2 reasoning, 2 output
        rec.add(s, times, [1, 1, 1, 1], 4, times[-1], 10, 10, 4, False,
                genstats.Extra(first_output_ns=times[2], reasoning=2, cached=5, source=3))  # fmt: skip
    out, _, _ = genstats.step(genstats.combine([rec.encode({})]), {"concurrency": 1}, 1.0, 0.0, 0, 10)
    assert (
        out["ttft_us"]["max"] == 10_000 and out["ttfo_us"]["max"] == 40_000 and out["ttst_us"]["max"] == 5_000
    )
    assert out["reasoning_tokens"]["mean"] == 2.0 and out["output_tokens"]["mean"] == 4.0
    assert out["cached_tokens"]["fraction"] == 0.5 and out["output_token_sources"] == {
        "usage": out["requests"]
    }
