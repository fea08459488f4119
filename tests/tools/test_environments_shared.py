"""The session environments' catalog on a shared PostgreSQL store (issue 33): two Unsee objects
with different homes ("machines" A and B) on one database. A runs a session whose sandboxed write
tool files a secret; A's home is deleted (and, for Docker, A's images leave the daemon: its machine
is gone); at B the catalog knows A's snapshots (made at A's home), the forget's replay restores
the sandbox from the OCI registry (docker, local) or from the store itself (local, no registry),
and the erasure at B deletes the copies off the machine: the audit then finds none. Without a
registry, Docker snapshots stay on A's daemon: the forget at B is ``SnapshotElsewhere`` naming
A's home. Plus the pieces: the catalog's rows, the per-session repository name, the address check.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from unsee import Unsee
from unsee.middleware.errors import InvalidArgument
from unsee.plugins.forget import RevocationEvent
from unsee.plugins.model import ScriptedChatModel, call_id
from unsee.plugins.tools import SnapshotElsewhere, home_label

SECRET = "4417-2231"
TURNS = ["Hello, I'm Dana.", "Please look up T1.", "File it in my case.", "What is the status?"]
SESSION = "dana"


def policy(messages, tools):
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(content=f"Result: {last.content}")
    text = str(last.content)
    call = None
    if t := re.search(r"\bT\d\b", text):
        call = ("lookup", {"ticket": t.group(0)})
    elif "file it" in text.lower():
        found = [str(m.content) for m in messages if isinstance(m, ToolMessage) and str(m.content).startswith("ticket")]
        call = ("save_case", {"note": found[-1] if found else "nothing"})
    if call:
        return AIMessage(content="", tool_calls=[{"name": call[0], "args": call[1], "id": call_id(messages),
                                                  "type": "tool_call"}])
    seen = [str(x.content) for x in messages if isinstance(x, (HumanMessage, ToolMessage))]
    return AIMessage(content=f"Noted. So far: {' | '.join(seen[-3:])}")


def worker(home: Path, pg_url: str, backend: str, registry: str | None, saver):
    """(u, agent): a support agent whose sandboxed write files the looked-up ticket."""
    u = Unsee(home=home, sandbox=backend, store=pg_url, registry=registry or "none")

    @u.tool(effect="read")
    def lookup(ticket: str) -> str:
        """Look up a ticket."""
        return f"ticket {ticket}: card {SECRET} on file, blender broken"

    @u.tool(effect="write", sandboxed=True)
    def save_case(note: str, env) -> str:
        """File a note in the customer's case."""
        env.write_file("case/notes.txt", note.encode())
        return "saved case/notes.txt"

    agent = create_agent(ScriptedChatModel(policy=policy), [lookup, save_case], system_prompt="You are support.",
                         middleware=[u.middleware()], checkpointer=saver)
    return u, agent


def run_at_a(tmp_path: Path, pg_url: str, backend: str, registry: str | None, saver) -> str:
    """Machine A runs the session, then is gone: its home deleted, its Docker images removed.
    Returns A's home label (``host:path``)."""
    home = tmp_path / "A"
    u, agent = worker(home, pg_url, backend, registry, saver)
    for text in TURNS:
        agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": SESSION}})
    u.flush()
    assert SECRET in u.environments.env(SESSION).read_file("case/notes.txt").decode()
    label = home_label(home)
    owner = None
    if backend == "docker":
        from unsee.sandbox import owner_id

        owner = owner_id(home)
    u.close()
    if owner is not None:  # A's daemon is gone: nothing of A's stays on the (shared, here) daemon
        from unsee.sandbox.docker_env import cleanup

        report = cleanup(owner=owner)
        assert not report.failed, report.failed
    shutil.rmtree(home)
    return label


def sandbox_copies(report) -> dict[str, int]:
    route = next(r for r in report.routes if r.route == "sandbox")
    return {k: v for k, v in route.byte_copies.items() if v}


