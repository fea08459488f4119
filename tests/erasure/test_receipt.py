"""Signed erasure receipts: keys, signing, tampering, files."""

from __future__ import annotations

import json
import stat
import threading
from datetime import datetime, timedelta, timezone

import pytest

from unsee.middleware.errors import InvalidArgument
from unsee.plugins.erasure.errors import ReceiptInvalid, ReceiptKeyInvalid
from unsee.plugins.erasure.receipt import (
    Receipt,
    RouteReceipt,
    SigningKey,
    canonical_bytes,
    read_receipt,
    sign_receipt,
    verify_signature,
    write_receipt,
)


@pytest.fixture
def key(tmp_path):
    return SigningKey.load_or_create(tmp_path / "home")


def make(key: SigningKey, **over) -> Receipt:
    fields = dict(
        unsee_version="0.1.0",
        event_id="evt-1",
        target_hash="hmac-sha256:" + "ab" * 16,
        sessions=["s1", "s2"],
        routes=[
            RouteReceipt(name="checkpoints", method="vacuum", copies_before=3, copies_after=0, files={"a.db": "00"}),
            RouteReceipt(name="records", method="rewrite", copies_before=1, copies_after=0, notes=["ok"]),
        ],
        unreachable=["provider logs"],
        created_at=datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc),
        public_key=key.public_pem(),
    )
    return Receipt(**{**fields, **over})


def test_sign_and_verify_round_trip(key):
    receipt = make(key)
    signed = sign_receipt(receipt, key)
    assert receipt.signature is None and signed.signature
    assert verify_signature(signed)
    assert verify_signature(signed, trusted_public_pem=key.public_pem())
    assert not verify_signature(receipt)  # unsigned


@pytest.mark.parametrize(
    "tamper",
    [
        lambda r: r.routes[0].__dict__.update(copies_after=1),
        lambda r: r.routes[1].__dict__.update(name="other"),
        lambda r: r.routes[0].files.update({"b.db": "11"}),
        lambda r: r.__dict__.update(target_hash="hmac-sha256:" + "cd" * 16),
        lambda r: r.__dict__.update(sessions=["s1"]),
        lambda r: r.__dict__.update(unreachable=[]),
        lambda r: r.__dict__.update(created_at=r.created_at + timedelta(seconds=1)),
        lambda r: r.__dict__.update(signature=r.signature[:-4] + "AAA="),
        lambda r: r.__dict__.update(signature="not base64!"),
    ],
)
def test_any_change_breaks_the_signature(key, tamper):
    signed = sign_receipt(make(key), key)
    tampered = signed.model_copy(deep=True)
    tamper(tampered)
    assert not verify_signature(tampered)


def test_a_receipt_signed_by_another_key_fails_when_pinned(tmp_path, key):
    other = SigningKey.load_or_create(tmp_path / "other")
    forged = sign_receipt(make(other), other)
    assert verify_signature(forged)  # self-consistent
    assert not verify_signature(forged, trusted_public_pem=key.public_pem())
    # swapping in the trusted key without re-signing does not help
    assert not verify_signature(forged.model_copy(update={"public_key": key.public_pem()}))


def test_signing_with_a_key_other_than_the_embedded_one_is_refused(tmp_path, key):
    other = SigningKey.load_or_create(tmp_path / "other")
    with pytest.raises(InvalidArgument):
        sign_receipt(make(key), other)


def test_garbled_embedded_key_does_not_verify(key):
    signed = sign_receipt(make(key), key)
    assert not verify_signature(signed.model_copy(update={"public_key": "garbage"}))
    with pytest.raises(InvalidArgument):
        verify_signature(signed, trusted_public_pem="garbage")


def test_canonical_bytes_ignore_the_signature_and_key_order(key):
    receipt = make(key)
    signed = sign_receipt(receipt, key)
    assert canonical_bytes(receipt) == canonical_bytes(signed)
    data = json.loads(canonical_bytes(receipt))
    assert data["signature"] is None and list(data) == sorted(data)
    assert b'": ' not in canonical_bytes(receipt) and b", " not in canonical_bytes(receipt)


