"""`accelbench run SPEC --push URL` end to end on builtin:identity (real quantize, tritonserver, Locust): each
result reaches the server as its sweep finishes; with the server down the run carries on, says so in one line,
keeps the files, and `accelbench push` sends them later."""

from __future__ import annotations

import subprocess

import httpx
import pytest
from service_fixtures import ACCELBENCH, running_server

SPEC = """
name = "identity-push"
[[models]]
uri = "builtin:identity"
precisions = ["fp32"]
[[targets]]
id = "cpu-local"
mode = "local"
[load]
levels = [1]
duration_s = 1.0
warmup_s = 0.3
"""


@pytest.mark.slow
def test_run_push_sends_results_and_a_down_server_loses_nothing(tmp_path):
    from accelbench.serving.server import free_port

    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    with running_server(f"sqlite:///{tmp_path / 'r.db'}", tmp_path) as server:
        auth = {"Authorization": f"Bearer {server.token}"}
        up = subprocess.run([ACCELBENCH, "run", str(spec), "--out", str(tmp_path / "a"), "--quiet", "--push",
                             server.base_url, "--token", server.token], capture_output=True, text=True, timeout=600)  # fmt: skip
        assert up.returncode == 0, up.stderr
        assert "push failed" not in up.stderr
        listing = httpx.get(
            server.base_url + "/api/v1/results", params={"model": "identity"}, headers=auth
        ).json()
        assert (
            listing["total"] == 1
            and listing["results"][0]["source"] == "identity__cpu-local__fp32__closed-http-b1.json"
        )

        down_url = f"http://127.0.0.1:{free_port()}"
        down = subprocess.run([ACCELBENCH, "run", str(spec), "--out", str(tmp_path / "b"), "--quiet", "--push",
                               down_url, "--token", server.token], capture_output=True, text=True, timeout=600)  # fmt: skip
        assert down.returncode == 0, down.stderr  # the run carries on
        said = [line for line in down.stderr.splitlines() if "push failed" in line]
        assert (
            len(said) == 1
            and "stay on disk" in said[0]
            and f"accelbench push {tmp_path / 'b' / 'results'}" in said[0]
        )
        results = list((tmp_path / "b" / "results").glob("*.json"))
        assert len(results) == 1 and (tmp_path / "b" / "report" / "report.md").is_file()
        later = subprocess.run([ACCELBENCH, "push", str(tmp_path / "b" / "results"), "--server", server.base_url,
                                "--token", server.token], capture_output=True, text=True, timeout=300)  # fmt: skip
        assert later.returncode == 0 and "pushed 1 new" in later.stdout, later.stderr
        assert (
            httpx.get(server.base_url + "/api/v1/results", params={"model": "identity"}, headers=auth).json()[
                "total"
            ]
            == 2
        )
