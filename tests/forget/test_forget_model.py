"""Theorem 1 and cache cleanliness on the real local CPU model (SmolLM2)."""

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from unsee import RevocationEvent, Unsee
from unsee.demo import ToolRouting

pytestmark = pytest.mark.model


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


SECRET = "4417-2231"
TURNS = [f"My card is {SECRET}. Please look up ticket T-1", "Thanks, what did you find?"]


def _session(tmp_path, name, model, temperature):
    u = Unsee(home=tmp_path / name)
    m = model.model_copy(update={"temperature": temperature})
    m._pool = model._pool  # same weights and session caches
    u.local_model = m

    @u.tool(effect="read")
    def lookup_ticket(ticket_id: str) -> str:
        """Look up a support ticket by id."""
        return "Ticket T-1: parcel delayed, refund pending."

    agent = create_agent(m, [lookup_ticket], system_prompt="You are support. Answer in one short sentence.",
                         middleware=[ToolRouting(), u.middleware()], checkpointer=InMemorySaver())
    thread = "s"  # the same session id in every world: seeds derive from (session, step)
    m.evict(thread)  # each world starts from a cold cache
    for text in TURNS:
        agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})
    return u, agent, m, thread


def _messages(agent, thread):
    msgs = agent.get_state({"configurable": {"thread_id": thread}}).values["messages"]
    return [(type(m).__name__, str(m.content), [(c["name"], c["args"]) for c in getattr(m, "tool_calls", []) or []])
            for m in msgs]


@pytest.mark.parametrize("temperature", [0.0, 0.8], ids=["greedy", "seeded-sampling"])
def test_b7_equals_b5_on_the_cpu_model(tmp_path, local_model, temperature):
    _b7_equals_b5(tmp_path, local_model, temperature)


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs CUDA")
@pytest.mark.parametrize("temperature", [0.0, 0.8], ids=["greedy", "seeded-sampling"])
def test_b7_equals_b5_on_the_gpu_model(tmp_path, gpu_local_model, temperature):
    """The same on the ExLlamaV2 backend (``bash scripts/gpu-check.sh b`` runs it)."""
    _b7_equals_b5(tmp_path, gpu_local_model, temperature)


def _b7_equals_b5(tmp_path, local_model, temperature):
    out = {}
    for strategy in ("B7", "B5"):
        u, agent, m, thread = _session(tmp_path, f"{strategy}-{temperature}", local_model, temperature)
        assert u.graph(thread).locate(SECRET), _messages(agent, thread)
        report = u.forget(thread, RevocationEvent(target=SECRET), strategy)
        assert report.committed and report.tokens_prefilled + report.tokens_decoded > 0
        out[strategy] = (_messages(agent, thread), report)
        # no trace in the live state, nor in the model's cache
        assert SECRET not in repr(out[strategy][0])
        cached = m.runtime.detokenize(list(m.pool.runtime(thread).tokens))
        assert SECRET not in cached and cached  # the cache holds the counterfactual context
        assert u.session(thread).tokenizer.startswith("model:")  # token spans from the model's tokenizer
        u.close()
    (b7, r7), (b5, r5) = out["B7"], out["B5"]
    assert b7 == b5
    assert r7.tokens_decoded <= r5.tokens_decoded
    assert r7.model_turns_decoded <= r5.model_turns_decoded


def test_each_model_turn_records_its_numerics_and_a_replay_under_others_says_so(tmp_path, local_model, monkeypatch):
    """The local model's numerics fingerprint (what its logits depend on) is recorded with each
    model turn; a replay whose runtime has another one notes it on the report."""
    u, agent, m, thread = _session(tmp_path, "numerics", local_model, 0.0)
    turns = [a for a in u.graph(thread) if a.type.value == "model_turn" and not a.attrs.get("unobserved")]
    assert turns and {a.attrs.get("numerics") for a in turns} == {m.numerics(thread)}
    report = u.forget(thread, RevocationEvent(target=SECRET), erase=False)
    assert not any("numerics differ" in n for n in report.notes)
    u2, agent2, m2, thread2 = _session(tmp_path, "numerics-2", local_model, 0.0)
    monkeypatch.setattr(type(m2), "numerics", lambda self, session=None: "backend=cpu;kernels=other")
    report = u2.forget(thread2, RevocationEvent(target=SECRET), erase=False)
    assert report.committed and any("numerics differ" in n and "kernels=other" in n for n in report.notes)
    u.close()
    u2.close()
