"""A real third-party engine in the suite (issue 39 item 5): ``transformers serve``, the OpenAI-compatible server
that ships with transformers, on CPU with builtin:llama-tiny's checkpoint (fixed-seed weights, built here), driven
by the same generative sweep as every engine.

With random weights the model would emit any token, and a WordPiece sub-word or a special token re-tokenizes
to a different count; its ``generation_config.json`` therefore suppresses every token that is not a whole word
(tokens.word_ids), so each streamed chunk is one token. That also suppresses EOS: each answer runs to
``max_tokens``. The engine streams without ``[DONE]`` and without ``usage``, and answers 422 to ``ignore_eos``:
the three things accelbench must handle for engines that are not vLLM. The token counts are checked against a
stream read here with the standard library alone."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from llm_helpers import measured

from accelbench.serving.server import free_port

pytestmark = pytest.mark.slow
ACCELBENCH = [sys.executable, "-m", "accelbench.cli"]
SHORT = ("--warmup", "0.2", "--duration", "1", "--max-duration", "1.5")
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


@dataclass(frozen=True)
class Engine:
    url: str  # the OpenAI base, http://127.0.0.1:PORT/v1
    folder: Path  # the model folder (checkpoint + tokenizer), also the tokenizer accelbench counts in
    log: Path


def whole_word_model(out: Path) -> Path:
    """builtin:llama-tiny's checkpoint + the MiniLM tokenizer with a chat template, every token that is not a
    whole word suppressed in generation."""
    from accelbench.loadtests import tokens
    from accelbench.models.builtin.llama import build_llama_checkpoint, copy_tokenizer
    from accelbench.models.cards import load_card

    spec = load_card("builtin:llama-tiny").generative
    assert spec is not None
    build_llama_checkpoint(spec, out, seed=0)
    copy_tokenizer(out)
    words = set(tokens.word_ids(str(out), limit=spec.vocab_size))
    generation = json.loads((out / "generation_config.json").read_text())
    generation["suppress_tokens"] = [i for i in range(spec.vocab_size) if i not in words]
    (out / "generation_config.json").write_text(json.dumps(generation))
    config = json.loads((out / "tokenizer_config.json").read_text())
    # BERT's tokenizer also returns token_type_ids, which LlamaForCausalLM.generate refuses
    config.update(model_input_names=["input_ids", "attention_mask"], model_max_length=spec.context_length,
                  chat_template=CHAT_TEMPLATE)  # fmt: skip
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return out


@pytest.fixture(scope="session")
def transformers_serve(tmp_path_factory):
    """``transformers serve`` on a free loopback port, ready (``/health``); fails (never skips) with the
    reason when it cannot start: the hf extra installs it, so CI must run it."""
    exe = Path(sys.executable).parent / "transformers"
    if not exe.is_file():
        pytest.fail(f"no `transformers` command beside {sys.executable}: pip install -e '.[hf]'")
    root = tmp_path_factory.mktemp("transformers-serve")
    folder = whole_word_model(root / "llama-tiny-words")
    port, log = free_port(), root / "serve.log"
    # one thread: torch's default (every core) makes each token ~1 s on a shared 2-core host instead of ~40 ms
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [str(exe), "serve", "--host", "127.0.0.1", "--port", str(port), "--force-model", str(folder),
           "--dtype", "float32"]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        _wait_ready(proc, f"http://127.0.0.1:{port}/health", log, timeout_s=240)
        yield Engine(f"http://127.0.0.1:{port}/v1", folder, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(proc: subprocess.Popen, health: str, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            pytest.fail(f"transformers serve exited with {proc.returncode} before it answered: "
                        f"{log.read_text()[-1500:]}")  # fmt: skip
        try:
            with urllib.request.urlopen(health, timeout=2):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"transformers serve did not answer {health} in {timeout_s:.0f} s: "
                        f"{log.read_text()[-1500:]}")  # fmt: skip
        time.sleep(0.5)


def direct_stream(url: str, body: dict) -> tuple[int, list[str], list[str], bool]:
    """One request read with http.client alone: (status, the content chunks' texts, the finish reasons,
    whether ``[DONE]`` came)."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    answer = conn.getresponse()
    texts, finishes, done = [], [], False
    for raw in answer.read().decode().splitlines():
        if not raw.startswith("data: "):
            continue
        if raw == "data: [DONE]":
            done = True
            continue
        for choice in json.loads(raw[6:]).get("choices", []):
            if choice.get("delta", {}).get("content"):
                texts.append(choice["delta"]["content"])
            if choice.get("finish_reason"):
                finishes.append(choice["finish_reason"])
    conn.close()
    return answer.status, texts, finishes, done


def loadtest(engine: Engine, out: Path, *args: str) -> dict:
    cmd = [*ACCELBENCH, "loadtest", "--url", engine.url, "--model", "llama-tiny", "--api", "openai-chat",
           "--tokenizer", str(engine.folder), "--out", str(out), "--json", *args]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    measured(done)
    return json.loads(done.stdout)


def test_the_sweep_counts_what_transformers_serve_streamed(transformers_serve, tmp_path):
    from accelbench.loadtests import tokens

    engine = transformers_serve
    ask = {"model": "llama-tiny", "messages": [{"role": "user", "content": "the house was quiet"}],
           "max_tokens": 4, "stream": True}  # fmt: skip
    status, texts, finishes, done = direct_stream(engine.url, ask)
    assert status == 200 and finishes == ["stop"] and not done, (status, finishes, done)
    # one chunk, one whole-word token: what the engine streamed is 4 tokens, EOS suppressed
    assert [tokens.count(str(engine.folder), t) for t in texts] == [1, 1, 1, 1], texts
    refused, _, _, _ = direct_stream(engine.url, {**ask, "ignore_eos": True})
    assert refused == 422

    doc = loadtest(engine, tmp_path, "--isl", "8", "--osl", str(len(texts)), "--concurrency", "1,2", *SHORT)
    w = doc["load_profile"]["workload"]
    assert w["ignore_eos"] is False and w["ignore_eos_refused"] is True  # detected once, recorded
    assert [s["offered"] for s in doc["steps"]] == [{"concurrency": 1}, {"concurrency": 2}]
    for step in doc["steps"]:
        g = step["generative"]
        n = g["requests"]
        assert n and step["errors"]["connection"] == 0, step["last_error"]
        out = g["output_tokens"]
        assert (out["min"], out["max"], out["total"]) == (len(texts), len(texts), n * len(texts)), out
        # no usage, no token ids: the chunks were re-tokenized
        assert g["output_token_sources"] == {"tokenizer": n}
        assert g["output_length_forced"] is False and g["output_length_honoured"] is True
        assert g["ttft_us"]["p50"] > 0 and g["tpot_us"]["p50"] > 0


def test_a_shared_prefix_run_records_what_the_engine_reports(transformers_serve, tmp_path):
    """transformers serve has no prefix cache to report (no usage at all): the document records the prefix
    asked and leaves the cached tokens unknown, not zero."""
    doc = loadtest(transformers_serve, tmp_path, "--isl", "16", "--osl", "2", "--prefix-tokens", "12",
                   "--prefix-groups", "1", "--concurrency", "2", *SHORT)  # fmt: skip
    w = doc["load_profile"]["workload"]
    assert (w["prefix_tokens"], w.get("prefix_groups", 1)) == (12, 1)  # a default is left out of the profile
    g = doc["steps"][0]["generative"]
    assert g["requests"] and g["input_tokens"]["min"] >= 16, g["input_tokens"]
    assert g.get("cached_tokens") is None, g["cached_tokens"]