def test_key_files(tmp_path):
    home = tmp_path / "home"
    first = SigningKey.load_or_create(home)
    second = SigningKey.load_or_create(home)
    assert first.public_pem() == second.public_pem()
    assert stat.S_IMODE((home / "receipt.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((home / "receipt.pub").stat().st_mode) == 0o644
    assert (home / "receipt.pub").read_text() == first.public_pem()
    assert (home / "receipt.key").read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert [p.name for p in home.iterdir() if p.name.endswith(".tmp")] == []


def test_concurrent_creators_share_one_key(tmp_path):
    home = tmp_path / "home"
    keys, barrier = [], threading.Barrier(8)

    def create():
        barrier.wait()
        keys.append(SigningKey.load_or_create(home).public_pem())

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(keys)) == 1 and (home / "receipt.pub").read_text() == keys[0]


def test_a_garbled_key_file_is_a_typed_error(tmp_path):
    (tmp_path / "receipt.key").write_text("not a key")
    with pytest.raises(ReceiptKeyInvalid):
        SigningKey.load_or_create(tmp_path)
    assert (tmp_path / "receipt.key").read_text() == "not a key"  # left as it was


def test_write_and_read_keep_the_signature_valid(tmp_path, key):
    signed = sign_receipt(make(key), key)
    path = tmp_path / "receipts" / "evt-1.json"
    write_receipt(signed, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert path.read_text().startswith("{\n  ")
    back = read_receipt(path)
    assert back == signed and verify_signature(back, trusted_public_pem=key.public_pem())


def test_created_at_is_utc(key):
    local = datetime(2025, 1, 2, 5, 0, tzinfo=timezone(timedelta(hours=2)))
    assert make(key, created_at=local).created_at == datetime(2025, 1, 2, 3, 0, tzinfo=timezone.utc)
    assert make(key, created_at=local).created_at.utcoffset() == timedelta(0)
    with pytest.raises(ValueError):
        make(key, created_at=datetime(2025, 1, 2))


def test_read_missing_receipt(tmp_path):
    with pytest.raises(FileNotFoundError, match="no erasure receipt"):
        read_receipt(tmp_path / "nope.json")


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{not json",
        b"\xff\xfe",
        b"[]",
        b'{"version": 1}',
        "extra",
        "version",
        "negative",
    ],
)
def test_read_invalid_receipt(tmp_path, key, content):
    good = json.loads(make(key).model_dump_json())
    if content == "extra":
        content = json.dumps({**good, "surprise": 1}).encode()
    elif content == "version":
        content = json.dumps({**good, "version": 2}).encode()
    elif content == "negative":
        good["routes"][0]["copies_after"] = -1
        content = json.dumps(good).encode()
    path = tmp_path / "r.json"
    path.write_bytes(content)
    with pytest.raises(ReceiptInvalid) as info:
        read_receipt(path)
    assert isinstance(info.value, ValueError) and str(path) in str(info.value)


def test_forget_event_is_signed_only_when_set(key):
    """Receipts written before ``forget_event`` existed sign (and verify) the same bytes."""
    plain = make(key)
    assert b"forget_event" not in canonical_bytes(plain)
    linked = sign_receipt(make(key, event_id="evt-2", forget_event="evt-1"), key)
    assert b'"forget_event":"evt-1"' in canonical_bytes(linked) and verify_signature(linked)
    assert not verify_signature(linked.model_copy(update={"forget_event": "evt-9"}))
    assert not verify_signature(linked.model_copy(update={"forget_event": None}))


def _journals(u) -> list[str]:
    """The names of the home's erasure journals: files of the home, rows of a shared store."""
    from unsee.plugins.erasure.shared import shared_db

    db = shared_db(u.store)
    if db is not None:  # (UNSEE_TEST_STORE=postgres)
        return sorted(r[0] for r in db.execute("SELECT name FROM erasure_journals"))
    return sorted(p.stem for p in (u.home / "erasures").iterdir())


def test_re_erasing_a_clean_session_reuses_the_forgets_receipt(tmp_path):
    """``unsee erase`` makes a new event id each run: a clean session gets the forget's receipt
    back (same file, same event id, nothing written); a copy found again is erased under the new
    id and its receipt names the forget; once clean again, the forget's receipt stands."""
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from unsee import RevocationEvent, Unsee
    from unsee.plugins.model import ScriptedChatModel

    secret, home = "4417-2231", tmp_path / "home"
    u = Unsee(home=home)
    agent = create_agent(ScriptedChatModel(policy=lambda messages, tools: AIMessage(content="noted")), [],
                         checkpointer=InMemorySaver(), middleware=[u.middleware()])
    agent.invoke({"messages": [HumanMessage(f"my card is {secret}")]}, {"configurable": {"thread_id": "t1"}})
    try:
        report = u.forget("t1", RevocationEvent(target=secret))
        assert report.erased_clean and report.receipt
        forget_receipt = (home / "receipts" / f"{report.event_id}.json")
        written = forget_receipt.read_bytes()
        journals = _journals(u)
        again = u.erase("t1", RevocationEvent(target=secret))
        assert again.existing and again.clean and again.path == forget_receipt
        assert again.receipt.event_id == report.event_id
        assert [p.name for p in (home / "receipts").iterdir()] == [forget_receipt.name]
        assert forget_receipt.read_bytes() == written
        assert _journals(u) == journals  # no journal either

        (home / "stray.txt").write_text(f"a copy: {secret}")  # found again (audited, never erased)
        found = u.erase("t1", RevocationEvent(target=secret))
        assert not found.existing and not found.clean and found.path != forget_receipt
        assert found.receipt.forget_event == report.event_id
        assert verify_signature(read_receipt(found.path), trusted_public_pem=(home / "receipt.pub").read_text())
        (home / "stray.txt").unlink()
        assert u.erase("t1", RevocationEvent(target=secret)).path == forget_receipt
        assert len(list((home / "receipts").iterdir())) == 2
    finally:
        u.close()
