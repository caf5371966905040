"""`accelbench serve` bad input: one line on stderr and the error's exit code, no server left running;
and where the embedded tritonserver comes from."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from accelbench.cli import main
from accelbench.errors import ToolchainMissingError
from accelbench.serving.embedded import find_tritonserver

TINY_CONFIG = 'name: "m"\nbackend: "python"\nmax_batch_size: 0\n'


@pytest.fixture
def repo(tmp_path) -> Path:
    (tmp_path / "repo" / "m" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "m" / "config.pbtxt").write_text(TINY_CONFIG)
    return tmp_path / "repo"


def one_line_error(result, code: int, needle: str) -> None:
    assert result.exit_code == code, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("accelbench: error:") and needle in lines[0], lines


def test_serve_port_in_use(repo):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(main, ["serve", str(repo), "--http-port", str(port)])
    one_line_error(result, 4, f"port {port} is in use")


def test_serve_missing_repo_and_empty_repo(tmp_path):
    one_line_error(CliRunner().invoke(main, ["serve", str(tmp_path / "nope")]), 2, "no such model repository")
    (tmp_path / "empty").mkdir()
    one_line_error(CliRunner().invoke(main, ["serve", str(tmp_path / "empty")]), 2, "no models")


def test_serve_bad_tritonserver_path(repo, tmp_path):
    result = CliRunner().invoke(main, ["serve", str(repo), "--tritonserver", str(tmp_path / "tritonserver")])
    one_line_error(result, 3, "not an executable file")


def test_embedded_server_has_the_matching_stub_outside_site_packages():
    install = find_tritonserver(prefer_stub_env=False)
    assert install.embedded and install.binary.is_file()
    stub = install.backend_dir / "python" / "triton_python_backend_stub"
    assert stub.is_file()
    assert "site-packages" not in str(install.backend_dir)
    env = install.environment({"PATH": "/usr/bin"})
    # the stub takes its Python from the first python3 on PATH: it must be this environment's
    assert env["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    assert all(Path(p).is_dir() for p in env["LD_LIBRARY_PATH"].split(":"))


def test_explicit_binary_that_is_the_embedded_one_keeps_its_backends():
    embedded = find_tritonserver()
    assert find_tritonserver(embedded.binary) == embedded


def test_missing_explicit_binary():
    with pytest.raises(ToolchainMissingError, match="not an executable"):
        find_tritonserver("/nonexistent/tritonserver")


def test_numpy_bridge_models_get_the_stub_environment_under_numpy_2(tmp_path, monkeypatch):
    from accelbench.serving import embedded

    assert embedded.numpy_bridge_ok("1.26.4") and not embedded.numpy_bridge_ok("2.4.6")
    monkeypatch.setenv("ACCELBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(embedded, "numpy_bridge_ok", lambda version=None: False)  # as under numpy 2
    assert find_tritonserver().stub_env is None  # DLPack models only: nothing to add
    with pytest.raises(
        ToolchainMissingError, match=r"numpy<2 .* python -m accelbench\.serving\.install"
    ) as err:
        find_tritonserver(bridge_models=["their_model"])
    assert "their_model" in str(err.value) and "\n" not in str(err.value)
    built = embedded.stub_env_dir()
    (built / "bin").mkdir(parents=True)
    (built / ".complete").write_text("")
    install = find_tritonserver(bridge_models=["their_model"])
    assert install.stub_env == built
    # built, it serves DLPack models too (cheaper per request), unless this environment's numpy is asked for
    assert find_tritonserver().stub_env == built and find_tritonserver(prefer_stub_env=False).stub_env is None
    # the stub takes its Python from the first python3 on PATH: the stub environment's, then this one's
    path = install.environment({"PATH": "/usr/bin"})["PATH"].split(":")
    assert path[:2] == [str(built / "bin"), str(Path(sys.executable).parent)]
    monkeypatch.setattr(embedded, "numpy_bridge_ok", lambda version=None: True)  # numpy 1 serves them itself
    assert find_tritonserver(bridge_models=["their_model"]).stub_env is None


def test_a_crash_during_start_is_reported_with_the_model_being_loaded(tmp_path):
    """Recorded: tritonserver 2.51 segfaulted after a failed warmup sample, before logging "failed to load"."""
    from types import SimpleNamespace

    from accelbench.serving.server import LocalTriton

    log = (
        Path(__file__).parent / "data" / "serving" / "tritonserver_2.51_crash_after_failed_warmup.log"
    ).read_text()
    triton = LocalTriton(tmp_path)
    triton.process = SimpleNamespace(returncode=-11)
    for line in log.splitlines():
        triton._log.append(line)
        if line.startswith("E"):
            triton._errors.append(line)
    reason = triton._reason()
    assert reason.startswith("crashed with SIGSEGV while loading tiny__cpu-local__fp32:1 (server log: ")
    saved = Path(reason.split("server log: ")[1].rstrip(")"))
    assert "Non-graceful termination" in saved.read_text()
    saved.unlink()
