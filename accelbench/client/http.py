"""The one HTTP client of a results server's API (``/api/v1``), used by push, run --push, submit, job, result
and the agent.

What an answer means, whoever asks::

    2xx                      the answer's JSON (None for 204)
    409                      Conflict: the state on the server does not allow it (a job that is no longer
                             this runner's, a runner name taken, a finished job cancelled)
    401, 403, other 4xx      BadInputError naming the status and the server's one-line error (exit 2)
    other 5xx                ServerError (exit 4): the server's own trouble, try again later
    no answer, 502/503/504   retried for ``retry_s`` seconds (0: not at all), then Unreachable (a ServerError)

Bodies are JSON; every error the server sends is ``{"error": "one line"}`` (docs/service.md). ``answer``
reads a 2xx answer as its typed model (``accelbench.answers``); one that does not fit is a ServerError.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from accelbench.errors import BadInputError, ServerError

if TYPE_CHECKING:
    from accelbench.answers import Answer as TypedAnswer

TIMEOUT_S = 30.0
RETRY_S = 300.0  # how long the agent and push keep retrying a server that does not answer (a restart, a blip)
RETRIED = (502, 503, 504)  # a proxy in front of a restarting server, or the server's own "busy, retry"
A = TypeVar("A", bound="TypedAnswer")


class Conflict(Exception):
    """409: the server's state does not allow the call (for an agent: the job is not its job any more)."""


class Unreachable(ServerError):
    """The results server did not answer (within ``retry_s`` when retrying)."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any


class ServerClient:
    """One results server: its URL, the token, how long to keep retrying while it is down.

    ``scope`` names the token scope the caller needs; a 401/403 says which to give."""

    def __init__(self, server: str, token: str | None, *, retry_s: float = 0.0, scope: str = "") -> None:
        import httpx

        if not server.startswith(("http://", "https://")):
            raise BadInputError(f"--server {server!r}: give the server's URL, e.g. http://127.0.0.1:8080")
        self.url, self.retry_s, self.scope = server.rstrip("/"), retry_s, scope
        # whether the last call was sent again after a failure that may have come after the server did it (no
        # answer, or one cut short): an idempotent call's answer then may count what its first sending stored
        self.resent = False
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.client = httpx.Client(base_url=self.url + "/api/v1", headers=headers, timeout=TIMEOUT_S)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> ServerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, path: str, body: Any = None, *, timeout_s: float = TIMEOUT_S) -> Any:
        """The answer's JSON; the table in the module docstring for everything else."""
        return self.request(method, path, body, timeout_s=timeout_s).body

    def answer(
        self, model: type[A], method: str, path: str, body: Any = None, *, timeout_s: float = TIMEOUT_S
    ) -> A:
        """The 2xx answer read as ``model`` (what the server's route answers: accelbench/answers.py)."""
        return read_answer(
            model, self.call(method, path, body, timeout_s=timeout_s), f"{self.url}/api/v1{path}"
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout_s: float = TIMEOUT_S,
        label: str = "",
        accept: tuple[int, ...] = (),
    ) -> Answer:
        """Like ``call`` with the status kept; a status in ``accept`` is returned rather than raised.
        ``label`` names what was sent in a refusal (a file), instead of the URL."""
        import httpx

        deadline, delay = time.monotonic() + self.retry_s, 0.5
        self.resent = maybe_done = False
        while True:
            try:
                self.resent = maybe_done
                response = self.client.request(method, path, json=body, timeout=timeout_s)
                if response.status_code not in RETRIED or response.status_code in accept:
                    return self._answer(response, path, label, accept)
                why = f"HTTP {response.status_code}: {_error(response)}"
            except httpx.TransportError as err:
                why = f"{type(err).__name__}: {err}"
                # not connected: nothing was sent; anything else may have reached the server
                maybe_done = maybe_done or not isinstance(err, httpx.ConnectError | httpx.ConnectTimeout)
                self.resent = maybe_done
            if time.monotonic() + delay > deadline:
                waited = f" for {self.retry_s:.0f} s" if self.retry_s else ""
                raise Unreachable(f"results server {self.url} is not reachable{waited} ({why})")
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _answer(self, response: Any, path: str, label: str, accept: tuple[int, ...]) -> Answer:
        status = response.status_code
        if status == 204:
            return Answer(status, None)
        if status < 400 or status in accept:
            try:
                return Answer(status, response.json())
            except ValueError:
                return Answer(status, None)
        message = _error(response)
        if status == 409:
            raise Conflict(message)
        if status >= 500:
            raise ServerError(f"results server {self.url} failed ({status}): {message}")
        hint = ""
        if status in (401, 403) and "runner secret" not in message:  # a secret is not the token's fault
            hint = (
                f" (give a {self.scope + '-scoped ' if self.scope else ''}token: --token or ACCELBENCH_TOKEN)"
            )
        raise BadInputError(
            f"{label or self.url + '/api/v1' + path}: the server refused it ({status}): {message}{hint}"
        )


def read_answer(model: type[A], payload: Any, where: str) -> A:
    """``payload`` as ``model``; an answer that does not fit (another server, another version) is one line."""
    from pydantic import ValidationError

    from accelbench.documents import describe_error

    try:
        return model.model_validate(payload)
    except ValidationError as err:
        raise ServerError(
            f"{where}: the results server's answer is not the {model.__name__} expected: {describe_error(err)}"
        ) from None


def _error(response: Any) -> str:
    """The server's one-line ``error``, else the start of whatever it sent."""
    try:
        payload = response.json()
    except ValueError:
        return " ".join(response.text[:200].split())
    if isinstance(payload, dict) and payload.get("error"):
        return str(payload["error"])
    return " ".join(str(payload)[:200].split())
