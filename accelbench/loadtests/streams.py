"""Streaming clients for generative load: server-sent events over keep-alive HTTP/1.1 sockets (Triton
``generate_stream``, OpenAI ``/v1/completions`` and ``/v1/chat/completions`` with ``stream: true``) and
Triton's gRPC ``ModelStreamInfer``.

Like clients.py, a request is built once per prompt (whole HTTP request bytes) and sent with one
``sendall``; the answer is read into one reused buffer per connection. Per event the client keeps only the
arrival time and the event's tokens (Triton: the
count of ``output_ids``; OpenAI: the chunk's token ids or logprobs where the engine sends them, else its
text, counted afterwards and only when ``usage`` does not settle it). A chunk of ``delta.reasoning_content``
/ ``delta.reasoning`` is a token event too, marked as reasoning. An OpenAI stream is complete at ``[DONE]``,
or when the body ends after a chunk with a ``finish_reason`` (``transformers serve`` and others omit
``[DONE]``). Plain sockets: gevent-patched in Locust processes, blocking in the caller's preflight.

Arrival times (docs/llm.md, "When a chunk arrived"): on Linux each read asks the kernel when the data it
returns reached the socket (``SO_TIMESTAMPNS``: the receive timestamp of the last segment read, in
``recvmsg``'s ancillary data), so a load process that gets to the socket late still times the chunk when it
reached the host. The timestamp is on CLOCK_REALTIME; it is moved onto ``perf_counter_ns`` by subtracting
the read's own wait (realtime now − the stamp) from the monotonic now. Segments that queued while the loop
was away are merged by the kernel (TCP coalescing keeps the last segment's stamp), so a read that carried
several events gives them one time: each answer keeps the longest such wait (``late_us``) so that a merge
of the client's own can be told from a burst sent by the server (genstats.py). Elsewhere (no timestamp in
the ancillary data, gRPC), the time is ``perf_counter_ns`` when the read returned.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from accelbench.loadtests.connections import Pool, Stale, open_socket, parse_head
from accelbench.loadtests.jsonwire import OpenAIJson
from accelbench.loadtests.wire import ServerAnswer
from accelbench.loadtests.workloads import Prompt

_RECV = 65536
Event = OpenAIJson  # an SSE event as received (an OpenAI chunk; Triton's generate_stream events alike)
Body = OpenAIJson  # a request's JSON body as sent
# Linux asm-generic/socket.h: SO_TIMESTAMPNS (== SCM_TIMESTAMPNS), a struct timespec of two longs; Python's
# socket module does not name it
SO_TIMESTAMPNS = 35
_STAMP = struct.Struct("@ll")
_ANCILLARY = socket.CMSG_SPACE(_STAMP.size) if hasattr(socket, "CMSG_SPACE") else 0
GRPC_STREAM_METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"


class StreamBroken(ConnectionError):
    """The server closed the connection (or the stream) before the answer ended."""


class NotStreaming(Exception):
    """The endpoint answered without server-sent events."""


# where a request's output token count came from (documents.GenerativeStep.output_token_sources)
TOKEN_SOURCES = ("output_ids", "token_ids", "logprobs", "usage", "tokenizer")


@dataclass
class StreamAnswer:
    """One streamed answer: per event with tokens, its arrival time (ns) and its token count (Triton, or an
    OpenAI chunk's ``token_ids`` / logprobs entries) or text (OpenAI; ``ids`` holds -1 where a chunk gave
    no count), and whether it was reasoning; the server's ``usage`` and prompt length when it sent them."""

    times_ns: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)  # OpenAI: tokens the chunk's ids / logprobs say, else -1
    ids_source: str = "token_ids"  # what ``ids`` were read from: token_ids or logprobs
    reasoning: list[bool] = field(default_factory=list)  # OpenAI: per event, a reasoning chunk
    usage: Event | None = None  # the OpenAI ``usage`` object as sent
    input_tokens: int | None = None
    finish_reason: str | None = None
    kernel_times: bool = False  # times_ns are the kernel's receive timestamps (else: when the read returned)
    late_us: int = 0  # the longest any read of it waited in the socket before the loop got to it (kernel)

    @property
    def cached_tokens(self) -> int | None:
        """``usage.prompt_tokens_details.cached_tokens`` (the engine's prefix-cache hit), when sent."""
        details = (self.usage or {}).get("prompt_tokens_details") or {}
        value = details.get("cached_tokens") if isinstance(details, dict) else None
        return int(value) if isinstance(value, int | float) else None


