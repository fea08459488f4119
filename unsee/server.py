"""``unsee serve``: an HTTP endpoint that accepts revocation events.

External detectors and platforms POST ``{"session_id": ..., "event":
<RevocationEvent JSON>, "strategy": "B7"}`` to ``/v1/revocations`` with
``Authorization: Bearer <token>`` (the scheme in any case; the token is
compared in constant time). ``GET /v1/health`` says the server is up. Answers:

- 200 with the forget report: the only answer after which anything changed;
  forget runs only after auth, the whole body and validation.
- 401 (with ``WWW-Authenticate: Bearer``): missing or wrong token.
- 400: body not JSON (an empty one included), bad Content-Length, both
  Content-Length and Transfer-Encoding, a malformed chunk.
- 411: POST without Content-Length and not chunked.
- 413: body over ``MAX_BODY`` (1 MiB), refused on its Content-Length before it
  is read, or while a chunked body is read.
- 408: the body stalled past the read timeout (``read_timeout``, 10 s; a
  connection stalled anywhere else is just closed).
- 422: the request does not validate (with pydantic's reasons), unknown strategy.
- 404: unknown path, unknown session, target not there.
- 405 (with ``Allow``): a known path with another method.
- 409: target ambiguous, recording incomplete, session busy.
- 501: a transfer coding other than chunked.
- 503: no agent to replay through; the store or the Docker daemon unreachable,
  a replay recorded incompletely because of it (nothing committed), or a commit
  interrupted by it (journaled: posting the same event again finishes it);
- 502: the agent's own model, tool or store raised during the replay
  (``ReplayFailed``: nothing changed; the answer names the replayed turn);
  500: anything else (logged).

Answers given without reading the body close the connection; ``100 Continue``
is sent only once the body is wanted. A client that disconnects mid-request
costs a debug log line, not a traceback. HTTP/1.1 with keep-alive otherwise.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unsee.jsonhttp import JSONHandler, JSONServer
from unsee.middleware.errors import (AmbiguousTarget, IncompleteSession, InvalidArgument, SessionBusy,
                                     SessionNotFound, StoreUnavailable, TargetNotFound)
from unsee.plugins.forget import (AgentCannotReplay, AgentUnknown, CommitInterrupted, NotDerived, ReplayFailed,
                                  ReplayIncomplete, RevocationEvent, Strategy, TargetRemains, UnknownStrategy)
from unsee.sandbox.errors import DaemonLost

log = logging.getLogger("unsee.server")
MAX_BODY = 1 << 20

if TYPE_CHECKING:
    from unsee.core import Unsee


class RevocationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_id: str = Field(min_length=1)
    event: RevocationEvent
    #: a code of the strategy table (unknown: 422 from the operator's ``UnknownStrategy``)
    strategy: str = Strategy.UNSEE.code


_STATUS = [
    ((SessionNotFound, TargetNotFound), HTTPStatus.NOT_FOUND),
    ((AmbiguousTarget, IncompleteSession, SessionBusy, TargetRemains, NotDerived), HTTPStatus.CONFLICT),
    ((UnknownStrategy, InvalidArgument, NotImplementedError), HTTPStatus.UNPROCESSABLE_ENTITY),
    ((AgentUnknown, AgentCannotReplay, StoreUnavailable, CommitInterrupted, ReplayIncomplete, DaemonLost),
     HTTPStatus.SERVICE_UNAVAILABLE),
    ((ReplayFailed,), HTTPStatus.BAD_GATEWAY),
]


def _bearer(header: str | None) -> bytes:
    """The credentials of ``Authorization: Bearer <token>``; the scheme is case-insensitive (RFC 7235)."""
    scheme, _, credentials = (header or "").strip().partition(" ")
    return credentials.strip().encode() if scheme.lower() == "bearer" else b""


def make_server(u: Unsee, token: str, host: str = "127.0.0.1", port: int = 8765, agent: Any = None,
                read_timeout: float = 10.0) -> JSONServer:
    if not token:
        raise InvalidArgument("unsee serve needs a token (--token or UNSEE_SERVE_TOKEN)")
    expected = token.encode()
    lock = threading.Lock()  # one forget at a time: they replace whole sessions

    class Handler(JSONHandler):
        protocol_version = "HTTP/1.1"  # keep-alive for detectors that post many events
        timeout = read_timeout
        routes = {"/v1/health": {"GET": "health"}, "/v1/revocations": {"POST": "revoke"}}

        def health(self):
            self._send(200, {"status": "ok"})

        def revoke(self):
            if not hmac.compare_digest(_bearer(self.headers.get("Authorization")), expected):
                return self._send(401, {"error": "missing or invalid bearer token"}, {"WWW-Authenticate": "Bearer"})
            raw = self.read_body(MAX_BODY)  # HTTPError (411/400/413/408) and ClientGone end the request here
            try:
                payload = json.loads(raw)
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

    return JSONServer((host, port), Handler)


def serve_in_thread(u: Unsee, token: str, host: str = "127.0.0.1", port: int = 0, agent: Any = None,
                    read_timeout: float = 10.0) -> JSONServer:
    """Start the server in a daemon thread; returns it (``server.server_address`` has the port)."""
    server = make_server(u, token, host, port, agent, read_timeout)
    threading.Thread(target=server.serve_forever, name="unsee-serve", daemon=True).start()
    return server
