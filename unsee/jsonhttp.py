"""A JSON request handler base shared by ``unsee serve`` and the OpenAI-compatible server.

The stdlib handler leaves the careful parts to its subclasses; this one adds:
routing with 404/405 + ``Allow``; a per-connection read timeout; a body reader
(``read_body``) for Content-Length and chunked bodies with a size limit, that
answers 411/400/413/408/501 and sends ``100 Continue`` only once the body is
wanted; ``Connection: close`` plus a short drain after refusing a body it did
not read; and one log line, not a traceback, for a client that goes away.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

log = logging.getLogger("unsee.http")
_DIGITS = re.compile(r"[0-9]+")  # int() would also take "+5", " 5" and "1_000"
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_MAX_LINE = 4096  # a chunk-size or trailer line longer than this is not an honest one
_DRAIN_S = 1.0


class HTTPError(Exception):
    """An answer that replaces the handler's; the connection closes after it (the body may be unread)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.headers = status, headers or {}


class ClientGone(ConnectionError):
    """The client closed the connection before sending the whole request."""


class JSONServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # socketserver prints a ~40-line traceback to stderr; a socket failure is worth a line at
        # most, and a bug in a handler belongs in the log, where the operator's logging config applies.
        err = sys.exc_info()[1]
        if isinstance(err, OSError):
            log.debug("%s: connection failed: %r", client_address[0], err)
        else:
            log.exception("error serving %s", client_address[0])


class JSONHandler(BaseHTTPRequestHandler):
    server_version = "unsee"
    timeout = 10.0  # seconds one read or write may stall; StreamRequestHandler.setup applies it
    routes: dict[str, dict[str, str]] = {}  # path -> {method: name of the method that answers it}

    def setup(self):
        super().setup()
        self._drain_on_close = False

    def handle_one_request(self):
        self._body_done = self._expect_continue = False
        try:
            super().handle_one_request()
        except OSError as e:  # the client went away (or reset): one line, no traceback
            self.close_connection = True
            log.debug("%s: connection lost: %r", self.address_string(), e)

    def finish(self):
        if self._drain_on_close:
            self._drain()
        super().finish()

    def log_message(self, fmt, *args):  # route to logging, not stderr
        log.debug("%s " + fmt, self.address_string(), *args)

    def _dispatch(self):
        methods = self.routes.get(urlsplit(self.path).path)
        if methods is None:
            return self._send(404, {"error": "not found"})
        name = methods.get(self.command)
        if name is None:
            return self._send(405, {"error": f"{self.command} not allowed here"}, {"Allow": ", ".join(methods)})
        try:
            getattr(self, name)()
        except HTTPError as e:
            self._send(e.status, {"error": str(e)}, e.headers, close=True)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _dispatch

    def _send(self, status: int, body: dict, headers: dict[str, str] | None = None, close: bool = False) -> None:
        """Answer; the connection closes after it when asked to, or when the request's body went unread
        (its bytes would otherwise be taken for the next request)."""
        close = close or self._body_unread()
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if close:  # send_header also sets close_connection
            self.send_header("Connection", "close")
            self._drain_on_close = True
        self.end_headers()
        self.wfile.write(data)

    def _body_unread(self) -> bool:
        # Subclasses that read self.rfile themselves (openai_server) count as unread: they answer HTTP/1.0,
        # which closes anyway, and the drain then ends as soon as the client closes.
        return not self._body_done and (
            "Transfer-Encoding" in self.headers or (self.headers.get("Content-Length") or "0").strip() != "0")

    def handle_expect_100(self):
        # Defer "100 Continue" to read_body, so a request refused on its headers (401, 411, 413)
        # gets its final answer before the client sends the body.
        self._expect_continue = True
        return True

    def read_body(self, max_body: int) -> bytes:
        """The whole request body (Content-Length or chunked), at most ``max_body`` bytes.

        Raises HTTPError with the answer to send, or ClientGone."""
        te, cl = self.headers.get_all("Transfer-Encoding"), self.headers.get_all("Content-Length")
        if te and cl:  # two framings is how requests are smuggled past proxies: refuse
            raise HTTPError(400, "both Transfer-Encoding and Content-Length")
        if te and ",".join(te).strip().lower() != "chunked":
            raise HTTPError(501, "only Transfer-Encoding: chunked is supported")
        if not te:
            if not cl:
                raise HTTPError(411, "Content-Length (or Transfer-Encoding: chunked) required")
            if len({v.strip() for v in cl}) != 1 or not _DIGITS.fullmatch(cl[0].strip()):
                raise HTTPError(400, "bad Content-Length")
            digits = cl[0].strip().lstrip("0") or "0"  # int() refuses over 4300 digits: bound it first
            if len(digits) > 18 or int(digits) > max_body:
                raise HTTPError(413, f"body over {max_body} bytes")
        if self._expect_continue:
            self._expect_continue = False
            self.send_response_only(100)
            self.end_headers()
        try:
            data = self._read_chunked(max_body) if te else self._read_exact(int(digits))
        except TimeoutError:
            raise HTTPError(408, "request body timed out") from None
        self._body_done = True
        return data

    def _read_exact(self, n: int) -> bytes:
        data = self.rfile.read(n)
        if len(data) < n:  # a short body must never reach the handler: it may still parse
            raise ClientGone(f"closed after {len(data)} of {n} body bytes")
        return data

    def _read_line(self) -> bytes:
        line = self.rfile.readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE:
            raise HTTPError(400, "chunk line too long")
        if not line.endswith(b"\n"):
            raise ClientGone("closed inside a chunked body")
        return line.rstrip(b"\r\n")

    def _read_chunked(self, max_body: int) -> bytes:
        parts, total = [], 0
        while True:
            size = self._read_line().split(b";", 1)[0].strip()  # ";..." are chunk extensions: ignored
            if not _HEX.fullmatch(size):
                raise HTTPError(400, "malformed chunk size")
            if not (n := int(size, 16)):
                break
            if (total := total + n) > max_body:  # checked before reading, so nothing over the limit is buffered
                raise HTTPError(413, f"body over {max_body} bytes")
            parts.append(self._read_exact(n))
            if self._read_exact(2) != b"\r\n":
                raise HTTPError(400, "chunk not followed by CRLF")
        while line := self._read_line():  # trailer fields: read and dropped, counted against the limit
            if (total := total + len(line)) > max_body:
                raise HTTPError(413, f"body over {max_body} bytes")
        return b"".join(parts)

    def _drain(self):
        """Briefly read and drop what the client still sends before closing.

        Closing a socket with unread input makes the kernel answer with a TCP reset, which can
        destroy our answer (a 413, say) before the client has read it."""
        try:
            self.connection.shutdown(socket.SHUT_WR)  # the answer is complete: the client sees EOF now
            end = time.monotonic() + min(_DRAIN_S, self.timeout or _DRAIN_S)
            while (left := end - time.monotonic()) > 0:
                self.connection.settimeout(left)
                if not self.connection.recv(65536):
                    break
        except OSError:
            pass
