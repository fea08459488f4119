"""A short target (four digits) that is also a part of a message's random id.

LangChain and LangGraph name every message and tool call by a random id; a target of hex
digits is a part of about one UUID in 3,900 without being in the message. The forget's
check, the history rewrite and the value-level audit read no names: such a session is
forgotten and erased like any other (B7 == B5, computed independently), and only the
byte-level count, which cannot tell a name from a copy, still sees the digits.
"""

import json

import pytest
from langchain_core.messages import HumanMessage

from tests.support.erasure_agents import TURNS, build, live
from unsee import RevocationEvent

TARGET = "5521"  # the order number of TURNS[3]


def named_run(agent, at: int, thread: str = "t1") -> None:
    """TURNS, the user message of turn ``at`` under an id that holds TARGET."""
    for n, text in enumerate(TURNS):
        mid = f"00000000-0000-4000-8000-0000{TARGET if n == at else 1000 + n}0000"
        agent.invoke({"messages": [HumanMessage(text, id=mid)]}, {"configurable": {"thread_id": thread}})


@pytest.mark.parametrize("at", [1, 3, 5])  # before the target's entry, at it (its message is sanitized), after it
def test_a_target_in_a_message_id_is_forgotten_and_erased(tmp_path, at):
    # the reference: the same agent from scratch, the target's message without it
    home = tmp_path / "b5"
    home.mkdir()
    u, agent, close = build(home)
    named_run(agent, at)
    report = u.forget("t1", RevocationEvent(target=TARGET), "B5", erase=False)
    assert report.committed
    reference = live(agent)
    close()

    home = tmp_path / "b7"
    home.mkdir()
    u, agent, close = build(home)
    named_run(agent, at)
    report = u.forget("t1", RevocationEvent(target=TARGET), "B7")
    assert report.committed and not report.errors, report.errors
    assert live(agent) == reference
    assert not any(TARGET in text for _, text, _ in live(agent))
    routes = {r["name"]: r for r in json.loads(open(report.receipt).read())["routes"]}
    # every value is clean; the checkpoint file's bytes still hold the id the user's message has
    assert all(r["value_copies_after"] in (0, None) for r in routes.values())
    if at != 3:
        assert routes["langgraph.checkpoints"]["copies_after"] > 0
    close()


def _id_whose_artifact_holds(target: str) -> str:
    """A message id (not holding ``target``) whose recorded artifact's id does."""
    import itertools
    import uuid

    from unsee.middleware.hashing import short_id

    return next(m for m in (str(uuid.UUID(int=i)) for i in itertools.count(1))
                if target in short_id("in", m) and target not in m)


@pytest.mark.parametrize("strategy", ["B5", "B7"])
def test_a_target_in_the_id_of_a_recorded_input_is_not_in_the_run_input(tmp_path, strategy):
    """A run's recorded input names its messages by their artifact ids: a later run's input whose
    name holds the target is given again whole (its message included), not cut at the digits."""
    worlds = []
    for name in (None, _id_whose_artifact_holds(TARGET)):
        home = tmp_path / f"{strategy}{name is not None}"
        home.mkdir()
        u, agent, close = build(home)
        for n, text in enumerate(TURNS):  # the input after the target's entry gets that name
            agent.invoke({"messages": [HumanMessage(text, id=name if n == 4 else None)]},
                         {"configurable": {"thread_id": "t1"}})
        report = u.forget("t1", RevocationEvent(target=TARGET), strategy, erase=False)
        assert report.committed
        worlds.append(live(agent))
        close()
    assert worlds[0] == worlds[1]


def test_a_reference_is_no_occurrence():
    from unsee.middleware.graph import ProvenanceGraph
    from unsee.middleware.records import Artifact, ArtifactType
    from unsee.middleware.run_inputs import is_ref, payload_text
    from unsee.plugins.forget.sanitize import sanitize_value

    body = {"kind": "input", "keys": {"messages": [{"$artifact": f"in-aa{TARGET}bb"}], "note": "plain"}}
    run = Artifact(id="run-1", type=ArtifactType.RUN_INPUT, session_id="s", seq=1, step=1, turn=1,
                   content_hash="h", source_ids=("user",))
    g = ProvenanceGraph([run], [], content_of={"run-1": payload_text(body)}.get, session_id="s")
    assert g.occurrences(TARGET) == []
    said = {**body, "keys": {**body["keys"], "note": f"order {TARGET}"}}
    g = ProvenanceGraph([run], [], content_of={"run-1": payload_text(said)}.get, session_id="s")
    assert [a.id for a in g.occurrences(TARGET)] == ["run-1"]
    assert sanitize_value(said, TARGET, keep=is_ref)["keys"] == {"messages": [{"$artifact": f"in-aa{TARGET}bb"}],
                                                                 "note": "order "}
