"""A reference streaming LLM server with known timing: the OpenAI API (``/v1/completions``,
``/v1/chat/completions`` with ``stream: true``, ``/v1/models``) on asyncio, loopback only.

Each request's first token is sent ``--ttft-ms`` after its request arrived and each next one ``--itl-ms``
after the one before (on an absolute schedule, so no error accumulates); output tokens are plain-word tokens
of the same tokenizer the load generator counts with (tokens.word_ids), so every chunk is exactly one
token (``--tokens-per-event`` k: k tokens per chunk). It is the truth accelbench's streaming measurements
are tested against (tests/test_llm_reference.py) and the engine of bench/llm_client_fidelity.py.

    python -m accelbench.loadtests.reference_server --port 8100 --ttft-ms 200 --itl-ms 20

Fault modes for tests: ``--no-stream`` (plain JSON answers), ``--cut-every N`` (every Nth stream is cut
mid-answer), ``--max-output N`` (answers end early), ``--context N`` (a longer prompt + max_tokens is refused
with both numbers, as vLLM does), ``--burst`` (each answer's chunks are all sent, one write each, when its
last token is due: a stream that is not streamed, as a busy engine sends it).

Capacity and workload modes: ``--slots N`` (at most N answers generate at once, the others wait in arrival
order; a request's TTFT timer starts when it gets its slot, so the server's capacity is known: N streams,
each ttft + (OSL - 1) · itl long). ``/v1/embeddings`` answers after ``--ttft-ms``. Every request is logged
(``GET /v1/requests``): its arrival time on the server's monotonic clock, prompt tokens, messages and their
token counts, the longest prefix it shares with any earlier prompt (what a prefix cache could reuse; with
``--prefix-cache`` also sent as ``usage.prompt_tokens_details.cached_tokens``), and whether the client went
away before the end.

Engine behaviours: ``--reasoning N`` (the first N tokens of each answer stream as ``delta.reasoning_content``,
as vLLM's reasoning parsers send them), ``--no-done`` (the stream ends after its ``finish_reason`` chunk,
without ``[DONE]``, as ``transformers serve`` does), ``--refuse-ignore-eos`` (422 for a request carrying
``ignore_eos``, as ``transformers serve`` answers), ``--cached-tokens N`` (usage says N prompt tokens came
from the prefix cache). ``GET /metrics`` answers vLLM-named Prometheus gauges and counters (requests running
and waiting, KV-cache use, prefix-cache queries and hits) from the server's own state (``--metrics-kb N``:
padded with histogram series to about N KB, as large as vLLM's page). ``--slots N``: at most
N answers stream at once, the others wait in arrival order (counted as waiting; a TTFT starts at the slot).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import TypedDict

from accelbench.loadtests import tokens
from accelbench.loadtests.jsonwire import OpenAIJson

Request = OpenAIJson  # a request body as the client sent it (completions, chat completions, embeddings)


async def read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes, float]:
    """One HTTP/1.1 request off a keep-alive connection: method, path, lower-cased headers, body, and the
    monotonic time its head arrived (what TTFT is timed from)."""
    head = await reader.readuntil(b"\r\n\r\n")
    arrived = time.monotonic()
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
    body = await reader.readexactly(int(headers.get("content-length", 0) or 0))
    return method, path, headers, body, arrived


class LogEntry(TypedDict):
    """One request as ``GET /v1/requests`` lists it."""

    arrived_s: float
    path: str
    prompt_tokens: int
    cached_tokens: int
    messages: list[str | None]
    message_tokens: list[int]
    max_tokens: int | None
    cancelled: bool


class Reference:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.words = [
            tokens.load_tokenizer(args.tokenizer).id_to_token(i) for i in tokens.word_ids(args.tokenizer)
        ]
        self.requests = 0
        self.slots = asyncio.Semaphore(args.slots) if args.slots else None
        self.padding = _padding(args.metrics_kb, args.model)
        self.log: list[LogEntry] = []  # one entry per generation request (GET /v1/requests)
        self.prefixes: set[int] = set()  # chained hashes of every prefix of every prompt seen
        self.running = 0
        self.prompt_tokens = 0
        self.waiting = 0  # requests waiting for a slot (vllm:num_requests_waiting)
        self.cache_hits = 0  # prompt tokens said to come from the prefix cache (usage, /metrics)

    def cached(self, ids: list[int]) -> int:
        """The longest prefix of ``ids`` some earlier prompt began with (in tokens); ``ids`` then joins them."""
        h, longest, fresh = 0, 0, []
        for k, token in enumerate(ids, start=1):
            h = hash((h, token))
            if h in self.prefixes:
                longest = k
            fresh.append(h)
        self.prefixes.update(fresh)
        return longest

    def entry(self, path: str, req: Request, prompt: str, arrived: float) -> LogEntry:
        """The request's log entry (kept at most 100,000)."""
        ids = tokens.load_tokenizer(self.args.tokenizer).encode(prompt, add_special_tokens=False).ids
        messages = req.get("messages") or []
        entry: LogEntry = {
            "arrived_s": arrived,
            "path": path,
            "prompt_tokens": len(ids),
            "cached_tokens": self.cached(ids),
            "messages": [m.get("role") for m in messages if isinstance(m, dict)],
            "message_tokens": [
                tokens.count(self.args.tokenizer, _text(m.get("content")))
                for m in messages
                if isinstance(m, dict)
            ],
            "max_tokens": req.get("max_tokens"),
            "cancelled": False,
        }
        if len(self.log) < 100_000:
            self.log.append(entry)
        return entry

    def cached_of(self, entry: LogEntry, n_in: int) -> int:
        """The cached prompt tokens a request's usage reports: ``--cached-tokens`` where given, else with
        ``--prefix-cache`` the longest prefix it shares with an earlier prompt, else none."""
        if self.args.cached_tokens:
            return min(int(self.args.cached_tokens), n_in)
        return int(entry["cached_tokens"]) if self.args.prefix_cache else 0

    def metrics(self) -> str:
        """vLLM's metric names (its docs/design/metrics.md) over this server's state: one running request
        holds 1 % of the KV cache; the prefix cache hits what each request's usage says was cached."""
        hits = self.cache_hits
        lines = [
            f'vllm:num_requests_running{{model_name="{self.args.model}"}} {self.running}',
            f'vllm:num_requests_waiting{{model_name="{self.args.model}"}} {self.waiting}',
            f'vllm:kv_cache_usage_perc{{model_name="{self.args.model}"}} {min(1.0, self.running / 100)}',
            f'vllm:prefix_cache_queries_total{{model_name="{self.args.model}"}} {self.prompt_tokens}',
            f'vllm:prefix_cache_hits_total{{model_name="{self.args.model}"}} {hits}',
        ]
        return "\n".join(lines) + "\n" + self.padding

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                method, path, _headers, body, arrived = await read_request(reader)
                if not await self.route(method, path, body, arrived, writer):
                    break
        writer.close()

    async def route(
        self, method: str, path: str, body: bytes, arrived: float, writer: asyncio.StreamWriter
    ) -> bool:
        if method == "GET" and path.rstrip("/") == "/v1/models":
            return await _json(
                writer,
                200,
                {
                    "object": "list",
                    "data": [{"id": self.args.model, "object": "model", "max_model_len": self.args.context}],
                },
            )
        if method == "GET" and path.rstrip("/") in ("/health", "/v1/health"):  # vLLM's, asked by GuideLLM
            return await _json(writer, 200, {})
        if method == "GET" and path.rstrip("/") == "/v1/requests":
            return await _json(writer, 200, {"requests": self.log})
        if method == "POST" and path == "/v1/embeddings":
            return await self.embeddings(body, arrived, writer)
        if method == "GET" and path.rstrip("/") == "/metrics":
            return await _plain(writer, self.metrics())
        if method != "POST" or path not in ("/v1/completions", "/v1/chat/completions"):
            return await _json(writer, 404, {"error": {"message": f"no route {method} {path}"}})
        try:
            req = json.loads(body)
        except ValueError:
            return await _json(writer, 400, {"error": {"message": "body is not JSON"}})
        if req.get("model") != self.args.model:
            return await _json(
                writer, 404, {"error": {"message": f"The model `{req.get('model')}` does not exist."}}
            )
        if self.args.refuse_ignore_eos and "ignore_eos" in req:
            return await _json(writer, 422, {"detail": "Unexpected keys in the request: {'ignore_eos'}"})
        chat = path.endswith("chat/completions")
        prompt = (
            " ".join(_text(m.get("content")) for m in req.get("messages", []))
            if chat
            else req.get("prompt", "")
        )
        n_in = tokens.count(self.args.tokenizer, prompt)
        entry = self.entry(path, req, prompt, arrived)
        n_out = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        if n_in + n_out > self.args.context:
            return await _json(
                writer,
                400,
                {
                    "error": {
                        "message": (
                            f"This model's maximum context length is {self.args.context} tokens. However, you requested "
                            f"{n_in + n_out} tokens ({n_in} in the messages, {n_out} in the completion)."
                        )
                    }
                },
            )
        if self.args.max_output:
            n_out = min(n_out, self.args.max_output)
        self.requests += 1
        self.prompt_tokens += n_in
        self.cache_hits += self.cached_of(entry, n_in)
        if self.args.no_stream or not req.get("stream"):
            text = " ".join(self._words(n_out))
            await asyncio.sleep(self.args.ttft_ms / 1000 + (n_out - 1) * self.args.itl_ms / 1000)
            choice = {
                "index": 0,
                "finish_reason": "length",
                **({"message": {"role": "assistant", "content": text}} if chat else {"text": text}),
            }
            return await _json(
                writer,
                200,
                {"id": "x", "object": "completion", "choices": [choice], "usage": _usage(n_in, n_out)},
            )
        if self.slots is None:
            return await self.stream(writer, chat, n_in, n_out, arrived, req, entry)
        self.waiting += 1
        try:
            await self.slots.acquire()  # in arrival order (asyncio's semaphore is fair)
        finally:
            self.waiting -= 1
        try:  # the TTFT timer starts when the request gets its slot
            return await self.stream(writer, chat, n_in, n_out, time.monotonic(), req, entry)
        finally:
            self.slots.release()

    async def embeddings(self, body: bytes, arrived: float, writer: asyncio.StreamWriter) -> bool:
        try:
            req = json.loads(body)
        except ValueError:
            return await _json(writer, 400, {"error": {"message": "body is not JSON"}})
        texts = req.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return await _json(writer, 400, {"error": {"message": "input must be a text or a list of texts"}})
        self.entry("/v1/embeddings", req, " ".join(texts), arrived)
        await asyncio.sleep(max(0.0, arrived + self.args.ttft_ms / 1000 - time.monotonic()))
        n_in = sum(tokens.count(self.args.tokenizer, t) for t in texts)
        data = [{"object": "embedding", "index": i, "embedding": [0.125] * 8} for i in range(len(texts))]
        return await _json(
            writer,
            200,
            {
                "object": "list",
                "model": self.args.model,
                "data": data,
                "usage": {"prompt_tokens": n_in, "total_tokens": n_in},
            },
        )

    def _words(self, n: int) -> Iterator[str]:
        rng = random.Random(self.requests)
        return (rng.choice(self.words) for _ in range(n))

    async def stream(
        self,
        writer: asyncio.StreamWriter,
        chat: bool,
        n_in: int,
        n_out: int,
        arrived: float,
        req: Request,
        entry: LogEntry,
    ) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        if chat:
            _chunk(writer, {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        cut = bool(self.args.cut_every and self.requests % self.args.cut_every == 0)
        per_event = max(1, self.args.tokens_per_event)
        words = list(self._words(n_out))
        self.running += 1
        try:
            return await self._tokens(writer, chat, n_in, n_out, arrived, req, cut, per_event, words, entry)
        finally:
            self.running -= 1

    async def _tokens(
        self,
        writer: asyncio.StreamWriter,
        chat: bool,
        n_in: int,
        n_out: int,
        arrived: float,
        req: Request,
        cut: bool,
        per_event: int,
        words: list[str],
        entry: LogEntry,
    ) -> bool:
        sent = 0
        while sent < n_out:
            k = min(per_event, n_out - sent)
            last = n_out if self.args.burst else sent + k  # --burst: every chunk when the last one is due
            due = arrived + self.args.ttft_ms / 1000 + (last - 1) * self.args.itl_ms / 1000
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            if cut and sent >= n_out // 2:
                writer.transport.abort()  # the server goes away mid-answer
                return False
            text = "".join(" " + w for w in words[sent : sent + k])
            sent += k
            finish = "length" if sent >= n_out else None
            field = "reasoning_content" if sent <= self.args.reasoning else "content"
            delta = {"delta": {field: text}} if chat else {"text": text}
            _chunk(writer, {"choices": [{"index": 0, **delta, "finish_reason": finish}]})
            if writer.is_closing() or writer.transport.get_extra_info("socket") is None:
                entry["cancelled"] = True
                return False
            try:
                await writer.drain()
            except ConnectionError:
                entry["cancelled"] = True  # the client went away (a cancelled request)
                return False
        if (req.get("stream_options") or {}).get("include_usage") and not self.args.no_usage:
            usage: dict[str, object] = dict(_usage(n_in, n_out))
            if self.args.cached_tokens or self.args.prefix_cache:
                usage["prompt_tokens_details"] = {"cached_tokens": self.cached_of(entry, n_in)}
            _chunk(writer, {"choices": [], "usage": usage})
        writer.write((b"" if self.args.no_done else _frame(b"data: [DONE]\n\n")) + b"0\r\n\r\n")
        await writer.drain()
        return True


def _padding(kb: int, model: str) -> str:
    """About ``kb`` KB of histogram series in vLLM's names, so ``/metrics`` is as large as vLLM's (55 KB)."""
    lines: list[str] = []
    size, i = 0, 0
    while size < kb * 1024:
        name = f"vllm:request_phase_{i}_seconds"
        lines.append(f"# TYPE {name} histogram")
        for le in ("0.01", "0.05", "0.1", "0.5", "1.0", "5.0", "+Inf"):
            lines.append(f'{name}_bucket{{model_name="{model}",le="{le}"}} {i}.0')
        lines += [f'{name}_count{{model_name="{model}"}} {i}.0', f'{name}_sum{{model_name="{model}"}} {i}.5']
        size = sum(len(ln) + 1 for ln in lines)
        i += 1
    return "".join(ln + "\n" for ln in lines)


def _text(content: object) -> str:
    """A message's text: a string, or a list of content parts (``{"type": "text", "text": ...}``)."""
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _usage(n_in: int, n_out: int) -> dict[str, int]:
    return {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _chunk(writer: asyncio.StreamWriter, event: dict[str, object]) -> None:
    writer.write(_frame(b"data: " + json.dumps({"object": "chunk", **event}).encode() + b"\n\n"))


async def _json(writer: asyncio.StreamWriter, status: int, obj: dict[str, object]) -> bool:
    data = json.dumps(obj).encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 422: "Unprocessable Entity"}[status]
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: "
        f"{len(data)}\r\n\r\n".encode()
        + data
    )
    await writer.drain()
    return True


async def _plain(writer: asyncio.StreamWriter, text: str) -> bool:
    data = text.encode()
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %d\r\n\r\n%s"
        % (len(data), data)
    )
    await writer.drain()
    return True


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--model", default="reference")
    p.add_argument("--ttft-ms", type=float, default=200.0)
    p.add_argument("--itl-ms", type=float, default=20.0)
    p.add_argument("--tokenizer", default=tokens.DEFAULT_TOKENIZER)
    p.add_argument("--context", type=int, default=2048)
    p.add_argument("--tokens-per-event", type=int, default=1)
    p.add_argument("--max-output", type=int, default=0)
    p.add_argument("--cut-every", type=int, default=0)
    p.add_argument("--no-stream", action="store_true")
    p.add_argument(
        "--burst", action="store_true", help="send each answer's chunks at once, when the last is due"
    )
    p.add_argument("--no-usage", action="store_true")
    p.add_argument("--slots", type=int, default=0, help="answers generated at once (0: no limit)")
    p.add_argument("--metrics-kb", type=int, default=0, help="pad /metrics to about this many KB (vLLM: 55)")
    p.add_argument("--reasoning", type=int, default=0)
    p.add_argument("--no-done", action="store_true")
    p.add_argument("--refuse-ignore-eos", action="store_true")
    p.add_argument("--cached-tokens", type=int, default=0)
    p.add_argument(
        "--prefix-cache",
        action="store_true",
        help="usage reports each prompt's longest prefix shared with an earlier one as cached tokens",
    )
    return p


async def serve(args: argparse.Namespace) -> None:
    ref = Reference(args)
    server = await asyncio.start_server(ref.handle, "127.0.0.1", args.port)
    print(f"reference server on http://127.0.0.1:{args.port}/v1", flush=True)
    async with server:
        await server.serve_forever()


def _answers(url: str) -> bool:
    from accelbench.serving.http_client import Unreachable, request

    try:
        return request(url, timeout_s=2).ok
    except Unreachable:
        return False


@contextlib.contextmanager
def running(port: int, *options: str, ready_s: float = 60.0) -> Iterator[str]:
    """Run the reference server in its own process group; yields its ``http://127.0.0.1:PORT/v1``."""
    from accelbench.processes import end_group, start_group

    cmd = [sys.executable, "-m", "accelbench.loadtests.reference_server", "--port", str(port), *options]
    proc = start_group(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + ready_s
        while not _answers(f"{url}/models"):
            if proc.poll() is not None or time.monotonic() > deadline:
                ended = proc.poll() is not None
                why = proc.stderr.read().decode()[-300:] if ended and proc.stderr else "no answer"
                raise RuntimeError(f"reference server did not start: {why}")
            time.sleep(0.1)
        yield url
    finally:
        end_group(proc)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(parser().parse_args()))
