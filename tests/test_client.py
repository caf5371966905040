"""The client side of the results service against a small real HTTP server (stdlib ``http.server`` on a loopback
port, answering what each test scripts): how statuses become exceptions, retries while a server is down, the
agent's JobSink never holding a step up while the server is slow, and a client package that imports nothing
of the server's."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from accelbench.client.http import Conflict, ServerClient, Unreachable
from accelbench.errors import BadInputError, ServerError


@contextmanager
def scripted(answers: dict[str, list[tuple[int, object]]],
             gate: threading.Event | None = None) -> Iterator[tuple[str, list]]:  # fmt: skip
    """A server on 127.0.0.1 answering ``answers[path]`` in turn (the last one repeats), each answer held until
    ``gate`` is set when one is given; yields (URL, requests seen)."""
    seen: list[tuple[str, str, object]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            seen.append((self.command, self.path, body))
            if gate is not None:
                gate.wait(60)
            queue = answers.get(self.path) or [(404, {"error": "no such route"})]
            status, payload = queue.pop(0) if len(queue) > 1 else queue[0]
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_statuses_become_the_documented_exceptions():
    answers = {
        "/api/v1/ok": [(200, {"id": 1})],
        "/api/v1/taken": [(409, {"error": "job 3 is cancelled and no longer held by this runner"})],
        "/api/v1/auth": [(403, {"error": "this token may not push"})],
        "/api/v1/secret": [
            (
                403,
                {
                    "error": "runner 1: its runner secret was replaced: another agent registered "
                    "as 'h-cpu-local' (…): give each agent its own --name"
                },
            )
        ],
        "/api/v1/bad": [(422, {"error": "field steps.0.offered: Field required"})],
        "/api/v1/broken": [(500, {"error": "database is locked"})],
    }
    with scripted(answers) as (url, seen), ServerClient(url, "abk_x", scope="push") as client:
        assert client.call("POST", "/ok", {"a": 1}) == {"id": 1}
        assert seen[0] == ("POST", "/api/v1/ok", {"a": 1})
        with pytest.raises(Conflict, match="job 3 is cancelled"):
            client.call("POST", "/taken")
        with pytest.raises(
            BadInputError, match=r"refused it \(403\): this token may not push \(give a push-scoped"
        ):
            client.call("POST", "/auth")
        with pytest.raises(BadInputError) as replaced:  # a secret is not the token's fault: no token hint
            client.call("POST", "/secret")
        assert str(replaced.value).endswith("give each agent its own --name")
        with pytest.raises(BadInputError, match=r"^r\.json: the server refused it \(422\): field steps"):
            client.request("POST", "/bad", label="r.json")
        assert client.request("POST", "/bad", accept=(422,)).status == 422
        with pytest.raises(ServerError, match=r"failed \(500\): database is locked"):
            client.call("POST", "/broken")


def test_a_busy_server_is_retried_for_retry_s_and_a_dead_one_is_one_line():
    answers = {
        "/api/v1/claim": [(503, {"error": "restarting"}), (503, {"error": "restarting"}), (200, {"id": 7})]
    }
    with scripted(answers) as (url, seen), ServerClient(url, None, retry_s=30.0) as client:
        assert client.call("POST", "/claim") == {"id": 7} and len(seen) == 3
    from accelbench.serving.server import free_port

    with (
        ServerClient(f"http://127.0.0.1:{free_port()}", None) as client,
        pytest.raises(Unreachable, match="is not reachable \\(Connect"),
    ):
        client.call("GET", "/health")
    with pytest.raises(BadInputError, match="give the server's URL"):
        ServerClient("bench:8080", None)


def test_a_step_never_waits_for_a_server_that_is_slow_to_answer():
    """JobSink hands each step to the heartbeat thread: while the server holds the thread's call (the
    heartbeat, sent first so documents never delay it), the sweep's thread records the next steps without
    waiting; then only the latest document is sent."""
    from accelbench.client.job import JobSink
    from accelbench.documents import load_result
    from accelbench.loadtests.events import Cancel, StepFinished

    data = Path(__file__).parent / "data" / "reports" / "cpu-local"
    doc = load_result(sorted(data.glob("*.json"))[0])
    assert len(doc.steps) >= 2
    path, gate = Path("r.json"), threading.Event()

    def finished(n: int) -> StepFinished:  # the document as it stands after n steps
        return StepFinished(doc.steps[n - 1], doc.model_copy(update={"steps": doc.steps[:n]}), path)

    answers = {"/api/v1/jobs/5/documents": [(200, {})], "/api/v1/jobs/5/heartbeat": [(200, {})]}
    with scripted(answers, gate) as (url, seen), ServerClient(url, None) as client:
        sink = JobSink(client, 5, {"runner_id": 1}, Cancel(), [], interval_s=30.0)
        sink.step(finished(1))
        sink.start()
        while not seen:  # the thread's heartbeat is held by the server now
            time.sleep(0.01)
        later = threading.Thread(
            target=lambda: [sink.step(finished(n)) for n in range(2, len(doc.steps) + 1)]
        )
        later.start()
        later.join(timeout=30)
        held = not later.is_alive() and len(seen) == 1
        gate.set()
        sink.end()
        sink.flush()
    assert held, "a step waited for the server"
    puts = [body for method, _, body in seen if method == "PUT"]
    assert seen[0][:2] == ("POST", "/api/v1/jobs/5/heartbeat")
    assert [len(p["document"]["steps"]) for p in puts] == [len(doc.steps)] and puts[-1]["runner_id"] == 1
    assert sink.steps == len(doc.steps) and not sink.pending


def test_a_conflict_on_a_heartbeat_cancels_the_job():
    from accelbench.client.job import JobSink
    from accelbench.loadtests.events import Cancel

    stop = Cancel()
    answers = {"/api/v1/jobs/5/heartbeat": [(409, {"error": "job 5 is cancelled and no longer held"})]}
    with scripted(answers) as (url, _), ServerClient(url, None) as client:
        sink = JobSink(client, 5, {}, stop.child(), [], interval_s=0.1)
        sink.start()
        sink.thread.join(timeout=30)
    assert sink.lost == "job 5 is cancelled and no longer held" and sink.cancel.requested
    assert sink.cancel.why() == "the server took the job back" and not stop.requested  # the agent goes on
    stop.request("SIGTERM")
    assert stop.child().requested and stop.child().why() == "SIGTERM"


def test_the_client_package_imports_nothing_of_the_server():
    code = (
        "import sys, accelbench.client.agent, accelbench.client.job, accelbench.client.push;"
        "print([m for m in sys.modules if m.split('.')[0] in ('fastapi', 'sqlalchemy', 'alembic', 'uvicorn')"
        " or m.startswith('accelbench.service')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
