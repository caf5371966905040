"""``accelbench loadtest --api ...`` as a library call: a streaming sweep of a generative model on Triton
(``generate_stream``, ``ModelStreamInfer``) or on any OpenAI-compatible engine (vLLM, SGLang, TGI,
TensorRT-LLM's server, llama.cpp's server, Triton's OpenAI frontend).

Before any load: the prompts are built (bad prompt-file lines stop here), the longest prompt plus its
output length is checked against the model's context when the server or card says it, and one streamed
preflight request shows that the endpoint streams and knows the model. Each problem is one line.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from pathlib import Path

from accelbench.documents import ResultDocument
from accelbench.errors import BadInputError, ServerError
from accelbench.loadtests import streams, sweep, workloads
from accelbench.loadtests.api import find_manifest, manifest_folder, model_card, triton_server
from accelbench.loadtests.distributed import MasterBind
from accelbench.loadtests.events import Cancel, Event
from accelbench.loadtests.jsonwire import OpenAIJson, TritonJson
from accelbench.loadtests.profiles import LoadProfile, Workload
from accelbench.loadtests.verdict import DEFAULT_LIMITS, Limits
from accelbench.loadtests.wire import ServerAnswer
from accelbench.loadtests.workloads import Prompt
from accelbench.serving.http_client import HttpError, HttpStatus, NotJson, TritonHttp, Unreachable, get_json


def openai_models(base_url: str) -> list[OpenAIJson]:
    """The engine's ``/v1/models`` entries (empty when it has no such route)."""
    try:
        data = get_json(f"{base_url.rstrip('/')}/models")
    except (HttpStatus, NotJson):
        return []
    except Unreachable as err:
        raise Unreachable(base_url, err.reason) from None
    return [m for m in (data.get("data") or []) if isinstance(m, dict)] if isinstance(data, dict) else []


def triton_generative(http_url: str, model: str) -> TritonJson | None:
    """The served model's config when it is decoupled (streams its answers), else None."""
    try:
        config = TritonHttp(http_url).model_config(model)
    except HttpError:
        return None
    decoupled = (config.get("model_transaction_policy") or {}).get("decoupled")
    return config if decoupled else None


def repository_generative(repo: str | os.PathLike[str], model: str) -> bool:
    """Whether the repository's config.pbtxt of ``model`` is decoupled (a streaming, generative model)."""
    path = Path(repo) / model / "config.pbtxt"
    if not path.is_file():
        return False
    text = path.read_text().replace(" ", "")
    return "decoupled:true" in text


def context_of(api: str, url: str, model: str, card_context: int | None) -> int | None:
    """The model's context length: the card's, else what the server says (vLLM's ``max_model_len``,
    the Triton model's ``max_context`` parameter)."""
    if card_context:
        return int(card_context)
    if api.startswith("openai"):
        for entry in openai_models(url):
            if entry.get("id") == model and entry.get("max_model_len"):
                return int(entry["max_model_len"])
        return None
    config = triton_generative(url, model) or {}
    value = ((config.get("parameters") or {}).get("max_context") or {}).get("string_value")
    return int(value) if value and str(value).isdigit() else None


def check_context(prompts: list[Prompt], context: int | None) -> None:
    """The longest prompt plus its output must fit; a conversation's last turn carries every turn before."""
    if context is None:
        return
    turns = max(len(p.get("turns") or [None]) for p in prompts)
    worst = max(prompts, key=lambda p: len(p["input_ids"]) + int(p["osl"]))
    need = turns * (len(worst["input_ids"]) + int(worst["osl"]))
    if turns > 1 and need > context:
        raise BadInputError(
            f"the last of {turns} turns carries about {need} tokens (each turn {len(worst['input_ids'])} in, "
            f"{worst['osl']} out), beyond the model's context of {context}; lower --turns, --isl or --osl"
        )
    if need > context:
        raise BadInputError(
            f"a prompt of {len(worst['input_ids'])} tokens plus {worst['osl']} output tokens ({need}) is beyond "
            f"the model's context of {context} tokens; lower --isl / --osl"
        )