def forget_at_b(tmp_path: Path, pg_url: str, backend: str, registry: str | None, saver, a_label: str,
                where: str) -> None:
    """Machine B: the catalog knows A's snapshots, the forget restores them from ``where``
    ("registry" | "store"), the erasure deletes the copies there, the audit finds none."""
    u, agent = worker(tmp_path / "B", pg_url, backend, registry, saver)
    try:
        envs = u.environments
        envs.refresh(SESSION)
        snaps = envs.snapshots_of(SESSION)
        assert snaps and {envs.made_at(str(s)) for s in snaps} == {a_label}
        assert all(s.remote for s in snaps)  # every one went off A's machine
        if where == "store":
            assert all(s.remote.startswith("store:") for s in snaps)
        else:
            assert all(s.remote.startswith(f"{registry}/unsee/s-") and "@sha256:" in s.remote for s in snaps)
            assert len({s.remote.split("@")[0] for s in snaps}) == 1  # the session's own repository

        before = u.audit(SESSION, SECRET, agent=agent)
        held = sandbox_copies(before)
        off_machine = "in the shared store" if where == "store" else " remote "
        assert any(off_machine in k for k in held), held  # the copies off the machine are audited

        report = u.forget(SESSION, RevocationEvent(target=SECRET), agent=agent)
        assert report.committed, report
        if not report.erased_clean:  # (what remained, said)
            after = u.audit(SESSION, SECRET, agent=agent)
            pytest.fail(f"not erased clean: {[(r.route, r.byte_copies, r.value_copies, r.notes) for r in after.routes if r.copies or r.notes]}; notes: {report.notes}")
        note = envs.env(SESSION).read_file("case/notes.txt").decode()
        assert SECRET not in note and "ticket T1" in note  # the counterfactual's note, in B's sandbox

        receipt = json.loads(Path(report.receipt).read_text())
        # what the sandbox route did off the machine, said on the receipt
        notes = " ".join(n for r in receipt["routes"] if r["name"] == "sandbox" for n in r["notes"])
        assert (f"OCI registry {registry}" in notes) if where == "registry" else ("VACUUM FULL" in notes), notes
        after = u.audit(SESSION, SECRET, agent=agent)
        assert sandbox_copies(after) == {}
        assert all(r.copies == 0 for r in after.routes), [(r.route, r.byte_copies) for r in after.routes if r.copies]
    finally:
        u.close()


@pytest.mark.postgres
@pytest.mark.registry
def test_local_snapshots_restored_from_the_registry_on_another_machine(tmp_path, pg_url, registry):
    saver = InMemorySaver()  # (LangGraph's checkpointer: shared by both "machines")
    label = run_at_a(tmp_path, pg_url, "local", registry, saver)
    forget_at_b(tmp_path, pg_url, "local", registry, saver, label, "registry")


@pytest.mark.postgres
def test_local_snapshots_kept_in_the_store_without_a_registry(tmp_path, pg_url):
    saver = InMemorySaver()
    label = run_at_a(tmp_path, pg_url, "local", None, saver)
    forget_at_b(tmp_path, pg_url, "local", None, saver, label, "store")


@pytest.mark.postgres
def test_a_tarball_the_catalog_never_heard_of_is_found_and_erased(tmp_path, pg_url):
    """A worker that died between putting a snapshot's tarball into the store and writing its
    catalog row left a copy only the store knows of: erasure finds it by the environment's
    name, audits it and deletes it."""
    from unsee.sandbox.remote import pack_dir

    saver = InMemorySaver()
    label = run_at_a(tmp_path, pg_url, "local", None, saver)
    u, agent = worker(tmp_path / "B", pg_url, "local", None, saver)
    try:
        envs = u.environments
        envs.refresh(SESSION)
        env_id = envs.snapshots_of(SESSION)[0].env_id
        stray = tmp_path / "stray"
        (stray / "case").mkdir(parents=True)
        (stray / "case" / "notes.txt").write_text(f"half-made snapshot: {SECRET}")
        ref = envs.snapshot_store.put(f"{env_id}-999", pack_dir(stray))  # no catalog row
        assert ref not in {s.remote for s in envs.snapshots_of(SESSION)}
        held = sandbox_copies(u.audit(SESSION, SECRET, agent=agent))
        assert any(ref in k for k in held), held
        report = u.forget(SESSION, RevocationEvent(target=SECRET), agent=agent)
        assert report.committed and report.erased_clean, report
        assert not envs.snapshot_store.has(ref)
    finally:
        u.close()
    assert label


@pytest.mark.postgres
@pytest.mark.registry
@pytest.mark.docker
def test_docker_snapshots_pulled_from_the_registry_on_another_machine(tmp_path, pg_url, registry):
    saver = InMemorySaver()
    label = run_at_a(tmp_path, pg_url, "docker", registry, saver)
    forget_at_b(tmp_path, pg_url, "docker", registry, saver, label, "registry")


