"""unsee serve: revocation events over HTTP, authenticated and validated."""

import json
import urllib.error
import urllib.request

import pytest

from test_adapter import INJECTION, say, setup
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