def split_url(url: str) -> tuple[str, int, str]:
    """``http://h:p/v1`` -> (h, p, "/v1")."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    return parts.hostname or "127.0.0.1", parts.port or 80, parts.path.rstrip("/")


def _http(host: str, port: int, path: str, body: Body) -> bytes:
    data = json.dumps(body, separators=(",", ":")).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    return head.encode("latin-1") + data


def build_request(
    api: str,
    url: str,
    model: str,
    prompt: Prompt,
    ignore_eos: bool,
    messages: list[dict[str, str]] | None = None,
) -> bytes:
    """The whole HTTP request for one prompt (``input_ids``, ``text``, ``osl``) on ``api``; ``messages``: a
    conversation's history and new question (chat: the messages; completions: their texts, in order)."""
    host, port, base = split_url(url)
    osl = int(prompt["osl"])
    if api == "openai-embeddings":
        return _http(host, port, f"{base}/embeddings", {"model": model, "input": prompt["text"]})
    if api == "triton":
        body: Body = {"input_ids": list(prompt["input_ids"]), "max_tokens": osl}
        if ignore_eos:
            body["ignore_eos"] = True
        return _http(host, port, f"/v2/models/{quote(model, safe='')}/generate_stream", body)
    body = {
        "model": model,
        "max_tokens": osl,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
    }
    if ignore_eos:
        body["ignore_eos"] = True  # vLLM, SGLang, TensorRT-LLM's server, llama.cpp; others ignore it
    if api == "openai-chat":
        body["messages"] = messages or [{"role": "user", "content": prompt["text"]}]
        return _http(host, port, f"{base}/chat/completions", body)
    body["prompt"] = " ".join(m["content"] for m in messages) if messages else prompt["text"]
    return _http(host, port, f"{base}/completions", body)


def _openai_event(event: Event, answer: StreamAnswer, now: int) -> None:
    if event.get("usage"):
        answer.usage = event["usage"]
    if "error" in event:
        raise ServerAnswer("stream", str(event["error"])[:300])
    for choice in event.get("choices") or ():
        delta = choice.get("delta") or {}
        text = choice.get("text")
        if text is None:
            text = delta.get("content")
        thought = delta.get("reasoning_content") or delta.get("reasoning")  # vLLM, SGLang / OpenRouter
        for piece, is_reasoning in ((thought, True), (text, False)):
            if piece and isinstance(piece, str):
                answer.times_ns.append(now)
                answer.texts.append(piece)
                answer.reasoning.append(is_reasoning)
                answer.ids.append(_chunk_tokens(choice, answer) if not (thought and text) else -1)
        if choice.get("finish_reason"):
            answer.finish_reason = choice["finish_reason"]


def _chunk_tokens(choice: Event, answer: StreamAnswer) -> int:
    """Tokens a chunk says it carries: its ``token_ids`` (vLLM ``return_token_ids``), else its logprobs
    entries (chat ``logprobs.content``, completions ``logprobs.tokens``); -1 when it says neither."""
    ids = choice.get("token_ids")
    if isinstance(ids, list) and ids:
        return len(ids)
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict):
        entries = logprobs.get("content") or logprobs.get("tokens")
        if isinstance(entries, list) and entries:
            answer.ids_source = "logprobs"
            return len(entries)
    return -1


def _triton_event(event: Event, answer: StreamAnswer, now: int) -> None:
    if "error" in event:
        raise ServerAnswer("stream", str(event["error"])[:300])
    ids = event.get("output_ids")
    n = len(ids) if isinstance(ids, list) else (0 if ids is None else 1)
    if n:
        answer.times_ns.append(now)
        answer.counts.append(n)
    if answer.input_tokens is None and event.get("input_tokens") is not None:
        tokens = event["input_tokens"]
        answer.input_tokens = int(tokens[0] if isinstance(tokens, list) else tokens)


