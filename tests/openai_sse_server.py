"""A tiny OpenAI-compatible streaming server for recording AIPerf / GuideLLM test files (tests/data/llm/imports).

``POST /v1/completions`` and ``/v1/chat/completions`` with ``stream: true`` answer ``max_tokens`` chunks in the
OpenAI format (``object: text_completion`` / ``chat.completion.chunk``, id, created, model), the first after
``--ttft-ms``, the next every ``--itl-ms`` (``--burst``: all of them when the last is due, as a busy engine
sends them), then a usage chunk and ``[DONE]``; ``GET /health`` and ``/v1/models``.
Loopback only. Words come from a fixed list, one word = one token of a WordPiece tokenizer.

    python tests/openai_sse_server.py --port PORT --model NAME [--ttft-ms 50 --itl-ms 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from accelbench.loadtests.reference_server import read_request

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "golf", "hotel", "india", "kilo", "lima")


async def _send(writer, status: int, body: bytes, ctype: str = "application/json") -> None:
    writer.write(f"HTTP/1.1 {status} OK\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n\r\n".encode()
                 + body)  # fmt: skip
    await writer.drain()


async def handle(reader, writer, args) -> None:
    try:
        while True:
            method, path, _headers, body, arrived = await read_request(reader)
            path = path.split("?", 1)[0].rstrip("/")
            if method == "GET" and path in ("/health", "/v1/health"):
                await _send(writer, 200, b"{}")
                continue
            if method == "GET" and path == "/v1/models":
                await _send(
                    writer,
                    200,
                    json.dumps({"object": "list", "data": [{"id": args.model, "object": "model"}]}).encode(),
                )
                continue
            if method != "POST" or path not in ("/v1/completions", "/v1/chat/completions"):
                await _send(writer, 404, b'{"error": {"message": "no route"}}')
                continue
            req = json.loads(body or b"{}")
            chat = path.endswith("chat/completions")
            n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            )
            created = int(time.time())
            for i in range(n):
                due = arrived + (args.ttft_ms + (n - 1 if args.burst else i) * args.itl_ms) / 1000.0
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                word = " " + WORDS[i % len(WORDS)]
                last = "length" if i == n - 1 else None
                choice = ({"index": 0, "delta": {"content": word}, "finish_reason": last} if chat
                          else {"index": 0, "text": word, "finish_reason": last})  # fmt: skip
                chunk = {"id": "cmpl-test", "object": "chat.completion.chunk" if chat else "text_completion",
                         "created": created, "model": args.model, "choices": [choice]}  # fmt: skip
                data = f"data: {json.dumps(chunk)}\n\n".encode()
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await writer.drain()
            usage = {"id": "cmpl-test", "object": "text_completion", "created": created, "model": args.model,
                     "choices": [], "usage": {"prompt_tokens": 0, "completion_tokens": n, "total_tokens": n}}  # fmt: skip
            for data in (f"data: {json.dumps(usage)}\n\n".encode(), b"data: [DONE]\n\n"):
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            writer.write(b"0\r\n\r\n")
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    writer.close()


async def main(args) -> None:
    server = await asyncio.start_server(lambda r, w: handle(r, w, args), "127.0.0.1", args.port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="tiny OpenAI-compatible streaming server (tests)")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--ttft-ms", type=float, default=50.0)
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--burst", action="store_true")
    asyncio.run(main(p.parse_args()))
