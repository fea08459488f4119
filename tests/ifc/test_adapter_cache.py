"""The interceptor's kept graph, labels and identifier index follow the session: a new
artifact, an erasure rewrite and a forget commit each change the next decision exactly
as a decision on a graph built from the store would."""

from __future__ import annotations

from tests.support.ifc_agents import ATTACKER, INJECTION, say, setup

from unsee import RevocationEvent
from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import Artifact, ArtifactType
from unsee.middleware.store import Batch
from unsee.plugins.ifc import evaluate

SINKS = ["send_money.recipient"]
LAUNDERED = ATTACKER.lower().replace(" ", "")  # how the scripted model wrote it into its call
OTHER = "FR14 2004 1010 0505 0001 3M02 606"


def decide(u, recipient):
    """The interceptor's decision, checked against the reference pipeline on a fresh graph."""
    ifc = u.ifc_interceptor
    d = ifc.decision_for("s", "send_money", {"recipient": recipient, "amount": 1}, ifc.sinks)
    u.flush()
    contents = u.store.contents("s")
    g = ProvenanceGraph(u.store.artifacts("s"), u.store.checkpoints("s"), content_of=contents.get, session_id="s")
    assert d == evaluate(g, "send_money", {"recipient": recipient, "amount": 1}, SINKS,
                         revoked=ifc.revoked("s"), reset_at_trusted_sources=True)
    return d.action


def test_a_new_artifact_is_in_the_next_decision(tmp_path):
    u, agent, sent, _ = setup(tmp_path)
    say(agent, "check my inbox")
    assert decide(u, ATTACKER) == "block" and decide(u, OTHER) == "allow"
    g = u.graph("s")
    last = list(g)[-1]
    mem = Artifact(id="mem-late", session_id="s", type=ArtifactType.MEMORY_READ, seq=10_000, parents=(last.id,),
                   source_ids=("memory:notes/1",), content_hash="h-mem-late")
    u.store.submit(Batch(session_id="s", content={"mem-late": f"Landlord moved to {OTHER}"}))
    u.store.submit(Batch(session_id="s", artifacts=[mem]))
    assert decide(u, OTHER) == "block"
    assert u._graphs.stats["extended"] >= 1  # the graph grew, it was not rebuilt


def test_an_erasure_rewrite_is_in_the_next_decision(tmp_path):
    u, agent, sent, _ = setup(tmp_path)
    say(agent, "check my inbox")
    assert decide(u, ATTACKER) == "block"

    def scrub(text):
        for form in (ATTACKER, LAUNDERED):
            text = text.replace(form, "[erased]")
        return text

    assert u.store.erasure.rewrite_texts("s", scrub)  # the record keeps its hashes; only the texts change
    assert decide(u, ATTACKER) == "allow"


def test_a_forget_commit_is_in_the_next_decision(tmp_path):
    u, agent, sent, _ = setup(tmp_path)
    say(agent, "check my inbox")
    assert decide(u, ATTACKER) == "block" and sent == []
    report = u.forget("s", RevocationEvent(target=INJECTION, raised_by="detector"), strategy="B9")
    assert report.committed
    assert decide(u, ATTACKER) == "allow"  # nothing in the session carries it any more
    say(agent, "pay GB82 WEST 1234 5698 7654 32")  # the session goes on; decisions follow it
    assert decide(u, "GB82 WEST 1234 5698 7654 32") == "allow"