def output_counts(answer: StreamAnswer, tokenizer: str) -> tuple[list[int], int, bool, str]:
    """Tokens per event, the request's output tokens, whether ``usage`` disagreed with the stream, and
    where the count came from (one of TOKEN_SOURCES).

    Triton events carry their ``output_ids`` (several ids are several tokens). OpenAI chunks that carry
    ``token_ids`` or logprobs are counted by them (the engine's own tokens: no re-tokenizing, which
    miscounts special tokens). Otherwise, when ``usage.completion_tokens`` equals the number of chunks each
    chunk is one token; else the chunks are counted with the tokenizer, and ``usage`` (when sent) is the
    total."""
    if answer.counts or not answer.texts:
        return answer.counts, sum(answer.counts), False, "output_ids"
    n_events = len(answer.texts)
    usage = (answer.usage or {}).get("completion_tokens")
    if answer.ids and min(answer.ids) >= 1:
        total = sum(answer.ids)
        return list(answer.ids), total, usage is not None and int(usage) != total, answer.ids_source
    if usage == n_events:
        return [1] * n_events, n_events, False, "usage"
    from accelbench.loadtests import tokens

    counts = [max(1, c) for c in tokens.count_many(tokenizer, answer.texts)]
    total = sum(counts)
    if usage is None:
        return counts, total, False, "tokenizer"
    return counts, int(usage), int(usage) != total, "usage"


class _Body:
    """The answer's body bytes as they arrive, de-chunked (Transfer-Encoding: chunked) when needed."""

    def __init__(self, chunked: bool, length: int | None) -> None:
        self.chunked, self.left = chunked, length
        self.raw = bytearray()  # chunked framing not yet decoded
        self.done = False

    def feed(self, data: bytes | memoryview, out: bytearray) -> None:
        if not self.chunked:
            if self.left is not None:
                data = data[: self.left]
                self.left -= len(data)
                self.done = self.left <= 0
            out += data
            return
        raw = self.raw
        raw += data
        pos = 0
        while True:
            eol = raw.find(b"\r\n", pos)
            if eol < 0:
                break
            size = int(bytes(raw[pos:eol]).split(b";", 1)[0], 16)
            if size == 0:
                self.done = True
                pos = len(raw)
                break
            if len(raw) < eol + 2 + size + 2:
                break
            out += raw[eol + 2 : eol + 2 + size]
            pos = eol + 2 + size + 2
        del raw[:pos]