@pytest.mark.postgres
@pytest.mark.docker
def test_docker_without_a_registry_names_the_machine_that_had_the_snapshot(tmp_path, pg_url, caplog):
    saver = InMemorySaver()
    with caplog.at_level("WARNING", logger="unsee.environments"):
        label = run_at_a(tmp_path, pg_url, "docker", None, saver)
    assert any("stay on this machine" in r.getMessage() for r in caplog.records)  # said once, at A
    u, agent = worker(tmp_path / "B", pg_url, "docker", None, saver)
    try:
        with pytest.raises(SnapshotElsewhere) as raised:
            u.forget(SESSION, RevocationEvent(target=SECRET), agent=agent)
        assert isinstance(raised.value, LookupError)  # (what callers caught before)
        assert raised.value.home == label and label in str(raised.value)
        assert "registry" in str(raised.value)
    finally:
        u.close()


# -- the pieces ---------------------------------------------------------------------------------


@pytest.mark.postgres
def test_the_catalog_is_a_row_per_entry_shared_by_every_home(tmp_path, pg_url):
    """Two homes write the same catalog concurrently-safe (one row per entry); each snapshot says
    where it was made; ``stored()`` (a process without a sandbox) reads the store's catalog."""
    from unsee.plugins.tools import SessionEnvironments

    a = Unsee(home=tmp_path / "A", sandbox="local", store=pg_url)
    b = Unsee(home=tmp_path / "B", sandbox="local", store=pg_url)
    try:
        a.environments.env("s1").write_file("x.txt", b"A")
        ka = a.environments.snapshot_for_thread("s1")
        kb = b.environments.snapshot_for_thread("s2")  # B's session, written meanwhile
        assert not (tmp_path / "A" / "sandboxes" / "registry.json").exists()  # the store holds it
        rows = {r[0]: r[1] for r in a.store._db.execute("SELECT key, home FROM env_snapshots").fetchall()}
        assert rows[ka] == home_label(tmp_path / "A") and rows[kb] == home_label(tmp_path / "B")
        # each sees the other's session (read again when asked about it)
        b.environments.refresh("s1")
        assert str(b.environments.latest_snapshot("s1")) == ka
        assert b.environments.made_at(ka) == home_label(tmp_path / "A")
        stored = SessionEnvironments.stored(tmp_path / "C", db=a._shared_db())
        assert stored is not None and stored.snapshot_store is not None
        stored.refresh("s2")
        assert str(stored.latest_snapshot("s2")) == kb
        # a local snapshot's tarball is in the store, and reads back as files
        snap = a.environments.latest_snapshot("s1")
        assert snap.remote.startswith("store:")
        assert dict(a.environments.snapshot_store.files(snap.remote)) == {"x.txt": b"A"}
    finally:
        a.close()
        b.close()


def test_each_session_has_its_own_repository(tmp_path):
    from unsee.middleware.hashing import ContentHasher
    from unsee.plugins.tools import session_repository

    h = ContentHasher(b"k" * 32)
    r1, r2 = session_repository(h, "dana"), session_repository(h, "eve")
    assert re.fullmatch(r"unsee/s-[0-9a-f]{24}", r1) and r1 != r2
    assert session_repository(ContentHasher(b"k" * 32), "dana") == r1  # the same key: every worker alike
    assert "dana" not in r1


@pytest.mark.parametrize("bad", ["http://x/y", "host:port", "127.0.0.1:99999", "a b", ":5000", "ftp://x"])
def test_a_bad_registry_address_changes_nothing(tmp_path, bad, monkeypatch):
    monkeypatch.delenv("UNSEE_REGISTRY", raising=False)
    with pytest.raises(InvalidArgument, match="host\\[:port\\]"):
        Unsee(home=tmp_path / "h", sandbox="local", registry=bad)
    assert not (tmp_path / "h").exists()
    monkeypatch.setenv("UNSEE_REGISTRY", bad)
    with pytest.raises(InvalidArgument):
        Unsee(home=tmp_path / "h", sandbox="local")
    assert not (tmp_path / "h").exists()


def test_an_unanswering_registry_is_fine_until_the_first_snapshot(tmp_path):
    from unsee.sandbox import SandboxUnavailable

    u = Unsee(home=tmp_path / "h", sandbox="local", registry="127.0.0.1:9")  # nothing listens there
    try:
        assert u.registry == "127.0.0.1:9"
        with pytest.raises(SandboxUnavailable):
            u.environments.env("s")  # the initial snapshot is pushed: the registry is needed now
    finally:
        u.close()


