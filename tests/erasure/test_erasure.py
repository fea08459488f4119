"""Issue 12's correctness bars on real SQLite files, a real sandbox and real agents:
after forget + close no copy of the target remains on any route, the history keeps
only the counterfactual world, nothing else is lost, crashes are finished by a rerun."""

import json
import shutil

import pytest
from langchain_core.messages import HumanMessage

from tests.support.erasure_agents import SECRET, TURNS, build, live, raw_copies, run
from tests.support.erasure_checks import CFG, history_holding, world
from unsee import RevocationEvent
from unsee.plugins.erasure import NotForgotten, read_receipt, verify_signature
from unsee.plugins.forget import InjectedCrash, crash_at

def test_forget_erases_every_route_and_signs_a_receipt(recorded):
    home, u, agent, close = recorded
    assert sum(raw_copies(home).values()) > 20  # the retention inversion, before
    n_before, holding_before = history_holding(agent)
    assert holding_before > 0
    report = u.forget("t1", RevocationEvent(target=SECRET))
    assert report.committed and report.erased_clean and report.receipt
    n_after, holding_after = history_holding(agent)
    assert holding_after == 0 and n_after > 0
    receipt = read_receipt(report.receipt)
    assert verify_signature(receipt, trusted_public_pem=(home / "receipt.pub").read_text())
    assert SECRET not in json.dumps(receipt.model_dump(mode="json"))
    routes = {r.name: r for r in receipt.routes}
    assert {"langgraph.checkpoints", "langgraph.store", "unsee.records", "unsee.ledger", "sandbox",
            "home.other-files"} <= set(routes)
    assert all(r.copies_after == 0 for r in receipt.routes)
    assert routes["langgraph.checkpoints"].copies_before > 0 and routes["sandbox"].copies_before > 0
    assert u.audit("t1", SECRET).clean
    # the agent goes on from the counterfactual state
    out = agent.invoke({"messages": [HumanMessage("What card do you have?")]}, CFG)
    assert SECRET not in repr(out["messages"])
    close()
    assert raw_copies(home) == {}  # a plain grep of every file under the home


def test_time_travel_never_brings_it_back(recorded):
    home, u, agent, close = recorded
    u.forget("t1", RevocationEvent(target=SECRET))
    snaps = list(agent.get_state_history(CFG))
    for snap in snaps:
        out = agent.invoke({"messages": [HumanMessage("status?")]}, snap.config)
        assert SECRET not in repr(out["messages"])


def test_erasure_changes_nothing_but_the_record(tmp_path):
    """The live world after forget+erase equals the one after forget alone (B7 = B5 under a
    deterministic policy), and the checkpoints before the fork are kept as they were."""
    worlds = {}
    for erase in (False, True):
        home = tmp_path / f"e{erase}"
        home.mkdir()
        u, agent, close = build(home)
        run(agent, "t1")
        prefix = {s.config["configurable"]["checkpoint_id"]: s.values
                  for s in agent.get_state_history(CFG) if SECRET not in repr(s.values)}
        u.forget("t1", RevocationEvent(target=SECRET), erase=erase)
        worlds[erase] = world(home, u, agent)
        if erase:
            kept = {s.config["configurable"]["checkpoint_id"]: s.values for s in agent.get_state_history(CFG)}
            early = [cid for cid in prefix if cid in kept]
            assert early and all(kept[cid] == prefix[cid] for cid in early)
        close()
    assert worlds[True] == worlds[False]
    assert worlds[True][1] and worlds[True][2] and worlds[True][3]  # store item, sandbox file, ledger facts


@pytest.mark.parametrize("step", ["erase:langgraph.checkpoints", "erase:history:staged", "erase:history:swapping",
                                  "erase:langgraph.store", "erase:unsee.records", "erase:unsee.ledger",
                                  "erase:sandbox", "erase:home.other-files"])
def test_crash_at_each_step_is_finished_by_a_rerun(recorded, step):
    home, u, agent, close = recorded
    event = RevocationEvent(target=SECRET)
    with crash_at(step), pytest.raises(InjectedCrash):
        u.forget("t1", event)
    # never a tainted live state, at any point
    assert SECRET not in repr(live(agent))
    result = u.erase("t1", event)
    assert result.clean, [(r.route, r.copies, r.notes) for r in result.after.routes if r.copies]
    assert history_holding(agent)[1] == 0
    close()
    assert raw_copies(home) == {}