def preflight(api: str, url: str, model: str, prompt: Prompt, ignore_eos: bool, timeout_s: float) -> bool:
    """One streamed request (the longest prompt): it must stream tokens, and its stream must end (a
    ``[DONE]``, or the end of the body after a ``finish_reason``). Returns whether ``ignore_eos`` may be
    sent: an OpenAI engine that refuses it (``transformers serve``: 422 "Unexpected keys in the request:
    {'ignore_eos'}") is asked once more without it, and False says so."""
    try:
        _preflight(api, url, model, prompt, ignore_eos, timeout_s)
    except BadInputError as err:
        if not (ignore_eos and api.startswith("openai") and _refuses_ignore_eos(err.__cause__)):
            raise
        _preflight(api, url, model, prompt, False, timeout_s)
        return False
    return ignore_eos


def _refuses_ignore_eos(err: BaseException | None) -> bool:
    return isinstance(err, ServerAnswer) and err.status_code in (400, 422) and "ignore_eos" in str(err)


def _preflight(api: str, url: str, model: str, prompt: Prompt, ignore_eos: bool, timeout_s: float) -> None:
    client: streams.GrpcStreamClient | streams.SseClient
    try:
        if api == "triton-grpc":
            client = streams.GrpcStreamClient(url, timeout_s)
            request = streams.grpc_stream_request(model, prompt, ignore_eos)
        else:
            client = streams.SseClient(url, api, timeout_s)
            request = streams.build_request(api, url, model, prompt, ignore_eos)
    except ImportError as err:
        raise BadInputError(f"--api {api}: {err}") from None
    try:
        answer = client.exchange(request, first_only=2)  # the whole prompt and output length are accepted
        if answer.times_ns and api != "triton-grpc":  # and a short answer's stream ends as a complete one
            short: Prompt = {**prompt, "osl": 2}
            client.exchange(streams.build_request(api, url, model, short, ignore_eos))
    except streams.NotStreaming as err:
        raise BadInputError(f"{url} ({api}) does not stream: {err}") from None
    except ServerAnswer as err:
        raise _refused(api, url, model, err) from err
    except streams.StreamBroken as err:
        raise ServerError(f"{url} ({api}): a complete answer's stream did not end cleanly: {err}") from None
    except (ConnectionError, OSError) as err:
        raise ServerError(f"{url}: {err}") from None
    except Exception as err:  # grpc raises its own RpcError
        raise ServerError(f"{url} ({api}): {str(err).splitlines()[0][:200] if str(err) else err!r}") from None
    finally:
        client.close()
    if not answer.times_ns:
        raise BadInputError(f"{url} ({api}): the stream for model {model!r} carried no tokens")


def _refused(api: str, url: str, model: str, err: ServerAnswer) -> Exception:
    if err.status_code == 404 and api.startswith("openai"):
        known = [m.get("id") for m in openai_models(url)]
        if known and model not in known:
            return BadInputError(
                f"model {model!r} is not served by {url} (it serves: {', '.join(map(str, known))})"
            )
        return BadInputError(f"{url} ({api}) refused model {model!r}: {err}")
    return BadInputError(f"{url} ({api}) refused the first request for {model!r}: {err}")


def generative_loadtest(
    *,
    url: str,
    model: str,
    profile: LoadProfile,
    options: sweep.SweepOptions,
    prompts_file: str | os.PathLike[str] | None = None,
    trace_file: str | os.PathLike[str] | None = None,
    server: sweep.Server | None = None,
    context_length: int | None = None,
) -> tuple[ResultDocument, Path]:
    """Sweep ``profile`` (its ``workload`` says the API and lengths) against ``model`` at ``url`` (the
    OpenAI base ``http://HOST:PORT/v1``, Triton's HTTP URL, or Triton's gRPC HOST:PORT for triton-grpc);
    ``options`` as for :func:`sweep.run_sweep`."""
    w = profile.workload
    if w is None:
        raise BadInputError("a generative sweep needs a workload (--api, --isl, ...)")
    prompts = workloads.build_prompts(w, prompts_file, trace_file, profile.seed)
    stream_url = server.client_url(profile.protocol) if server else url
    info_url = server.http_url if server else url
    check_context(prompts, context_of(w.api, info_url, model, context_length))
    longest = max(prompts, key=lambda p: len(p["input_ids"]))
    if not preflight(w.api, stream_url, model, longest, w.ignore_eos, profile.timeout_s) and w.ignore_eos:
        # the engine refused ignore_eos: measured without it, and the document says lengths were not forced
        w = dataclasses.replace(w, ignore_eos=False, ignore_eos_refused=True)
        profile = dataclasses.replace(profile, workload=w)
    server = server or sweep.Server(http_url=url)
    manifest = options.manifest
    return sweep.run_sweep(
        server=server,
        model=model,
        variant=manifest.name if manifest else file_safe(model),
        payloads=workloads.as_payloads(prompts),
        expected_outputs=[],
        profile=profile,
        options=options,
    )


