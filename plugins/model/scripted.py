"""A scripted chat model: a policy function instead of a neural network.

The model plugin's other LangChain chat model, beside :class:`LocalChatModel`:
where that one decodes with the local runtime, this one asks a policy
``policy(messages, tool_names) -> AIMessage``. For tests, the evaluation
harness (``unsee.eval``: the forgetting stand-in, the AgentDojo adapter's
injection-following agent) and the demo on machines without the local model.
Its output is a pure function of the conversation (deterministic), it
supports ``bind_tools`` and parallel tool calls, and it says what it is in
``_llm_type`` so recorded spans name it (gen_ai.provider.name = "scripted").
Exported by the face: ``from unsee.plugins.model import ScriptedChatModel,
Policy, call_id`` (it needs langchain-core, imported on first use).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, PrivateAttr

__all__ = ["Policy", "ScriptedChatModel", "call_id"]

Policy = Callable[[Sequence[BaseMessage], Sequence[str]], AIMessage]


def call_id(messages: Sequence[BaseMessage], index: int = 0) -> str:
    """Deterministic tool-call id from the conversation so far."""
    h = hashlib.sha256()
    for m in messages:
        h.update(type(m).__name__.encode())
        h.update(str(m.content).encode())
    return f"call_{h.hexdigest()[:10]}_{index}"


class ScriptedChatModel(BaseChatModel):
    """``policy(messages, tool_names) -> AIMessage``; ids and tool-call ids are derived
    from the conversation so replaying the same conversation gives the same output."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    policy: Policy
    tool_names: tuple[str, ...] = ()
    model_name: str = "scripted-policy"
    #: number each answer's message and tool-call ids with this model's call count: behind a
    #: context window, identical prompts must still give distinct messages (LangGraph merges
    #: messages by id), as a real model's random ids do
    distinct_ids: bool = False
    #: the call count (shared by the copies ``bind_tools`` makes)
    _calls: Any = PrivateAttr(default_factory=lambda: itertools.count(1))

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _get_ls_params(self, stop=None, **kwargs) -> dict[str, Any]:
        return {"ls_provider": "scripted", "ls_model_name": self.model_name, "ls_model_type": "chat"}

    def bind_tools(self, tools, **kwargs) -> "ScriptedChatModel":
        names = tuple(getattr(t, "name", None) or (t.get("name") if isinstance(t, dict) else str(t)) for t in tools)
        return self.model_copy(update={"tool_names": names})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        msg = self.policy(messages, self.tool_names)
        if msg.id is None:
            msg = msg.model_copy(update={"id": "scripted-" + call_id(messages)[5:]})
        if self.distinct_ids:
            n = next(self._calls)
            msg = msg.model_copy(update={"id": f"{msg.id}-{n}", "tool_calls": [
                {**c, "id": f"{c.get('id')}-{n}"} for c in msg.tool_calls or []]})
        return ChatResult(generations=[ChatGeneration(message=msg)])
