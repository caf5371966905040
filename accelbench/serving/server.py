"""``LocalTriton``: a real tritonserver on free loopback ports, as a context manager.

The readiness wait reads the server's log as it is written, so a model that fails to load ends the start
at once with Triton's own reason. The server runs in its own process group and is always stopped
(SIGINT, then SIGKILL for the whole group), so no tritonserver or python-backend stub outlives us.
"""

from __future__ import annotations

import collections
import errno
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

from accelbench.documents import VariantManifest
from accelbench.errors import BadInputError, ServerError
from accelbench.processes import close_streams_of, end_group, start_group
from accelbench.serving.embedded import TritonInstall, find_tritonserver
from accelbench.serving.http_client import HttpError, TritonHttp, Unreachable, get_text

# glog prefix "E1129 23:59:01.123456 1234 model_lifecycle.cc:654] "
_GLOG = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ [^\]]+\] ?(.*)$")
# error lines every CPU-only start prints; never the reason a start failed
_NOISE = ("CudaDriverHelper has not been initialized", "pinned memory", "CUDA driver")
_FATAL_HINTS = ("failed to load", "failed to start", "error: creating server", "Address already in use")
# lines that name the model or port at fault, preferred over "creating server: failed to load all models"
_SPECIFIC = ("failed to load '", "Poll failed", "failed to start", "Address already in use")
PORT_ATTEMPTS = 3  # starts on freshly chosen ports when one the server chose was taken before it bound it


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on ``host:port`` (a bind without SO_REUSEADDR fails)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as err:
            if err.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _clean(line: str) -> str:
    """Triton's message without the glog prefix and the quotes 2.5x puts around it."""
    match = _GLOG.match(line)
    text = match.group(2) if match else line
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    # a python-backend traceback follows after an escaped newline ("\\n\\nAt:\\n ..."): keep the reason
    return text.split("\\n")[0].strip().rstrip(";")


