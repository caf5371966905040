"""vLLM as a generative model's engine (``engine = "vllm"``): its arguments, its model folder, its server.

Three things, one set of engine arguments:

- ``VllmArgs``: what the spec decides (dtype from the precision, KV-cache dtype, ``max_num_seqs`` from the
  largest concurrency, ``max_model_len`` from the context), written as Triton's vLLM backend reads them
  (``model.json``: ``AsyncEngineArgs`` keyword names) and as the OpenAI server's command line;
- ``prepare_model_dir``: the Hugging Face folder vLLM loads (the checkpoint, its tokenizer, and, for builtin
  models without one, a chat template that is the user's text, so chat and completions see the same tokens);
- ``VllmServer``: vLLM's OpenAI ``api_server`` on a loopback port, from the venv ``install_vllm`` builds, in its
  own process group (the API server, ``VLLM::EngineCore`` and its worker all end with it).

Why the CPU host runs the OpenAI server rather than Triton's python backend: docs/serving.md, "vLLM".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.errors import BadInputError, ServerError, ToolchainMissingError

# spec precision -> vLLM's --dtype; a CPU build casts fp32 to bf16 whatever it is told ("auto")
PRECISION_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
# spec precisions vLLM reaches through quantization= on a GPU (the checkpoint must be quantized for it)
PRECISION_QUANTIZATION = {"fp8": "fp8"}
KV_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
# the user's text, nothing around it: chat and completions then send the same token ids
PLAIN_CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"
API_SERVER = "vllm.entrypoints.openai.api_server"
READY_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class VllmArgs:
    """vLLM's engine arguments as the spec sets them (docs/llm.md, "Engines")."""

    model: str  # the Hugging Face folder (or hub id on a GPU host)
    served_model_name: str
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    max_num_seqs: int = 8
    max_model_len: int = 512
    quantization: str | None = None
    enable_prefix_caching: bool = True
    enforce_eager: bool = False  # no torch.compile, no CPU warm-up: starts sooner, steps slower
    gpu_memory_utilization: float | None = None  # GPU hosts only

    @classmethod
    def from_spec(
        cls,
        model_dir: str,
        name: str,
        precision: str,
        max_num_seqs: int,
        max_model_len: int,
        kv_cache_dtype: str = "auto",
        gpu: bool = False,
        enforce_eager: bool = False,
    ) -> VllmArgs:
        if kv_cache_dtype not in KV_DTYPES:
            raise BadInputError(f"kv_cache_dtype {kv_cache_dtype!r}: vLLM takes {', '.join(KV_DTYPES)}")
        dtype = PRECISION_DTYPE.get(precision)
        quantization = PRECISION_QUANTIZATION.get(precision)
        if dtype is None and quantization is None:
            raise BadInputError(
                f"precision {precision!r} has no vLLM engine argument here; vLLM takes "
                f"{', '.join([*PRECISION_DTYPE, *PRECISION_QUANTIZATION])}"
            )
        return cls(
            model=model_dir,
            served_model_name=name,
            dtype=dtype or "auto",
            kv_cache_dtype=kv_cache_dtype,
            max_num_seqs=max(1, max_num_seqs),
            max_model_len=max_model_len,
            quantization=quantization,
            enforce_eager=enforce_eager,
            gpu_memory_utilization=0.9 if gpu else None,
        )

    def model_json(self) -> dict[str, Any]:
        """Triton's vLLM backend's ``model.json``: ``AsyncEngineArgs`` keywords."""
        out: dict[str, Any] = {
            "model": self.model,
            "served_model_name": self.served_model_name,
            "dtype": self.dtype,
            "kv_cache_dtype": self.kv_cache_dtype,
            "max_num_seqs": self.max_num_seqs,
            "max_model_len": self.max_model_len,
            "enable_prefix_caching": self.enable_prefix_caching,
        }
        if self.quantization:
            out["quantization"] = self.quantization
        if self.enforce_eager:  # only when asked: vLLM's default (compiled) is what teams run
            out["enforce_eager"] = True
        if self.gpu_memory_utilization is not None:
            out["gpu_memory_utilization"] = self.gpu_memory_utilization
        return out

    def cli(self) -> list[str]:
        """The same arguments for ``python -m vllm.entrypoints.openai.api_server`` (or ``vllm serve``)."""
        args = []
        for key, value in self.model_json().items():
            flag = "--" + key.replace("_", "-")
            if isinstance(value, bool):
                args.append(flag if value else f"--no-{key.replace('_', '-')}")
            else:
                args += [flag, str(value)]
        return args