def receive_timestamps(sock: socket.socket) -> bool:
    """Ask the kernel to stamp each read with its data's arrival time (Linux); False where it cannot."""
    if not sys.platform.startswith("linux") or not _ANCILLARY:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def kernel_stamp_ns(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The ``SCM_TIMESTAMPNS`` of a ``recvmsg``'s ancillary data (ns, CLOCK_REALTIME), or None."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _STAMP.size:
            sec, nsec = _STAMP.unpack_from(data)
            return int(sec) * 1_000_000_000 + int(nsec)
    return None


class SseConnection:
    """One keep-alive HTTP/1.1 connection carrying one streamed answer at a time; ``arrived_ns``: when the
    data of the last read reached the host (``perf_counter_ns`` scale), ``late_ns`` how long it had waited."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.sock = open_socket(host, port, timeout_s)
        self.buf = bytearray(_RECV)
        self.keep = True
        self.used = False
        self.kernel_times = receive_timestamps(self.sock)
        self.arrived_ns = 0
        self.late_ns = 0

    def _recv(self) -> memoryview:
        if self.kernel_times:
            n, ancillary, _flags, _addr = self.sock.recvmsg_into([self.buf], _ANCILLARY)
            now, wall = time.perf_counter_ns(), time.time_ns()
            stamp = kernel_stamp_ns(ancillary)
            self.late_ns = max(0, wall - stamp) if stamp is not None else 0
            self.arrived_ns = now - self.late_ns
        else:
            n = self.sock.recv_into(self.buf)
            self.arrived_ns, self.late_ns = time.perf_counter_ns(), 0
        if not n:
            raise StreamBroken("the server closed the connection mid-answer")
        return memoryview(self.buf)[:n]

    def _head(self) -> tuple[int, dict[str, str], bytes]:
        got = bytearray()
        while True:
            got += self._recv()
            # the CRLF that ends the previous answer's last chunk may arrive with this answer (keep-alive)
            while got[:2] == b"\r\n":
                del got[:2]
            end = got.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(got) > 65536:
                raise ConnectionError("answer headers too long")
        status, headers = parse_head(got[:end])
        return status, headers, bytes(got[end + 4 :])

    def stream(self, request: bytes, api: str, first_only: int = 0) -> StreamAnswer:
        """Send ``request`` and read its stream to the end (``first_only`` N: stop after N token events,
        closing the connection: the preflight)."""
        self.sock.sendall(request)
        try:
            status, headers, rest = self._head()
        except StreamBroken:
            if not self.used:
                raise
            raise Stale("the server had closed the kept-alive connection") from None
        self.used = True
        length = headers.get("content-length")
        body = _Body(
            "chunked" in headers.get("transfer-encoding", "").lower(),
            int(length) if length is not None else None,
        )
        self.keep = headers.get("connection", "").lower() != "close" and (body.chunked or length is not None)
        if api == "openai-embeddings" and status < 400:  # one JSON answer: its arrival is its only time
            return _embedding(self._whole(body, rest))
        if status >= 400 or "text/event-stream" not in headers.get("content-type", ""):
            text = self._whole(body, rest)
            self.keep = False
            if status >= 400:
                raise ServerAnswer(status, _error_text(text))
            raise NotStreaming(
                f"status {status}, {headers.get('content-type') or 'no content type'}, "
                f"not server-sent events: {text[:120]!r}"
            )
        return self._events(body, rest, api, first_only)

    def _whole(self, body: _Body, rest: bytes) -> str:
        out = bytearray()
        body.feed(rest, out)
        deadline = time.monotonic() + 5
        while not body.done and (body.chunked or body.left is not None) and time.monotonic() < deadline:
            try:
                body.feed(self._recv(), out)
            except (StreamBroken, OSError):
                break
        return out.decode("utf-8", "replace")

    def _events(self, body: _Body, rest: bytes, api: str, first_only: int) -> StreamAnswer:
        openai = api != "triton"
        answer = StreamAnswer(kernel_times=self.kernel_times)
        handle = _openai_event if openai else _triton_event
        data = bytearray()
        chunk: bytes | memoryview = rest
        finished = False
        while True:
            now = self.arrived_ns  # the read that delivered ``chunk`` (rest: the head's last read)
            answer.late_us = max(answer.late_us, self.late_ns // 1000)
            body.feed(chunk, data)
            if b"\r" in data:  # CRLF line ends (allowed by SSE; sse-starlette sends them)
                data[:] = data.replace(b"\r\n", b"\n")
            finished = _parse_events(data, handle, answer, now) or finished
            if finished and (body.done or not body.chunked):
                if not body.done:
                    self.keep = False
                return answer
            if body.done:
                if openai and not finished and answer.finish_reason is None:
                    raise StreamBroken("the stream ended before its finish_reason chunk and without [DONE]")
                return answer
            if first_only and len(answer.times_ns) >= first_only:
                self.keep = False
                return answer
            try:
                chunk = self._recv()
            except StreamBroken:
                complete = finished or not openai or answer.finish_reason is not None
                if body.left is None and not body.chunked and complete:
                    self.keep = False
                    return answer  # close-delimited body
                raise

    def close(self) -> None:
        self.sock.close()


def _embedding(text: str) -> StreamAnswer:
    try:
        obj = json.loads(text)
    except ValueError:
        raise ServerAnswer("embeddings", f"an answer that is not JSON: {text[:80]!r}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), list) or not obj["data"]:
        raise ServerAnswer("embeddings", f"an answer without data: {text[:80]!r}")
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
    return StreamAnswer(
        times_ns=[time.perf_counter_ns()],
        counts=[0],
        usage=usage,
        input_tokens=(usage or {}).get("prompt_tokens"),
    )


EventHandler = Callable[[Event, StreamAnswer, int], None]  # one decoded event into the answer


def _parse_events(data: bytearray, handle: EventHandler, answer: StreamAnswer, now: int) -> bool:
    """Handle every complete event in ``data`` (removing them); True when one was ``[DONE]``."""
    start, finished = 0, False
    while True:
        end = data.find(b"\n\n", start)
        if end < 0:
            break
        for line in bytes(data[start:end]).split(b"\n"):
            if not line.startswith(b"data:"):
                continue  # comments, event names, ids, retry
            payload = line[5:].strip()
            if payload == b"[DONE]":
                finished = True
                continue
            try:
                event = json.loads(payload)
            except ValueError:
                raise ServerAnswer("stream", f"an event that is not JSON: {payload[:80]!r}") from None
            handle(event, answer, now)
        start = end + 2
    del data[:start]
    return finished


def _error_text(text: str) -> str:
    if text.startswith("data:"):  # Triton's generate_stream sends its error as an event
        text = text[5:].strip()
    try:
        obj = json.loads(text)
    except ValueError:
        return text.strip()[:300] or "no message"
    err = obj.get("error", obj) if isinstance(obj, dict) else obj
    if isinstance(err, dict):
        err = err.get("message", err)
    return str(err)[:300]


class SseClient(Pool[SseConnection]):
    """connections.Pool of keep-alive connections to one server; one per request in flight."""

    def __init__(self, url: str, api: str, timeout_s: float) -> None:
        self.host, self.port, _ = split_url(url)
        self.api, self.timeout_s = api, timeout_s
        super().__init__(lambda: SseConnection(self.host, self.port, self.timeout_s))

    def exchange(self, request: bytes, first_only: int = 0) -> StreamAnswer:
        return self.use(lambda conn: conn.stream(request, self.api, first_only))


# ---------------------------------------------------------------- Triton gRPC ModelStreamInfer
def grpc_stream_request(model: str, prompt: Prompt, ignore_eos: bool) -> bytes:
    """A serialized ``ModelInferRequest`` for the decoupled model (contract tensors), asking for an empty
    final response so the end of each stream is seen."""
    import numpy as np
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name=model)
    tensors: list[tuple[str, str, np.ndarray]] = [
        ("input_ids", "INT64", np.asarray(prompt["input_ids"], dtype=np.int64)),
        ("max_tokens", "INT32", np.array([int(prompt["osl"])], dtype=np.int32)),
        ("ignore_eos", "BOOL", np.array([bool(ignore_eos)], dtype=np.bool_)),
    ]
    for name, datatype, arr in tensors:
        request.inputs.add(name=name, datatype=datatype, shape=list(arr.shape))
        request.raw_input_contents.append(arr.tobytes())
    for name in ("output_ids", "input_tokens"):
        request.outputs.add(name=name)
    request.parameters["triton_enable_empty_final_response"].bool_param = True
    serialized: bytes = request.SerializeToString()
    return serialized


class GrpcStreamClient:
    """One channel; each request is its own ModelStreamInfer stream (one request, its responses)."""

    def __init__(self, target: str, timeout_s: float) -> None:
        import grpc
        from tritonclient.grpc import service_pb2

        self.channel = grpc.insecure_channel(target.split("://", 1)[-1].rstrip("/"))
        self.call = self.channel.stream_stream(GRPC_STREAM_METHOD, response_deserializer=None)
        self.parse = service_pb2.ModelStreamInferResponse.FromString
        self.timeout_s = timeout_s

    def exchange(self, request: bytes, first_only: int = 0) -> StreamAnswer:
        answer = StreamAnswer()
        stream = self.call(iter((request,)), timeout=self.timeout_s)
        try:
            for raw in stream:
                now = time.perf_counter_ns()
                msg = self.parse(raw)
                if msg.error_message:
                    raise ServerAnswer("stream", msg.error_message[:300])
                if _grpc_response(msg.infer_response, answer, now):
                    return answer
                if first_only and len(answer.times_ns) >= first_only:
                    return answer
        finally:
            stream.cancel()
        raise StreamBroken("the gRPC stream ended without its final response")

    def close(self) -> None:
        self.channel.close()


def _grpc_response(response: Any, answer: StreamAnswer, now: int) -> bool:
    """Record one response's tokens; True on the final one."""
    for i, out in enumerate(response.outputs):
        if i >= len(response.raw_output_contents):
            break
        raw = response.raw_output_contents[i]
        if out.name == "output_ids" and raw:
            answer.times_ns.append(now)
            answer.counts.append(len(raw) // 8)
        elif out.name == "input_tokens" and raw and answer.input_tokens is None:
            answer.input_tokens = int.from_bytes(raw[:4], "little", signed=True)
    final = response.parameters.get("triton_final_response")
    return bool(final is not None and final.bool_param)


def make_stream_client(api: str, url: str, timeout_s: float) -> GrpcStreamClient | SseClient:
    if api == "triton-grpc":
        return GrpcStreamClient(url, timeout_s)
    return SseClient(url, api, timeout_s)