def test_the_cli_takes_a_registry_like_a_store(tmp_path, monkeypatch):
    from unsee.cli import main

    monkeypatch.delenv("UNSEE_REGISTRY", raising=False)
    assert main(["--home", str(tmp_path / "h"), "--registry", "not a registry", "sessions"]) == 2
    assert not (tmp_path / "h").exists()


@pytest.mark.postgres
def test_concurrent_workers_never_overwrite_each_others_entries(tmp_path, pg_url):
    """Two homes snapshot their sessions at once: every entry of both is in the store after."""
    import threading

    homes = [Unsee(home=tmp_path / n, sandbox="local", store=pg_url) for n in ("A", "B")]
    keys: list[list[str]] = [[], []]

    def work(i: int) -> None:
        envs = homes[i].environments
        for n in range(12):
            session = f"{'ab'[i]}{n % 3}"
            envs.env(session).write_file("n.txt", str(n).encode())
            keys[i].append(envs.snapshot_for_thread(session))

    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rows = {r[0] for r in homes[0].store._db.execute("SELECT key FROM env_snapshots").fetchall()}
        assert set(keys[0]) | set(keys[1]) <= rows
        latest = dict(homes[0].store._db.execute("SELECT session, latest FROM env_sessions").fetchall())
        assert {latest[f"a{n}"] for n in range(3)} <= set(keys[0]) and {latest[f"b{n}"] for n in range(3)} <= set(keys[1])
    finally:
        for u in homes:
            u.close()


def _json_envs(tmp_path: Path):
    from unsee.plugins.tools import SessionEnvironments
    from unsee.sandbox import open_environment

    def factory():
        import uuid

        return open_environment("local", root=tmp_path / "sandboxes" / uuid.uuid4().hex[:8], keep=True)

    return SessionEnvironments(factory, registry=tmp_path / "sandboxes" / "registry.json")


def test_an_unknown_snapshot_is_snapshot_elsewhere_a_lookup_error(tmp_path):
    envs = _json_envs(tmp_path)
    try:
        envs.env("s")
        with pytest.raises(LookupError) as raised:
            envs.begin_replay("s-scratch", "s", "local:0123456789ab:3")
        assert isinstance(raised.value, SnapshotElsewhere) and raised.value.home == ""
        assert home_label(tmp_path) in str(raised.value)  # where this process looked
    finally:
        envs.close()


def test_a_snapshot_made_elsewhere_and_never_pushed_names_its_home(tmp_path):
    """The catalog knows it (another home wrote it), but its copy is gone with that machine."""
    import json as _json

    envs = _json_envs(tmp_path)
    try:
        envs.env("s").write_file("x.txt", b"x")
    finally:
        envs.close()  # (its final snapshot is the session's latest)
    data = _json.loads((tmp_path / "sandboxes" / "registry.json").read_text())
    key = data["latest"]["s"]
    data["made_at"][key] = "elsewhere:/srv/home-a"  # as if machine A had made it
    (tmp_path / "sandboxes" / "registry.json").write_text(_json.dumps(data))
    shutil.rmtree(data["snapshots"][key][3])  # A's copy is gone with A
    later = _json_envs(tmp_path)
    try:
        with pytest.raises(SnapshotElsewhere, match="elsewhere:/srv/home-a") as raised:
            later.env("s")  # its latest snapshot is that one
        assert raised.value.home == "elsewhere:/srv/home-a"
    finally:
        later.close()


def test_a_commit_rolled_forward_elsewhere_makes_the_settled_snapshot_latest(tmp_path):
    """settle_replay's key (journaled by the commit) becomes the session's latest in a process
    that never ran the replay; its sandbox then opens from there."""
    envs = _json_envs(tmp_path)
    try:
        envs.env("s").write_file("case.txt", b"old")
        envs.snapshot_for_thread("s")
        shadow = envs.begin_replay("s-scratch", "s", None)
        shadow.write_file("case.txt", b"new")
        final = envs.settle_replay("s-scratch")
        assert final and envs.settle_replay("nobody") is None
    finally:
        envs.close()  # (the replaying process dies before its end_replay)
    other = _json_envs(tmp_path)
    try:
        assert other.env("s").read_file("case.txt") == b"old"  # not yet rolled forward
        other.end_replay("s-scratch", commit=True, session="s", final=final)
        assert str(other.latest_snapshot("s")) == final
        assert other.env("s").read_file("case.txt") == b"new"
    finally:
        other.close()
