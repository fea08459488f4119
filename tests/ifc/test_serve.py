"""unsee serve: revocation events over HTTP, authenticated and validated."""

import http.client
import json
import logging
import socket
import time
import urllib.error
import urllib.request

import pytest
from pydantic import BaseModel

from tests.support.ifc_agents import INJECTION, say, setup
from unsee.server import serve_in_thread


def post(port, body, token="s3cret", raw=None):
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/revocations", data=data, method="POST",
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {token}"} if token else {})})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture
def served(tmp_path):
    u, agent, sent, _ = setup(tmp_path, mode="audit")
    say(agent, "check my inbox")
    server = serve_in_thread(u, "s3cret", agent=agent)
    yield u, agent, server.server_address[1]
    server.shutdown()
    server.server_close()
    u.close()


def live(agent):
    return repr(agent.get_state({"configurable": {"thread_id": "s"}}).values["messages"])


def test_rejects_bad_tokens_and_malformed_events_without_side_effects(served):
    u, agent, port = served
    before = live(agent)
    good = {"session_id": "s", "event": {"target": INJECTION, "raised_by": "detector"}}
    assert post(port, good, token=None)[0] == 401
    assert post(port, good, token="wrong")[0] == 401
    assert post(port, None, raw=b"{not json")[0] == 400
    status, body = post(port, {"session_id": "s", "event": {"target": "  "}})
    assert status == 422 and body["details"]
    assert post(port, {"session_id": "s", "event": {"target": "x", "raised_by": "martian"}})[0] == 422
    assert post(port, {"session_id": "s", "event": {"target": "x"}, "extra": 1})[0] == 422
    assert post(port, {"session_id": "nope", "event": {"target": "x"}})[0] == 404
    assert post(port, {"session_id": "s", "event": {"target": "not there"}})[0] == 404
    assert live(agent) == before


def test_accepts_a_valid_event_and_forgets(served):
    u, agent, port = served
    status, report = post(port, {"session_id": "s", "event": {"target": INJECTION, "raised_by": "detector"}})
    assert status == 200 and report["committed"] and report["strategy"] == "B7"
    assert "INFORMATION" not in live(agent)


# --- HTTP over raw sockets, against a server whose forget only records (so nothing slow runs) ---

GOOD = json.dumps({"session_id": "s", "event": {"target": "x", "raised_by": "detector"}}).encode()


class Recorder:
    def __init__(self):
        self.calls = []

    def forget(self, session_id, event, strategy, agent=None):
        self.calls.append((session_id, event.target, strategy))
        return Report(committed=True)


class Report(BaseModel):
    committed: bool


@pytest.fixture
def stub():
    u = Recorder()
    server = serve_in_thread(u, "s3cret", read_timeout=0.5)
    yield u, server.server_address[1]
    server.shutdown()
    server.server_close()