def file_safe(name: str) -> str:
    """A served model's name as part of a file name: engines name models like paths
    (``meta-llama/Llama-3.1-8B-Instruct``, a local folder), which must not leave the results folder."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"


def variant_tokenizer(folder: Path | None, card_tokenizer: str | None) -> str | None:
    """The tokenizer a generative model's tokens are counted in: the copy kept with its variant (a variant
    folder's ``tokenizer/``, a Triton repository's ``1/tokenizer/``), else its card's; None when neither is
    known (then ``Workload.recorded`` takes builtin:minilm-wordpiece)."""
    for copy in ("tokenizer", "1/tokenizer"):
        if folder is not None and (folder / copy / "tokenizer.json").is_file():
            return str(folder / copy)
    return card_tokenizer


def run(
    *,
    model: str,
    profile: LoadProfile,
    workload: Workload,
    out_dir: str | os.PathLike[str],
    url: str | None = None,
    repo: str | os.PathLike[str] | None = None,
    grpc_url: str | None = None,
    manifest_path: str | os.PathLike[str] | None = None,
    card_uri: str | None = None,
    tritonserver: str | None = None,
    server_log: str | os.PathLike[str] | None = None,
    repeats: int = 1,
    limits: Limits = DEFAULT_LIMITS,
    command: str = "",
    on_event: Callable[[Event], None] | None = None,
    master_bind: MasterBind | None = None,
    target: str | None = None,
    precision: str | None = None,
    cancel: Cancel | None = None,
) -> tuple[ResultDocument, Path]:
    """``accelbench loadtest`` for a generative model: an OpenAI-compatible engine at ``url``, a running
        Triton at ``url``, or a local Triton started on ``repo``. ``workload`` counts tokens in its tokenizer, else
        in the model's (``variant_tokenizer``: the variant's copy, else the card's: ``card_uri``, else the
        manifest's). The other keywords are ``api.loadtest``'s (``sweep.SweepOptions``). Returns the last repeat's
    (document, path)."""
    if repeats < 1:
        raise BadInputError(f"--repeats must be a whole number >= 1, got {repeats!r}")
    api = workload.api
    if api.startswith("openai") and repo is not None:
        raise BadInputError(f"--api {api} measures an engine at --url; a repository is served through Triton")
    folder = manifest_folder(model, manifest_path, repo)
    manifest = find_manifest(model, manifest_path, repo)
    card = model_card(manifest, card_uri)
    spec = card.generative if card is not None else None
    streaming = profile.streaming(workload, variant_tokenizer(folder, spec.tokenizer if spec else None))
    context = spec.context_length if spec else None
    options = sweep.SweepOptions(
        out_dir=out_dir,
        manifest=manifest,
        command=command,
        limits=limits,
        on_event=on_event,
        master_bind=master_bind,
        target=target,
        precision=precision,
        cancel=cancel,
    )

    def sweep_all(
        server: sweep.Server | None, target_url: str, repository_config: str = ""
    ) -> tuple[ResultDocument, Path]:
        found = [
            generative_loadtest(
                url=target_url,
                model=model,
                profile=dataclasses.replace(streaming, repeat=repeat),
                options=dataclasses.replace(options, repository_config=repository_config),
                prompts_file=workload.prompts_file,
                trace_file=workload.trace_file,
                server=server,
                context_length=context,
            )
            for repeat in range(1, repeats + 1)
        ]
        return found[-1]

    if api.startswith("openai"):
        if url is None or repo is not None:
            raise BadInputError(f"--api {api} measures an engine at --url")
        return sweep_all(None, url.rstrip("/"))
    with triton_server(repo, url, grpc_url, tritonserver, server_log) as triton:
        server = sweep.Server(
            http_url=triton.http_url,
            grpc_url=triton.grpc_url,
            metrics_url=triton.metrics_url,
            version=triton.server_version or "",
        )
        if not TritonHttp(triton.http_url).model_ready(model):
            raise ServerError(f"model {model!r} is not loaded on {triton.http_url}")
        if triton_generative(triton.http_url, model) is None:
            raise BadInputError(f"model {model!r} on {triton.http_url} is not a streaming (decoupled) model")
        config = Path(repo) / model / "config.pbtxt" if repo is not None else None
        return sweep_all(server, server.http_url, config.read_text() if config and config.is_file() else "")