def numpy_bridge_models(repo: Path, models: list[str]) -> list[str]:
    """The python-backend models among ``models`` that need the stub's numpy bridge: every one but those whose
    config declares ``tensor_transport: dlpack`` (accelbench's own: the local flavor's without BYTES tensors,
    torch-cuda's, and the generative model's, which leaves its optional text tensors out under numpy 2)."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    bridge = []
    for name in models:
        try:
            text = (repo / name / "config.pbtxt").read_text()
            config = text_format.Parse(text, model_config_pb2.ModelConfig())
        except (OSError, text_format.ParseError):
            continue  # Triton reports the broken config itself
        if config.backend == "python" and config.parameters["tensor_transport"].string_value != "dlpack":
            bridge.append(name)
    return bridge


class LocalTriton:
    """Start ``tritonserver`` on ``repo``; attributes ``http_url``, ``grpc_url``, ``metrics_url``, ``pid``.

    ``http_url`` and ``metrics_url`` carry the scheme (``http://127.0.0.1:PORT``); ``grpc_url`` is
    ``HOST:PORT`` as tritonclient.grpc expects it; ``http_address`` is the HTTP ``HOST:PORT``.
    """

    def __init__(
        self,
        repo: str | os.PathLike,
        http_port: int | None = None,
        grpc_port: int | None = None,
        tritonserver: str | os.PathLike | None = None,
        *,
        host: str = "127.0.0.1",
        metrics_port: int | None = None,
        start_timeout_s: float = 180.0,
        exit_timeout_s: int = 5,
        log_path: str | os.PathLike | None = None,
        extra_args: tuple[str, ...] = (),
        models: list[str] | None = None,
        prefer_stub_env: bool = True,
        stub_env: Path | None = None,
        extra_env: dict[str, str] | None = None,
        library_dirs: tuple[Path, ...] = (),
    ) -> None:
        self.repo = Path(repo)
        self.host = host
        self._ports = {"http": http_port, "grpc": grpc_port, "metrics": metrics_port}
        self._tritonserver = tritonserver
        self.start_timeout_s = start_timeout_s
        self.exit_timeout_s = exit_timeout_s
        self.log_path = Path(log_path) if log_path else None
        self.extra_args = tuple(extra_args)
        self.load_models = list(models) if models else None  # None: every model in the repository
        # False: DLPack models keep this environment's numpy even when the stub's numpy<2 one is built
        self.prefer_stub_env = prefer_stub_env
        # a stub environment of the caller's (vLLM's: install_vllm.build_vllm_stub_env) and more variables
        self._stub_env_override = stub_env
        self.extra_env = dict(extra_env or {})
        self.extra_library_dirs = tuple(library_dirs)  # searched before the server's own
        self.process: subprocess.Popen | None = None
        self.server_version: str | None = None
        self.stub_env: Path | None = None  # the stub's numpy<2 environment when the server runs with it
        self._log: collections.deque[str] = collections.deque(maxlen=2000)
        self._errors: list[str] = []
        self._reader: threading.Thread | None = None
        self._stopped = False
        self.port_retries = 0  # starts again on new ports because one it chose was taken before it bound it

    # -- public attributes -------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def http_address(self) -> str:
        return f"{self.host}:{self._ports['http']}"

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self._ports['http']}"

    @property
    def grpc_url(self) -> str:
        return f"{self.host}:{self._ports['grpc']}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self._ports['metrics']}/metrics"

    def log_lines(self) -> list[str]:
        return list(self._log)

    # -- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> LocalTriton:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if not self.repo.is_dir():
            raise BadInputError(f"{self.repo}: no such model repository")
        present = {p.name for p in self.repo.iterdir() if (p / "config.pbtxt").is_file()}
        if not present:
            raise BadInputError(f"{self.repo}: no models (no <name>/config.pbtxt)")
        missing = sorted(set(self.load_models or ()) - present)
        if missing:
            raise BadInputError(f"{self.repo}: no model(s) {missing}; it has {sorted(present)}")
        chosen = self.load_models or sorted(present)
        install = find_tritonserver(
            self._tritonserver,
            bridge_models=numpy_bridge_models(self.repo, chosen),
            prefer_stub_env=self.prefer_stub_env,
        )
        if self._stub_env_override is not None:
            install = replace(install, stub_env=self._stub_env_override)
        if self.extra_env:
            install = replace(install, env_overrides={**install.env_overrides, **self.extra_env})
        if self.extra_library_dirs:
            install = replace(install, library_dirs=(*self.extra_library_dirs, *install.library_dirs))
        self.stub_env = install.stub_env
        given = {key for key, port in self._ports.items() if port is not None}
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self._choose_ports()
            try:
                self._launch(install)
                self._wait_ready()
                return
            except ServerError as err:
                self.stop()
                if attempt == PORT_ATTEMPTS or not self._port_taken_meanwhile(str(err), given):
                    raise
            except BaseException:
                self.stop()
                raise
            # tritonserver binds its endpoints after loading its models: a port found free was taken meanwhile
            # (by a model's own process, vLLM's engine picks free ports too, or by another program): new ones
            self._ports = {key: (port if key in given else None) for key, port in self._ports.items()}
            self.process, self._reader, self._stopped = None, None, False
            self._errors.clear()
            self.port_retries += 1

    def _port_taken_meanwhile(self, message: str, given: set[str]) -> bool:
        """Whether a start failed on a port this server chose (not one the caller gave: that one is theirs to
        change), as Triton says it: ``Socket '127.0.0.1:43305' already in use`` or ``Address already in use``."""
        if "already in use" not in message:
            return False
        match = re.search(r":(\d+)'? already in use", message)
        if match is None:
            return len(given) < len(self._ports)
        return int(match.group(1)) not in {self._ports[key] for key in given}

    def _choose_ports(self) -> None:
        taken: set[int] = set()
        for key, port in self._ports.items():
            if port is not None:
                if port_in_use(self.host, port):
                    raise ServerError(f"port {port} is in use ({key} on {self.host})")
                taken.add(port)
        for key, port in self._ports.items():
            if port is None:
                port = free_port(self.host)
                while port in taken:
                    port = free_port(self.host)
                self._ports[key] = port
                taken.add(port)

    def command(self, install: TritonInstall) -> list[str]:
        args = [
            str(install.binary),
            f"--model-repository={self.repo.resolve()}",
            f"--http-address={self.host}",
            f"--grpc-address={self.host}",
            f"--metrics-address={self.host}",
            f"--http-port={self._ports['http']}",
            f"--grpc-port={self._ports['grpc']}",
            f"--metrics-port={self._ports['metrics']}",
            "--strict-readiness=true",
            "--exit-on-error=true",
            f"--exit-timeout-secs={self.exit_timeout_s}",
            "--log-verbose=0",
            "--log-format=default",
            # summary quantiles give a server-side latency cross-check at no cost to the request path
            "--metrics-config=summary_latencies=true",
            "--metrics-interval-ms=1000",
        ]
        if self.load_models:
            args.append("--model-control-mode=explicit")
            args.extend(f"--load-model={name}" for name in self.load_models)
        else:
            args.append("--model-control-mode=none")
        if install.backend_dir is not None:
            args.append(f"--backend-directory={install.backend_dir}")
        return args + list(self.extra_args)

    def _launch(self, install: TritonInstall) -> None:
        self.process = start_group(  # own process group: Ctrl-C in a terminal is ours to forward
            self.command(install),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=install.environment(),
            cwd=str(self.repo.resolve()),
        )
        self._reader = threading.Thread(target=self._read_log, name="tritonserver-log", daemon=True)
        self._reader.start()

    def _read_log(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        sink = open(self.log_path, "a", encoding="utf-8") if self.log_path else None  # noqa: SIM115
        try:
            for raw in self.process.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self._log.append(line)
                if sink:
                    sink.write(line + "\n")
                    sink.flush()
                if line.startswith("E") and _GLOG.match(line) or any(h in line for h in _FATAL_HINTS):
                    self._errors.append(_clean(line))
        finally:
            if sink:
                sink.close()

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            load_errors = [e for e in self._errors if any(k in e for k in _SPECIFIC)]
            if load_errors:
                raise ServerError(f"tritonserver: {load_errors[0]}")
            if self.process.poll() is not None:
                if self._reader:
                    self._reader.join(timeout=5)
                raise ServerError(f"tritonserver stopped during start-up: {self._reason()}")
            if self._ready():
                try:
                    self.server_version = TritonHttp(self.http_url, timeout_s=5).metadata().get("version")
                except HttpError:
                    self.server_version = None
                return
            time.sleep(0.1)
        raise ServerError(f"tritonserver not ready after {self.start_timeout_s:.0f} s: {self._reason()}")

    def _reason(self) -> str:
        for text in self._errors:
            if any(k in text for k in _SPECIFIC):
                return text
        code = self.process.returncode if self.process else None
        if code is not None and code < 0:
            loading = [_clean(x).split("loading: ", 1)[1] for x in self._log if '"loading: ' in x]
            where = f" while loading {', '.join(loading)}" if loading else ""
            return f"crashed with {signal.Signals(-code).name}{where} (server log: {self._saved_log()})"
        errors = [e for e in self._errors if not any(n in e for n in _NOISE)]
        if errors:
            return errors[0]
        tail = [_clean(x) for x in self._log if x.strip()]
        return tail[-1] if tail else "no output"

    def _saved_log(self) -> str:
        """Where the full server log can be read: ``log_path``, or a temporary copy written now."""
        if self.log_path:
            return str(self.log_path)
        fd, path = tempfile.mkstemp(prefix="accelbench-tritonserver-", suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("\n".join(self._log) + "\n")
        return path

    def _ready(self) -> bool:
        """Ready over HTTP and, unless metrics are off, its metrics endpoint answering as Triton's. tritonserver
        starts the metrics service last: a metrics port taken before it binds it fails only there, after the
        server has answered ready over HTTP, and it exits a moment later (reproduced with Triton 2.51:
        test_a_chosen_port_taken_before_the_server_binds_it_starts_again_on_new_ones)."""
        try:
            if not TritonHttp(self.http_url, timeout_s=2).ready():
                return False
        except Unreachable:  # not listening yet
            return False
        if any(
            arg.replace(" ", "") in ("--allow-metrics=false", "--allow-metrics=0") for arg in self.extra_args
        ):
            return True
        try:  # another program's listener on the port answers something else, or nothing within the second
            return "nv_" in get_text(self.metrics_url, timeout_s=1)
        except HttpError:
            return False

    def check_model(self, model: str, manifest: VariantManifest | None = None) -> dict:
        """Ready, and (given the variant manifest) serving the variant's inputs/outputs; the served config."""
        from accelbench.serving.remote import check_model

        return check_model(self.http_url, model, manifest)

    def models(self) -> list[dict]:
        """Repository index: ``[{"name", "version", "state", "reason"}]``."""
        try:
            return TritonHttp(self.http_url, timeout_s=5).repository_index()
        except HttpError:
            return []

    def wait(self, timeout_s: float) -> bool:
        """Block up to ``timeout_s``; True when the server has exited."""
        if self.process is None:
            return True
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def exit_reason(self) -> str:
        code = self.process.returncode if self.process else None
        return f"exit code {code}: {self._reason()}"

    def stop(self) -> None:
        """SIGINT to the group, SIGKILL to the group after the grace period; idempotent.

        The SIGKILL sits in ``finally`` so that a second Ctrl-C during the grace period still ends the
        server, and it always goes to the whole group: stubs of a server that died hard would otherwise stay.
        """
        proc = self.process
        if proc is None or self._stopped:
            return  # ending the group again could hit a process group that reused the number
        self._stopped = True
        try:
            end_group(proc, first=signal.SIGINT, grace_s=self.exit_timeout_s + 10, close_streams=False)
        finally:
            if self._reader:
                self._reader.join(timeout=5)
            close_streams_of(proc)