def test_second_forget_after_an_erasure(recorded):
    home, u, agent, close = recorded
    u.forget("t1", RevocationEvent(target=SECRET))
    agent.invoke({"messages": [HumanMessage("Please look up T2.")]}, CFG)
    report = u.forget("t1", RevocationEvent(target="kettle leaks"))
    assert report.committed and report.erased_clean
    assert "kettle" not in repr(live(agent)) and SECRET not in repr(live(agent))
    assert history_holding(agent)[1] == 0
    assert "noted" in repr(live(agent))  # the other turns are still there
    close()
    assert raw_copies(home) == {} and raw_copies(home, b"kettle leaks") == {}


def test_erase_later_and_from_a_kept_record(recorded):
    """forget(erase=False) keeps the old record (B-strategy comparisons); erase() later scrubs it."""
    home, u, agent, close = recorded
    event = RevocationEvent(target=SECRET)
    u.forget("t1", event, erase=False)
    assert history_holding(agent)[1] > 0 and not u.audit("t1", SECRET).clean
    result = u.erase("t1", SECRET)  # the text, as audit takes it: a new event, the latest replay is used
    assert result.clean and history_holding(agent)[1] == 0
    close()
    assert raw_copies(home) == {}


@pytest.mark.parametrize("crash", [None, "erase:history:staged", "erase:langgraph.checkpoints"])
def test_turns_taken_after_the_forget_are_kept(recorded, crash):
    """The session goes on between the forget and its erasure (or between a crash and the rerun):
    those turns are computed from the counterfactual state and stay, on top of the rewritten history."""
    home, u, agent, close = recorded
    event = RevocationEvent(target=SECRET)
    if crash is None:
        u.forget("t1", event, erase=False)
    else:
        with crash_at(crash), pytest.raises(InjectedCrash):
            u.forget("t1", event)
    agent.invoke({"messages": [HumanMessage("My new address is 12 Elm St.")]}, CFG)
    before = live(agent)
    result = u.erase("t1", event)
    assert result.clean and live(agent) == before and "12 Elm St" in repr(before)
    assert history_holding(agent)[1] == 0
    agent.invoke({"messages": [HumanMessage("Thanks.")]}, CFG)  # and it goes on from there
    close()
    assert raw_copies(home) == {}


def test_erasure_of_a_session_with_several_forgets(recorded):
    """Two forgets that kept their record: the first erasure rewrites the history for both,
    oldest first (the second replay forked inside the first one's scratch thread); each
    erasure scrubs the other routes of its own target."""
    home, u, agent, close = recorded
    first, second = RevocationEvent(target=SECRET), RevocationEvent(target="I prefer email")
    u.forget("t1", first, erase=False)
    u.forget("t1", second, erase=False)
    result = u.erase("t1", second)
    assert result.clean
    assert history_holding(agent)[1] == 0  # SECRET: gone from the history with the first rewrite
    assert u.erase("t1", first).clean and u.audit("t1", SECRET).clean
    assert history_holding(agent)[1] == 0 and "prefer email" not in repr(list(agent.get_state_history(CFG)))
    assert "Please look up T1." in repr(live(agent))  # the other turns are kept
    close()
    assert raw_copies(home) == {} and raw_copies(home, b"I prefer email") == {}


def test_bad_input_changes_nothing(recorded):
    home, u, agent, close = recorded
    u.flush()  # (the runs' records are written by then: a run returns before they are)
    snapshot = {p: (home / p).stat().st_size for p in raw_copies(home)}
    with pytest.raises(NotForgotten):  # erasure never replaces a forget
        u.erase("t1", RevocationEvent(target=SECRET))
    with pytest.raises(ValueError):
        u.erase("", RevocationEvent(target=SECRET))
    with pytest.raises(NotForgotten):  # a text is the target, as audit takes it
        u.erase("t1", SECRET)
    with pytest.raises(ValueError):
        u.erase("t1", "")
    with pytest.raises(ValueError):
        u.erase("t1", 4417)
    with pytest.raises(ValueError):  # it would name the journal and receipt files
        u.erase("t1", RevocationEvent(target=SECRET, event_id="../../escape"))
    with pytest.raises(LookupError):
        u.erase("nope", RevocationEvent(target=SECRET))
    with pytest.raises(ValueError):
        u.forget("t1", RevocationEvent(target=SECRET), erase="yes")
    assert history_holding(agent)[1] > 0
    assert {p: (home / p).stat().st_size for p in raw_copies(home)} == snapshot


