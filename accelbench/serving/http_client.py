"""The one HTTP client for what accelbench reads from a server (never the load itself, which goes out on
loadtests/connections.py's sockets): Triton's REST API through ``TritonHttp`` (readiness, server and model
metadata, model config, statistics, repository index), a Prometheus ``/metrics`` text (``get_text``) and an
OpenAI engine's ``/v1/models`` (``get_json``).

Every failure is one of these, each a ServerError (one line on stderr, exit 4), the URL first in its message:

    HttpError            base of this module's errors; ``url`` is the URL asked
    ├── Unreachable      no HTTP answer: refused, reset, timed out, unknown host, not a URL
    ├── HttpStatus       an answer with status >= 400: ``status``, ``reason`` and the server's own message
    └── NotJson          an answer whose body is not the JSON asked for

``request`` returns any status (a readiness probe reads 400 as "not ready", not as a failure); ``get_json``,
``post_json`` and ``get_text`` raise HttpStatus for it. Plain urllib: blocking in the CLI's process,
gevent-patched where Locust runs.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from accelbench.errors import ServerError

DEFAULT_TIMEOUT_S = 10.0


class HttpError(ServerError):
    """The server at ``url`` gave no usable answer."""

    def __init__(self, url: str, message: str) -> None:
        super().__init__(f"{url}: {message}")
        self.url = url


class Unreachable(HttpError):
    """No HTTP answer at all; ``reason`` is the socket's or resolver's own words."""

    def __init__(self, url: str, reason: object) -> None:
        super().__init__(url, f"unreachable ({reason})")
        self.reason = reason


class HttpStatus(HttpError):
    """An answer with status >= 400; ``message`` is the body's ``error`` field where it is JSON, else its text."""

    def __init__(self, url: str, status: int, reason: str, message: str) -> None:
        super().__init__(url, f"HTTP {status}: {message.strip()[:200]}")
        self.status, self.reason, self.message = status, reason, message


class NotJson(HttpError):
    """A successful answer whose body is not JSON (or not the JSON object a Triton route answers with)."""

    def __init__(self, url: str, what: str = "JSON") -> None:
        super().__init__(url, f"answer is not {what}")


@dataclass(frozen=True)
class Answer:
    """One HTTP answer, whatever its status."""

    status: int
    reason: str
    body: bytes

    @property
    def ok(self) -> bool:
        return self.status < 400

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def request(url: str, timeout_s: float = DEFAULT_TIMEOUT_S, body: bytes | None = None) -> Answer:
    """GET ``url`` (POST ``body`` when given) and return the answer whatever its status; Unreachable otherwise."""
    req = urllib.request.Request(url, data=body, method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return Answer(resp.status, str(resp.reason), resp.read())
    except urllib.error.HTTPError as err:
        return Answer(err.code, str(err.reason), err.read())
    except OSError as err:  # URLError is one, and so is a read that timed out
        raise Unreachable(url, getattr(err, "reason", None) or err) from None
    except (http.client.HTTPException, ValueError) as err:  # not HTTP on that port; not a URL
        raise Unreachable(url, err) from None


def _ok(url: str, answer: Answer) -> Answer:
    if answer.ok:
        return answer
    message: object = answer.text()
    with contextlib.suppress(ValueError, AttributeError):
        message = json.loads(str(message)).get("error", message)
    raise HttpStatus(url, answer.status, answer.reason, str(message))


def _json(url: str, answer: Answer) -> Any:
    try:
        return json.loads(_ok(url, answer).body)
    except ValueError:
        raise NotJson(url) from None


def get_json(url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    """The JSON document at ``url``."""
    return _json(url, request(url, timeout_s))


def post_json(url: str, body: bytes, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    """POST ``body`` and return the JSON answer (an empty body reads as null)."""
    answer = request(url, timeout_s, body)
    if answer.ok and not answer.body:
        return None
    return _json(url, answer)


def get_text(url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """The text at ``url`` (a Prometheus exposition)."""
    return _ok(url, request(url, timeout_s)).text()


def http_base(url: str) -> str:
    """``http://host:port`` from ``host:port`` or a URL with a path."""
    if "://" not in url:
        url = "http://" + url
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class TritonHttp:
    """Triton's HTTP/REST API at ``url`` (``http://host:port``; a path is kept, a trailing slash dropped).

    The model routes quote the model's name; ``timeout_s`` bounds each call unless the call gives its own.
    """

    def __init__(self, url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def _model(self, model: str) -> str:
        return f"{self.url}/v2/models/{urllib.parse.quote(model, safe='')}"

    def _timeout(self, timeout_s: float | None) -> float:
        return self.timeout_s if timeout_s is None else timeout_s

    def ready(self, timeout_s: float | None = None) -> bool:
        """``/v2/health/ready`` answers 200 (Unreachable while nothing listens)."""
        return request(f"{self.url}/v2/health/ready", self._timeout(timeout_s)).status == 200

    def metadata(self, timeout_s: float | None = None) -> dict[str, Any]:
        """The server's metadata (``name``, ``version``, ``extensions``)."""
        return _object(get_json(f"{self.url}/v2", self._timeout(timeout_s)), f"{self.url}/v2")

    def model_ready_status(self, model: str, timeout_s: float | None = None) -> int:
        """The HTTP status of the model's readiness route (200: ready)."""
        return request(f"{self._model(model)}/ready", self._timeout(timeout_s)).status

    def model_ready(self, model: str, timeout_s: float | None = None) -> bool:
        """Whether ``model`` is ready; Unreachable (naming the server) when the server does not answer at all."""
        try:
            return request(f"{self._model(model)}/ready", self._timeout(timeout_s)).ok
        except Unreachable as err:
            raise Unreachable(self.url, err.reason) from None

    def model_metadata(self, model: str, timeout_s: float | None = None) -> dict[str, Any]:
        """The model's metadata: its inputs and outputs with datatypes and shapes."""
        url = self._model(model)
        return _object(get_json(url, self._timeout(timeout_s)), url)

    def model_config(self, model: str, timeout_s: float | None = None) -> dict[str, Any]:
        """The served config in its JSON form."""
        url = f"{self._model(model)}/config"
        return _object(get_json(url, self._timeout(timeout_s)), url)

    def model_stats(self, model: str, timeout_s: float | None = None) -> dict[str, Any]:
        """The statistics extension's answer for ``model`` (cumulative counters, every version)."""
        url = f"{self._model(model)}/stats"
        return _object(get_json(url, self._timeout(timeout_s)), url)

    def repository_index(self, timeout_s: float | None = None) -> list[dict[str, Any]]:
        """The repository index: ``[{"name", "version", "state", "reason"}]``."""
        url = f"{self.url}/v2/repository/index"
        index = post_json(url, b"{}", self._timeout(timeout_s))
        return [entry for entry in index or [] if isinstance(entry, dict)]


def _object(doc: Any, url: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise NotJson(url, "a JSON object")
    return doc
