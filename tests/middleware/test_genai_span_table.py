"""The agent's own spans against the GenAI semantic conventions' names, one row per span kind
(``open-telemetry/semantic-conventions-genai``, main as of 2026-10: ``gen-ai-agent-spans.md``,
``gen-ai-spans.md``): the span name's format, ``gen_ai.operation.name`` and the attributes the
conventions require or recommend there. A real agent (LangChain ``create_agent``, the scripted
model, a real tool) recorded through a bring-your-own tracer provider."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.recording_agents import make_agent, say
from unsee import Unsee

# (agent name given to create_agent, span kind) -> (span name, operation, attributes: value or ... for any)
CASES = [
    pytest.param(None, "invoke_agent", "invoke_agent",
                 {"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "scripted",
                  "gen_ai.conversation.id": "t"}, ("gen_ai.agent.name", "gen_ai.agent.id"), id="agent-unnamed"),
    pytest.param("Support Desk", "invoke_agent", "invoke_agent Support Desk",
                 {"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "scripted",
                  "gen_ai.agent.name": "Support Desk", "gen_ai.conversation.id": "t"}, ("gen_ai.agent.id",),
                 id="agent-named"),
    pytest.param(None, "chat", "chat scripted-policy",
                 {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "scripted",
                  "gen_ai.request.model": "scripted-policy", "gen_ai.conversation.id": "t",
                  "gen_ai.usage.input_tokens": ..., "gen_ai.usage.output_tokens": ...}, (), id="chat"),
    pytest.param(None, "execute_tool", "execute_tool lookup",
                 {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                  "gen_ai.tool.call.id": ..., "gen_ai.tool.type": "function", "gen_ai.conversation.id": "t"}, (),
                 id="execute_tool"),
]


@pytest.mark.parametrize(("agent_name", "op", "span_name", "attrs", "absent"), CASES)
def test_agent_spans_carry_the_conventions_names(tmp_path, agent_name, op, span_name, attrs, absent):
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    u = Unsee(home=tmp_path, tracer_provider=tp)
    agent = make_agent(u, InMemorySaver(), name=agent_name)
    say(agent, "t", "look at T1")
    say(agent, "t", "thanks")  # (a second run: its agent span has the provider from its start)
    u.flush()
    spans = [s for s in exporter.get_finished_spans() if s.attributes.get("gen_ai.operation.name") == op]
    assert spans and {s.name for s in spans} == {span_name}
    for s in spans:
        for k, v in attrs.items():
            assert k in s.attributes, (s.name, k)
            if v is not ...:
                assert s.attributes[k] == v, (s.name, k, s.attributes[k])
        assert not [k for k in absent if k in s.attributes], s.name