@pytest.mark.parametrize("variant", ["user_input", "memory", "summarized"])
def test_variants(tmp_path, variant):
    home = tmp_path / variant
    home.mkdir()
    u, agent, close = build(home, summarize=variant == "summarized")
    turns = list(TURNS)
    if variant == "user_input":
        turns[1] = f"My card is {SECRET}, please look up T2."
    if variant == "memory":
        agent.store.inner.put(("mem", "dana"), "card", {"text": f"card {SECRET}"})
        turns[1] = "Please look up T2."
    run(agent, "t1", turns + (["What else?", "Anything more?"] if variant == "summarized" else []))
    report = u.forget("t1", RevocationEvent(target=SECRET))
    assert report.erased_clean, report.receipt
    assert history_holding(agent)[1] == 0
    close()
    assert raw_copies(home) == {}


def test_encrypted_history_is_shredded(tmp_path):
    home = tmp_path / "enc"
    home.mkdir()
    u, agent, close = build(home, encrypted=True)
    run(agent, "t1")
    assert not any(k.startswith("langgraph.sqlite") for k in raw_copies(home))  # ciphertext only
    old = u.keystore.kids_of("t1")
    report = u.forget("t1", RevocationEvent(target=SECRET))
    assert report.erased_clean
    assert not set(old) & set(u.keystore.kids_of("t1"))  # every old key destroyed
    assert u.keystore.threads() == ["t1"]  # the scratch and staging threads' keys too
    assert history_holding(agent)[1] == 0
    receipt = json.loads(open(report.receipt).read())
    shred = [n for r in receipt["routes"] for n in r["notes"] if "keys destroyed" in n]
    assert shred and shred[0].split(": ")[1].startswith("0")  # the destroyed key bytes are in no file
    close()
    assert raw_copies(home) == {}


def test_a_sandbox_that_stores_nothing(tmp_path):
    """The python backend keeps snapshots in memory: no stored copy, nothing to fail on."""
    home = tmp_path / "py"
    home.mkdir()
    u, agent, close = build(home, sandbox="python")
    run(agent, "t1")
    report = u.forget("t1", RevocationEvent(target=SECRET))
    assert report.erased_clean
    close()


@pytest.mark.docker
def test_docker_snapshots_and_images_are_erased(tmp_path):
    home = tmp_path / "docker"
    home.mkdir()
    u, agent, close = build(home, sandbox="docker")
    run(agent, "t1")
    before = u.audit("t1", SECRET)
    assert next(r for r in before.routes if r.route == "sandbox").copies > 0
    report = u.forget("t1", RevocationEvent(target=SECRET))
    after = u.audit("t1", SECRET)
    assert report.erased_clean and after.clean, [(r.route, r.byte_copies) for r in after.routes if r.copies]
    # the counterfactual's sandbox still works and holds the (clean) case note
    env = u.environments.env("t1")
    assert SECRET.encode() not in env.read_file("case/notes.txt")
    close()
    shutil.rmtree(home / "sandboxes", ignore_errors=True)
    assert raw_copies(home) == {}


async def test_async_forget_erase_audit_leave_the_loop_free(recorded):
    import asyncio

    home, u, agent, close = recorded
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    t = asyncio.create_task(ticker())
    report = await u.aforget("t1", RevocationEvent(target=SECRET))
    assert report.erased_clean and (await u.aaudit("t1", SECRET)).clean
    assert (await u.aerase("t1", RevocationEvent(target=SECRET))).clean
    t.cancel()
    assert ticks > 10  # the loop kept running during the replay and the erasure


async def test_every_action_has_an_async_twin(recorded):
    home, u, agent, close = recorded
    actions = ("forget", "erase", "erase_subject", "retention", "audit", "surface", "view", "export_otlp",
               "export_jaeger_json")
    assert all(callable(getattr(u, f"a{name}", None)) for name in actions)
    assert (await u.asurface(agent=agent, marker=SECRET)) is not None
    assert (await u.aview("t1", detect=False))["graph"]["artifacts"]
    assert await u.aexport_jaeger_json("t1", home / "t1.json") > 0
