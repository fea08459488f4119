"""``unsee serve``: an HTTP endpoint that accepts revocation events.

External detectors and platforms POST ``{"session_id": ..., "event":
<RevocationEvent JSON>, "strategy": "B7"}`` to ``/v1/revocations`` with
``Authorization: Bearer <token>``. Answers: 200 with the forget report; 401
for a missing or wrong token; 400 for a body that is not JSON; 422 for one
that does not validate (with pydantic's reasons); 404 for an unknown session
or a target that is not there; 409 when the target is ambiguous, the
recording incomplete or the session busy. Nothing changes unless the answer
is 200. ``GET /v1/health`` says the server is up.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from http import HTTPStatus
from http.server import ThreadingHTTPServer
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unsee.jsonhttp import JSONHandler
from unsee.middleware.errors import (AmbiguousTarget, IncompleteSession, InvalidArgument, SessionBusy,
                                     SessionNotFound, TargetNotFound)
from unsee.plugins.replay.events import RevocationEvent
from unsee.plugins.replay.forget_errors import AgentUnknown, UnknownStrategy

log = logging.getLogger("unsee.server")
MAX_BODY = 1 << 20


class RevocationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_id: str = Field(min_length=1)
    event: RevocationEvent
    strategy: str = "B7"


_STATUS = [
    ((SessionNotFound, TargetNotFound), HTTPStatus.NOT_FOUND),
    ((AmbiguousTarget, IncompleteSession, SessionBusy), HTTPStatus.CONFLICT),
    ((UnknownStrategy, InvalidArgument, NotImplementedError), HTTPStatus.UNPROCESSABLE_ENTITY),
    ((AgentUnknown,), HTTPStatus.SERVICE_UNAVAILABLE),
]


def make_server(u: Any, token: str, host: str = "127.0.0.1", port: int = 8765, agent: Any = None) -> ThreadingHTTPServer:
    if not token:
        raise InvalidArgument("unsee serve needs a token (--token or UNSEE_SERVE_TOKEN)")
    expected = f"Bearer {token}".encode()
    lock = threading.Lock()  # one forget at a time: they replace whole sessions

    class Handler(JSONHandler):
        def do_GET(self):
            if self.path == "/v1/health":
                return self._send(200, {"status": "ok"})
            return self._send(404, {"error": "not found"})

        def do_POST(self):
            if self.path != "/v1/revocations":
                return self._send(404, {"error": "not found"})
            got = (self.headers.get("Authorization") or "").encode()
            if not hmac.compare_digest(got, expected):
                return self._send(401, {"error": "missing or invalid bearer token"})
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                return self._send(400, {"error": "bad Content-Length"})
            if length <= 0 or length > MAX_BODY:
                return self._send(400, {"error": f"body must be 1..{MAX_BODY} bytes of JSON"})
            try:
                payload = json.loads(self.rfile.read(length))
            except (ValueError, UnicodeDecodeError):
                return self._send(400, {"error": "body is not JSON"})
            try:
                req = RevocationRequest.model_validate(payload)
            except ValidationError as e:
                return self._send(422, {"error": "invalid revocation request",
                                        "details": json.loads(e.json(include_url=False, include_input=False))})
            try:
                with lock:
                    report = u.forget(req.session_id, req.event, req.strategy, agent=agent)
            except Exception as e:
                for types, status in _STATUS:
                    if isinstance(e, types):
                        return self._send(status, {"error": str(e), "type": type(e).__name__})
                log.exception("forget failed")
                return self._send(500, {"error": f"{type(e).__name__}: {e}"})
            return self._send(200, json.loads(report.model_dump_json()))

    return ThreadingHTTPServer((host, port), Handler)


def serve_in_thread(u: Any, token: str, host: str = "127.0.0.1", port: int = 0, agent: Any = None):
    """Start the server in a daemon thread; returns it (``server.server_address`` has the port)."""
    server = make_server(u, token, host, port, agent)
    threading.Thread(target=server.serve_forever, name="unsee-serve", daemon=True).start()
    return server