def request(method="POST", path="/v1/revocations", headers=(), body=b"", auth="Bearer s3cret"):
    lines = [f"{method} {path} HTTP/1.1", "Host: t", *([f"Authorization: {auth}"] if auth else []), *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def exchange(port, data):
    """Send raw bytes; the one response, parsed: (status, headers, JSON body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        r = http.client.HTTPResponse(s)
        r.begin()
        return r.status, r.headers, json.loads(r.read())


def until_closed(s):
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def chunked(*parts):
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def test_client_that_disconnects_mid_body_costs_one_log_line_and_no_traceback(stub, capfd, caplog):
    u, port = stub
    caplog.set_level(logging.DEBUG, logger="unsee.http")
    # the second body is a whole valid request: a short read must not reach forget because it parses
    for body in (b"0123456789", GOOD):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(request(headers=["Content-Length: 1000"], body=body))
    deadline = time.monotonic() + 5
    while len([r for r in caplog.records if r.name.startswith("unsee")]) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # room for a second line, were there one
    ours = [r for r in caplog.records if r.name.startswith("unsee")]
    assert [r.levelno for r in ours] == [logging.DEBUG, logging.DEBUG]  # one line per request
    assert all("closed after" in r.getMessage() and r.exc_info is None for r in ours)
    assert "Traceback" not in capfd.readouterr().err
    assert u.calls == []


def test_stalled_connections_are_closed_by_the_read_timeout(stub):
    u, port = stub
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # stalls inside the headers
        s.sendall(b"POST /v1/revocations HTTP/1.1\r\nHost: t\r\n")
        assert until_closed(s) == b""  # (the client's own 5 s timeout would raise instead)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # stalls inside the body
        s.sendall(request(headers=["Content-Length: 100"], body=GOOD[:10]))
        answer = until_closed(s)
        assert answer.startswith(b"HTTP/1.1 408") and b"Connection: close" in answer
    assert u.calls == []


def test_body_limits_and_framing(stub):
    u, port = stub
    big = ["Content-Type: application/json", "Content-Length: 50000000"]
    status, headers, _ = exchange(port, request(headers=big))  # answered before any body byte is sent
    assert status == 413 and headers["Connection"] == "close"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # no "100 Continue" for a refused body
        s.sendall(request(headers=[*big, "Expect: 100-continue"]))
        assert until_closed(s).startswith(b"HTTP/1.1 413")
    # a client that sends the whole body before reading (urllib) still gets the 413, not a broken pipe:
    # the server drains a little before closing, since closing with unread input resets the connection
    assert post(port, None, raw=b" " * (8 << 20))[0] == 413
    assert exchange(port, request())[0] == 411
    for bad in ("-5", "abc", "1_0", "+10", "10, 11"):
        assert exchange(port, request(headers=[f"Content-Length: {bad}"]))[0] == 400, bad
    assert exchange(port, request(headers=["Content-Length: 0"]))[0] == 400  # an empty body is not JSON
    both = ["Content-Length: 5", "Transfer-Encoding: chunked"]  # two framings: how requests get smuggled
    assert exchange(port, request(headers=both, body=b"0\r\n\r\n"))[0] == 400
    assert exchange(port, request(headers=["Transfer-Encoding: gzip"]))[0] == 501
    assert u.calls == []


def test_chunked_bodies_are_decoded_and_limited(stub):
    u, port = stub
    te = ["Transfer-Encoding: chunked"]
    body = chunked(GOOD[:7], GOOD[7:30], GOOD[30:]).replace(b"0\r\n\r\n", b"0\r\nX-Trailer: 1\r\n\r\n")
    status, _, report = exchange(port, request(headers=te, body=body.replace(b"\r\n", b";ext=1\r\n", 1)))
    assert status == 200 and report == {"committed": True} and u.calls == [("s", "x", "B7")]
    assert exchange(port, request(headers=te, body=b"zz\r\nab\r\n0\r\n\r\n"))[0] == 400
    assert exchange(port, request(headers=te, body=b"2\r\nabXX0\r\n\r\n"))[0] == 400
    status, headers, _ = exchange(port, request(headers=te, body=b"%x\r\n" % (2 << 20)))  # declared, not sent
    assert status == 413 and headers["Connection"] == "close"
    over = chunked(*[b" " * (256 << 10)] * 5)
    assert exchange(port, request(headers=te, body=over))[0] == 413
    assert len(u.calls) == 1


def test_methods_paths_and_keep_alive(stub):
    u, port = stub
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    cases = [*[(m, "/v1/revocations", 405, "POST") for m in ("GET", "PUT", "DELETE", "PATCH")],
             ("POST", "/v1/health", 405, "GET"), ("GET", "/nope", 404, None), ("POST", "/nope", 404, None),
             ("GET", "/v1/health", 200, None), ("GET", "/v1/health?x=1", 200, None)]
    for method, path, status, allow in cases:
        conn.request(method, path)
        r = conn.getresponse()
        r.read()
        assert (r.status, r.headers.get("Allow")) == (status, allow), (method, path)
        assert r.headers.get("Connection") != "close"  # no body was sent: the connection stays usable
    conn.request("GET", "/v1/health", b"GET /smuggled HTTP/1.1\r\n\r\n")  # a body nobody reads
    r = conn.getresponse()
    assert r.status == 200 and r.headers["Connection"] == "close"  # so it is not taken for a request
    r.read()
    conn.request("POST", "/v1/revocations", GOOD, {"Authorization": "Bearer s3cret"})
    assert conn.getresponse().status == 200 and len(u.calls) == 1
    conn.close()


def test_bearer_scheme_is_case_insensitive_and_401_says_bearer(stub):
    u, port = stub
    for auth in ("bearer s3cret", "BEARER   s3cret"):
        assert exchange(port, request(auth=auth, headers=[f"Content-Length: {len(GOOD)}"], body=GOOD))[0] == 200
    for auth in ("Bearer wrong", "Basic s3cret", "Bearers3cret", "bearer", None):
        status, headers, _ = exchange(port, request(auth=auth, headers=[f"Content-Length: {len(GOOD)}"], body=GOOD))
        assert status == 401 and headers["WWW-Authenticate"] == "Bearer", auth
        assert headers["Connection"] == "close"  # the body went unread
    assert len(u.calls) == 2