def prepare_model_dir(hf_dir: Path, tokenizer_dir: Path | None, dest: Path) -> Path:
    """``dest``: the checkpoint and its tokenizer in one folder, with a chat template when it has none."""
    if not (hf_dir / "config.json").is_file():
        raise BadInputError(f"{hf_dir}: not a Hugging Face checkpoint (no config.json)")
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for folder in [hf_dir, *([tokenizer_dir] if tokenizer_dir else [])]:
        for item in folder.iterdir():
            if item.is_file():
                shutil.copy2(item, tmp / item.name)
    config_path = tmp / "tokenizer_config.json"
    config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    if not config.get("chat_template") and not (tmp / "chat_template.jinja").is_file():
        config["chat_template"] = PLAIN_CHAT_TEMPLATE
        config_path.write_text(json.dumps(config, indent=2) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(dest)
    return dest


class VllmServer:
    """vLLM's OpenAI server from accelbench's vLLM venv, on 127.0.0.1:``port``; a context manager.

    ``extra``: more command-line options (``--enable-prompt-tokens-details`` is always on, so ``usage``
    carries ``cached_tokens``); ``env``: more variables, over this process's (``VLLM_CPU_OMP_THREADS_BIND``:
    the cores its CPU build's OpenMP threads are bound to; by default the first core not reserved)."""

    def __init__(
        self,
        args: VllmArgs,
        port: int | None = None,
        log_path: str | os.PathLike[str] | None = None,
        python: str | os.PathLike[str] | None = None,
        extra: tuple[str, ...] = (),
        kv_cache_gib: int = 1,
        env: dict[str, str] | None = None,
    ) -> None:
        from accelbench.serving.server import free_port

        self.args = args
        self.port = port or free_port()
        self.log_path = Path(log_path) if log_path else None
        self.python = str(python) if python else None
        self.extra = extra
        self.kv_cache_gib = kv_cache_gib
        self.env = dict(env or {})
        self.version = ""
        self.proc: subprocess.Popen | None = None
        self._log: Any = None

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        return f"{self.http_url}/v1"

    @property
    def metrics_url(self) -> str:
        return f"{self.http_url}/metrics"

    @property
    def grpc_url(self) -> None:
        return None

    @property
    def server_version(self) -> str:
        return f"vllm {self.version}" if self.version else "vllm"

    def command(self) -> list[str]:
        return [
            self.python or "python",
            "-m",
            API_SERVER,
            *self.args.cli(),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--enable-prompt-tokens-details",
            *self.extra,
        ]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # the venv's own packages, not accelbench's numpy 2 world
        env.update(
            VLLM_CPU_KVCACHE_SPACE=str(self.kv_cache_gib),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            VLLM_NO_USAGE_STATS="1",
            DO_NOT_TRACK="1",
        )
        env.update(self.env)
        return env

    def __enter__(self) -> VllmServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        from accelbench.processes import start_group
        from accelbench.serving.install_vllm import vllm_env_ready, vllm_env_version, vllm_python

        if self.python is None:
            if not vllm_env_ready():
                raise ToolchainMissingError(
                    "vLLM's environment is not built: run `python -m accelbench.serving.install_vllm` "
                    "(a few minutes, once)"
                )
            self.python = str(vllm_python())
            self.version = vllm_env_version()
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = start_group(
            self.command(),
            env=self.environment(),
            stdout=self._log or subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise ServerError(f"vLLM exited with {self.proc.returncode} while starting{self._log_hint()}")
            try:
                with urllib.request.urlopen(f"{self.http_url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        self._read_version()
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        raise ServerError(f"vLLM did not answer /health within {READY_TIMEOUT_S:.0f} s{self._log_hint()}")

    def _read_version(self) -> None:
        try:
            with urllib.request.urlopen(f"{self.http_url}/version", timeout=5) as answer:
                self.version = str(json.loads(answer.read()).get("version") or self.version)
        except (urllib.error.URLError, OSError, ValueError):
            pass

    def _log_hint(self) -> str:
        if not self.log_path or not self.log_path.is_file():
            return ""
        lines = [line for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        errors = [line for line in lines if "Error" in line or "error" in line]
        last = (errors or lines or [""])[-1].strip()
        return f": {last[:300]} (log: {self.log_path})" if last else f" (log: {self.log_path})"

    def stop(self) -> None:
        from accelbench.processes import end_group

        if self.proc is not None:
            end_group(self.proc, grace_s=10.0)
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None


def vllm_model_config(name: str, gpu: bool) -> str:
    """config.pbtxt of accelbench's vLLM model: the python backend, decoupled, the generative tensors."""
    from google.protobuf import text_format

    from accelbench.serving import pbconfig
    from accelbench.serving.llm_repository import INPUTS, OUTPUTS

    pb = pbconfig.pb_module()
    config = pb.ModelConfig(name=name, backend="python", max_batch_size=0)
    config.model_transaction_policy.decoupled = True
    for tensor_name, data_type, dims in INPUTS:
        tensor = config.input.add(name=tensor_name, data_type=pb.DataType.Value(data_type), optional=True)
        tensor.dims.extend(dims)
    for tensor_name, data_type, dims in OUTPUTS:
        tensor = config.output.add(name=tensor_name, data_type=pb.DataType.Value(data_type))
        tensor.dims.extend(dims)
    # one instance: vLLM batches inside it; KIND_MODEL on a GPU lets vLLM place itself (as the vllm backend)
    kind = "KIND_MODEL" if gpu else "KIND_CPU"
    config.instance_group.add(kind=pb.ModelInstanceGroup.Kind.Value(kind), count=1)
    config.parameters["engine"].string_value = "vllm"
    return text_format.MessageToString(config)


def write_vllm_model(repo: Path, name: str, hf_dir: Path, args: dict[str, Any], gpu: bool) -> Path:
    """``repo/name``: config.pbtxt, 1/model.py (serving/vllm_model.py), 1/model.json, 1/hf/."""
    from importlib import resources

    folder = repo / name
    version = folder / "1"
    shutil.rmtree(folder, ignore_errors=True)
    version.mkdir(parents=True)
    (folder / "config.pbtxt").write_text(vllm_model_config(name, gpu))
    shutil.copy2(Path(str(resources.files("accelbench.serving") / "vllm_model.py")), version / "model.py")
    shutil.copytree(hf_dir, version / "hf")
    served = {**args, "model": "hf"}  # model.py reads it beside itself, in the container as here
    (version / "model.json").write_text(json.dumps(served, indent=2, sort_keys=True) + "\n")
    return folder
