"""``LocalChatModel``: a LangChain chat model on a local runtime with per-session caches.

Usable as the ``model`` of ``langchain.agents.create_agent``. Each call:

1. resolves the session (LangGraph ``thread_id``) and the step;
2. templates the full prompt (tools described in the system message);
3. reuses the longest common token prefix with that session's cache, crops the
   rest and prefills only the new tokens;
4. decodes (greedy by default; ``temperature > 0`` samples with a generator
   seeded from ``(session, step)``), constrained by an xgrammar tool-call
   grammar when tools are bound. Under ``tool_choice="auto"`` the model first
   decides between a call and a text answer by scoring itself (see
   :meth:`LocalChatModel.decide_tool_call`); a call, once started, is always
   completed (decoding runs past ``max_tokens`` up to a hard cap);
5. returns an ``AIMessage`` whose ``response_metadata["unsee"]`` carries the
   cache handle and token offsets the recording middleware stores.

Session: ``session=`` kwarg > the model's ``session`` field > the run config's
``configurable["unsee_session"]`` or ``["thread_id"]`` (the config passed to
``invoke``, else ``langgraph.config.get_config()`` inside a graph) > "default".
Step: ``unsee_step=`` kwarg > ``configurable["unsee_step"]`` > the number of
messages in the prompt.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, PrivateAttr
from unsee.middleware.context import DEFAULT_SESSION, configurable, logical_session

from .errors import ToolCallParseError
from .grammar import (
    GrammarCache,
    ToolSpec,
    call_header,
    is_tool_call_text,
    normalize_tool_choice,
    parse_tool_calls,
    partial_call_name,
)
from .prompting import to_chat_messages
from .sampling import seed_for
from .sampling_params import SamplingParams
from .sessions import SessionPool


#: Default of ``LocalChatModel.auto_call_threshold`` (nats). Measured on
#: SmolLM2-135M (docs/model.md, development set): explicit requests for a tool
#: scored 3.8-9.8 (all but one question-form request above 5), chit-chat at
#: most 2.0, answers right after a tool result and thanks after one at most 3.8.
AUTO_CALL_THRESHOLD = 4.0
#: The content-free message the "auto" decision is calibrated against.
CONTENT_FREE = "N/A"
_DECISION_MEMO = 512


def tool_call_id(session: str, step: int | str, index: int, prompt: str = "") -> str:
    """Deterministic tool-call id for (session, step, index, the prompt's digest): the same
    prompt gives the same id (a replay of it, too), another prompt another id, even at the same
    step (a conversation a summary shortened reaches an earlier message count again, and two
    calls must never share an id: the record keys a call by it)."""
    key = f"unsee-call\x00{session}\x00{step}\x00{index}" + (f"\x00{prompt}" if prompt else "")
    return f"call_{hashlib.sha256(key.encode()).hexdigest()[:24]}"


def prompt_digest(tokens: Sequence[int]) -> str:
    """A short digest of a prompt's tokens (what tool-call ids are derived from)."""
    return hashlib.sha256(",".join(map(str, tokens)).encode()).hexdigest()[:16]


class LocalChatModel(BaseChatModel):
    """A chat model backed by a :class:`~.runtime.LocalRuntime`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    runtime: Any = Field(exclude=True)
    """The :class:`LocalRuntime` (weights + tokenizer); sessions spawn from it."""
    session: str | None = None
    """Explicit session override (else the LangGraph thread id)."""
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 256
    stop: list[str] | None = None
    token_budget: int | None = None
    """Total cached tokens over all sessions before idle ones are evicted (LRU)."""
    model_name: str = "smollm2-135m-instruct"
    tool_call_overrun: int | None = None
    """Extra tokens a started tool call may use past ``max_tokens`` to be
    completed (None: ``max(512, 3 * max_tokens)``); a call still unfinished at
    that hard cap comes back as an ``invalid_tool_call``."""
    auto_call_threshold: float = AUTO_CALL_THRESHOLD
    """Under ``tool_choice="auto"``: call a tool when the calibrated score of
    the best tool (nats, see :meth:`decide_tool_call`) exceeds this."""

    _pool: SessionPool = PrivateAttr()
    _grammars: GrammarCache | None = PrivateAttr(default=None)
    _decisions: "OrderedDict[str, dict[str, Any]]" = PrivateAttr(default_factory=OrderedDict)
    _decisions_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def model_post_init(self, __context: Any) -> None:
        super().model_post_init(__context)
        self._pool = SessionPool(self.runtime, self.token_budget)

    @classmethod
    def from_spec(
        cls,
        spec: str | Path = "cpu",
        home: Path | str | None = None,
        *,
        cache_dir: Path | str | None = None,
        progress: Callable[[str], None] | None = None,
        **fields: Any,
    ) -> "LocalChatModel":
        """Load a runtime with :func:`~.loader.load_runtime` and wrap it.

        The weights come from the per-user model cache (``cache_dir`` >
        ``$UNSEE_MODEL_CACHE`` > ``~/.unsee/models``), converted once;
        ``home`` is accepted for compatibility and not used for them.
        ``progress`` is told when that one-time conversion starts and ends.
        """
        from .loader import load_runtime

        return cls(runtime=load_runtime(spec, home, cache_dir=cache_dir, progress=progress), **fields)

    # -- LangChain plumbing ------------------------------------------------------
    @property
    def _llm_type(self) -> str:
        return f"unsee-local-{getattr(self.runtime, 'backend', 'unknown')}"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model_name": self.model_name,
            "backend": getattr(self.runtime, "backend", None),
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "max_tokens": self.max_tokens,
        }

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | Any],
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools: calls through the returned runnable decode under the
        tool-call grammar. ``tool_choice``: None/"auto" (model chooses text or a
        call), "any"/"required"/True (must call one), a tool name (must call it),
        "none" (text only)."""
        formatted = [convert_to_openai_tool(t) for t in tools]
        specs = [ToolSpec.from_openai(t) for t in formatted]
        if tool_choice is not None:
            normalize_tool_choice(tool_choice, specs)  # validate early
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    def invoke(self, input: LanguageModelInput, config: RunnableConfig | None = None, *,
               stop: list[str] | None = None, **kwargs: Any) -> AIMessage:
        return super().invoke(input, config, stop=stop, **self._from_config(config, kwargs))

    async def ainvoke(self, input: LanguageModelInput, config: RunnableConfig | None = None, *,
                      stop: list[str] | None = None, **kwargs: Any) -> AIMessage:
        return await super().ainvoke(input, config, stop=stop, **self._from_config(config, kwargs))

    @staticmethod
    def _from_config(config: RunnableConfig | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        conf = (config or {}).get("configurable") or {}
        sess = conf.get("unsee_session") or conf.get("thread_id")
        if sess is not None:
            kwargs.setdefault("_config_session", str(sess))
        if conf.get("unsee_step") is not None:
            kwargs.setdefault("unsee_step", conf["unsee_step"])
        return kwargs

    # -- sessions ----------------------------------------------------------------
    @property
    def pool(self) -> SessionPool:
        return self._pool

    def resolve_session(self, explicit: str | None = None, config_session: str | None = None) -> str:
        if explicit:
            return str(explicit)
        if self.session:
            return self.session
        if config_session:
            return config_session
        return logical_session()

    @staticmethod
    def resolve_step(messages: Sequence[BaseMessage], explicit: Any = None) -> int | str:
        if explicit is not None:
            return explicit
        conf = configurable()
        if conf.get("unsee_step") is not None:
            return conf["unsee_step"]
        return len(messages)

    def numerics(self, session: str | None = None) -> str:
        """The numerics fingerprint of the runtime that decodes (``session``'s,
        else the model's): what its logits depend on besides the cache and the
        tokens (backend and kernel mode, library versions, weights, CPU or GPU;
        see :mod:`.numerics`). Every reply carries it in
        ``response_metadata["unsee"]["numerics"]``; a replay whose fingerprint
        differs from the recorded one may decode other tokens at a near-tie."""
        rt = self._pool.peek(session) if session is not None else None
        return _numerics_of(rt if rt is not None else self.runtime)

    def session_counters(self, session: str = DEFAULT_SESSION) -> dict[str, int]:
        """prefilled / decoded / reused / cropped tokens, cache length, evictions."""
        return self._pool.counters(session)

    def restore(self, session: str, offset: int) -> int:
        """Restore a checkpoint: crop ``session``'s cache to ``offset``."""
        return self._pool.restore(session, offset)

    def evict(self, session: str) -> None:
        self._pool.evict(session)

    def drop(self, session: str) -> None:
        """Forget ``session`` entirely (cache and counters)."""
        self._pool.drop(session)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under the model's tokenizer."""
        return len(self.runtime.tokenize(text))

    def get_token_ids(self, text: str) -> list[int]:
        return self.runtime.tokenize(text)

    def get_num_tokens(self, text: str) -> int:
        return self.count_tokens(text)

    def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Sequence | None = None) -> int:
        return len(self.prompt_tokens(messages, tools))

    def prompt_tokens(self, messages: Sequence[BaseMessage], tools: Sequence[Any] | None = None) -> list[int]:
        """The exact token ids a call with ``messages`` (and tools) would prefill."""
        specs = [ToolSpec.from_openai(convert_to_openai_tool(t)) for t in tools or []]
        return self.runtime.apply_chat_template(to_chat_messages(messages, specs))

    def _grammar_cache(self) -> GrammarCache:
        if self._grammars is None:
            rt = self.runtime
            self._grammars = GrammarCache(rt.tokenizer, rt.vocab_size, rt.eos_token_ids)
        return self._grammars

    # -- generation --------------------------------------------------------------
    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._run(messages, stop, *self._session_and_step(messages, kwargs), **kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # Resolve context-dependent values here, then run the sync path in a
        # worker thread (the model is compute-bound; the loop stays free).
        session, step = self._session_and_step(messages, kwargs)
        return await asyncio.to_thread(self._run, messages, stop, session, step, **kwargs)

    def _session_and_step(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> tuple[str, int | str]:
        """Pops the call's session/step keywords; falls back to the run's configuration."""
        session = self.resolve_session(kwargs.pop("session", None), kwargs.pop("_config_session", None))
        return session, self.resolve_step(messages, kwargs.pop("unsee_step", None))

    def _run(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None,
        session: str,
        step: int | str,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: Any = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        **_: Any,
    ) -> ChatResult:
        specs = [ToolSpec.from_openai(t) for t in tools or []]
        choice = normalize_tool_choice(tool_choice, specs) if specs else "none"
        temp = self.temperature if temperature is None else float(temperature)
        sampling = SamplingParams(temperature=temp, top_p=self.top_p, top_k=self.top_k)
        seed = seed_for(session, step)
        stops = list(stop or self.stop or [])
        prompt = self.runtime.apply_chat_template(to_chat_messages(messages, specs))
        limit = int(max_tokens or self.max_tokens)
        overrun = self.tool_call_overrun if self.tool_call_overrun is not None else max(512, 3 * limit)
        decision: dict[str, Any] | None = None
        with self._pool.use(session) as rt:
            reused = rt.sync(prompt)
            effective = choice
            if choice == "auto":
                decision = self._decide(rt, prompt, messages, specs)
                effective = decision["tool"] if decision["call"] else "none"
            processor = self._grammar_cache().processor(specs, effective) if specs else None
            result = rt.decode(
                limit,
                sampling=sampling,
                seed=seed,
                stop=stops if processor is None else (),
                logits_processor=processor,
                overrun=overrun if processor is not None else 0,
            )
        prefilled = len(prompt) - reused
        message = self._to_message(result.text, specs if effective != "none" else [], session, step,
                                   result.finish_reason, prompt_digest(prompt))
        unsee = {
            "cache_handle": f"{session}@{result.offset_end}",
            "session": session,
            "step": step,
            "seed": seed,
            "sampled": not sampling.greedy,
            "prompt_tokens": len(prompt),
            "offset_start": result.offset_start,
            "offset_end": result.offset_end,
            "reused_tokens": reused,
            "prefilled_tokens": prefilled,
            "decoded_tokens": len(result.tokens),
            "backend": getattr(self.runtime, "backend", None),
            "numerics": _numerics_of(rt),
            "tool_choice": choice,
        }
        if decision is not None:
            unsee["tool_decision"] = decision
        message.response_metadata = {
            "model_name": self.model_name,
            "model_provider": "unsee-local",
            "finish_reason": result.finish_reason,
            "unsee": unsee,
        }
        message.usage_metadata = {
            "input_tokens": len(prompt),
            "output_tokens": len(result.tokens),
            "total_tokens": len(prompt) + len(result.tokens),
            "input_token_details": {"cache_read": reused},
        }
        return ChatResult(generations=[ChatGeneration(message=message)])

    @staticmethod
    def _to_message(text: str, specs: Sequence[ToolSpec], session: str, step: int | str,
                    finish_reason: str = "stop", prompt: str = "") -> AIMessage:
        if not specs or not is_tool_call_text(text):
            return AIMessage(content=text)
        try:
            calls = parse_tool_calls(text, specs)
        except ToolCallParseError as exc:
            # Only a call cut off at the hard cap gets here: it is reported as an
            # invalid call (never as content text, never as a bad call).
            reason = exc.reason
            if finish_reason == "length":
                reason = f"tool call cut off at the token limit: {reason}"
            return AIMessage(
                content="",
                invalid_tool_calls=[{
                    "type": "invalid_tool_call",
                    "name": partial_call_name(text),
                    "args": text,
                    "id": tool_call_id(session, step, 0, prompt),
                    "error": reason,
                }],
            )
        return AIMessage(
            content="",
            tool_calls=[
                {"type": "tool_call", "name": c.name, "args": c.arguments,
                 "id": tool_call_id(session, step, i, prompt)}
                for i, c in enumerate(calls)
            ],
        )

    # -- the "auto" decision -----------------------------------------------------
    def decide_tool_call(
        self, messages: Sequence[BaseMessage], tools: Sequence[Any], session: str = "decide"
    ) -> dict[str, Any]:
        """The decision a ``tool_choice="auto"`` call would take for ``messages``
        (uses and keeps ``session``'s cache)."""
        specs = [ToolSpec.from_openai(convert_to_openai_tool(t)) for t in tools]
        prompt = self.runtime.apply_chat_template(to_chat_messages(messages, specs))
        with self._pool.use(session) as rt:
            rt.sync(prompt)
            return self._decide(rt, prompt, list(messages), specs)

    def _decide(self, rt: Any, prompt: list[int], messages: Sequence[BaseMessage],
                specs: Sequence[ToolSpec]) -> dict[str, Any]:
        """Call a tool or answer in text? Scored by the model itself.

        For each tool T, the log-probability the model gives the start of a
        call of T (``<tool_call>\\n{"name": "T"``) right after the prompt, minus
        the same with the last message's content replaced by a content-free
        "N/A" (contextual calibration, Zhao et al. 2021): how much the last
        message itself makes the model want to call T. The best tool's score
        against ``auto_call_threshold`` decides; the grammar then constrains
        the reply to a call of that tool (or keeps a text answer from starting
        one). Deterministic (no
        sampling), memoized per prompt; the cache and its counters are left as
        they were (the work shows in ``counters["scored"]``).
        """
        if not messages or not specs:
            return {"call": False, "tool": None, "score": None, "threshold": self.auto_call_threshold}
        conts = [rt.tokenize(call_header(t.name)) for t in specs]
        key = hashlib.sha256(repr((prompt, conts, self.auto_call_threshold)).encode()).hexdigest()
        with self._decisions_lock:
            hit = self._decisions.get(key)
            if hit is not None:
                self._decisions.move_to_end(key)
                return dict(hit)
        blank = list(messages[:-1]) + [_content_free(messages[-1])]
        base_prompt = self.runtime.apply_chat_template(to_chat_messages(blank, specs))
        at = 0
        for a, b in zip(prompt, base_prompt):
            if a != b:
                break
            at += 1
        at = max(1, min(at, len(prompt) - 1, len(base_prompt) - 1))
        real = rt.score(conts)
        base = rt.score(conts, at=at, tail=base_prompt[at:])
        scores = [r - b for r, b in zip(real, base)]
        best = max(range(len(specs)), key=lambda i: scores[i])
        out = {
            "call": scores[best] > self.auto_call_threshold,
            "tool": specs[best].name,
            "score": round(scores[best], 3),
            "threshold": self.auto_call_threshold,
        }
        with self._decisions_lock:
            self._decisions[key] = out
            while len(self._decisions) > _DECISION_MEMO:
                self._decisions.popitem(last=False)
        return dict(out)


def _numerics_of(runtime: Any) -> str:
    """``runtime.numerics()``, or the backend's name for a runtime without one."""
    numerics = getattr(runtime, "numerics", None)
    if callable(numerics):
        return str(numerics())
    return f"backend={getattr(runtime, 'backend', 'unknown')}"


def _content_free(message: BaseMessage) -> BaseMessage:
    """``message`` with its content replaced by the content-free "N/A"."""
    update: dict[str, Any] = {"content": CONTENT_FREE}
    if isinstance(message, AIMessage):
        update.update(tool_calls=[], invalid_tool_calls=[])
    if isinstance(message, ToolMessage):
        update["artifact"] = None
    return message.model_copy(update=update)


__all__ = ["AUTO_CALL_THRESHOLD", "DEFAULT_SESSION", "LocalChatModel", "tool_call_id"]
