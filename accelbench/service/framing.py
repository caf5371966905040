"""Request framing a reverse proxy can trust (RFC 9112 §6): a request whose head leaves its body's length open
to two readings is refused with 400 and the connection closed, before the HTTP parser reads it.

h11 (what uvicorn runs here) already refuses signed, hex and differing lengths, unknown codings, NUL and
whitespace before a colon; it accepts what this module refuses (issue 40, HIGH 3):

- ``Content-Length`` together with ``Transfer-Encoding`` (§6.1: "ought to be handled as an error"; a proxy
  that frames by the length forwards a second, smuggled request inside the body);
- more than one ``Content-Length``, identical or not, and a list (``5, 5``);
- a ``Transfer-Encoding`` other than one ``chunked``, or any in an HTTP/1.0 request (§6.1: framing faulty);
- obs-fold (a line starting with a space or tab, §5.2), bare LF line ends (§2.2), control characters.

``faulty_framing`` is pure (bytes in, reason out); ``GuardedH11Protocol`` is uvicorn's h11 protocol with an
h11 connection that checks every new request's head before parsing it, pipelined ones included.
"""

from __future__ import annotations

import re
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from accelbench.service.errors import log

_HEAD_END = re.compile(rb"\n\r?\n")  # where h11 ends a head: it accepts a bare LF
_BARE_LF = re.compile(rb"(?<!\r)\n")
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")  # tab is allowed inside a value
HEAD_SCAN_BYTES = 64 * 1024  # over h11's 16 KiB head limit: a longer head is h11's own 400


def request_head(buffer: bytes) -> bytes | None:
    """The request head at the start of ``buffer`` (blank lines before it skipped), its terminator included;
    None while it is incomplete."""
    data = buffer[:HEAD_SCAN_BYTES].lstrip(b"\r\n")
    end = _HEAD_END.search(data)
    return data[: end.end()] if end else None


def faulty_framing(head: bytes) -> str | None:
    """Why a request head's framing is refused (one line, ASCII), or None. ``head`` ends with its blank line."""
    if _BARE_LF.search(head):
        return "a line of the request head ends in a bare LF, not CRLF"
    request_line, *fields = head.removesuffix(b"\r\n\r\n").split(b"\r\n")
    lengths: list[bytes] = []
    codings: list[bytes] = []
    for line in fields:
        if line[:1] in (b" ", b"\t"):
            return "a header line continues the one before it (obs-fold)"
        if _CONTROL.search(line):
            return "a header line holds a control character"
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip(b" \t"):
            return "a header line is not 'name: value'"
        kind = name.lower()
        if kind == b"content-length":
            lengths.append(value.strip(b" \t"))
        elif kind == b"transfer-encoding":
            codings.append(value.strip(b" \t"))
    if lengths and codings:
        return "a request may not carry both Content-Length and Transfer-Encoding"
    if len(lengths) > 1:
        return "a request may carry one Content-Length"
    if lengths and not (lengths[0].isdigit() and lengths[0].isascii()):
        return "Content-Length is not one decimal number"
    if codings and not request_line.endswith(b" HTTP/1.1"):
        return "Transfer-Encoding is only understood in HTTP/1.1"
    if codings and (len(codings) > 1 or codings[0].lower() != b"chunked"):
        return "Transfer-Encoding must be exactly 'chunked'"
    return None


class FaultyFraming(h11.RemoteProtocolError):
    """Raised where h11 would parse a faulty head: uvicorn answers any RemoteProtocolError with 400 and
    closes."""


class _GuardedConnection(h11.Connection):
    refused: str | None = None

    def next_event(self) -> Any:
        if self.their_state is h11.IDLE:
            head = request_head(self.trailing_data[0])
            if head is not None and (why := faulty_framing(head)):
                self.refused = why
                raise FaultyFraming(why)
        return super().next_event()


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol whose connection refuses faulty framing (``uvicorn.Config(http=...)``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _GuardedConnection(h11.SERVER, self.conn._max_incomplete_event_size)

    def send_400_response(self, msg: str) -> None:
        why = getattr(self.conn, "refused", None)
        if why:
            log.warning("refused a request from %s: %s", self.client, why)
            msg = f"Invalid HTTP request received: {why}."
        super().send_400_response(msg)
