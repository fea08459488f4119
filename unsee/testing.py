"""The compatibility suite: check that unsee forgets correctly on *your* agent.

Run it on your own agent factory, in your own tests (it needs pytest only for
nicer assertion output; ``pip install 'unsee[dev]'``)::

    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from unsee.testing import AgentCase, check_agent

    def build(world):                       # world: unsee.testing.AgentWorld
        @tool
        def lookup(ticket: str) -> str:
            '''Look up a ticket.'''
            return f"ticket {ticket}: card {world.secret} on file"

        @tool
        def refund(order: str) -> str:
            '''Refund an order.'''
            world.fire("refund", order)     # a real side effect, counted by the suite
            return f"refund of {order} issued"

        return create_agent(my_model, [lookup, refund], middleware=world.middleware(),
                            checkpointer=world.checkpointer)

    def test_my_agent_forgets(tmp_path):
        check_agent(AgentCase("support", build, turns=["look at T1", "refund A7"]), tmp_path)

What :func:`check_agent` does, and fails on (``CompatFailure``, an
``AssertionError`` that says which step and shows the difference):

1. **record**: builds the agent in a world that holds the secret, with unsee's
   middleware, and runs the turns on one thread (``invoke``, ``ainvoke`` or
   ``stream``; a turn is a user message, a graph input dict, or a
   ``Command``, e.g. a human's decision at an interrupt);
2. **locate**: a dry run finds where the secret entered (one entry);
3. **forget**: ``u.forget`` (or ``u.aforget``) with the secret as the target;
4. **compare with the counterfactual computed from scratch**: the same factory
   builds the agent again in a world whose secret is the empty text, *without*
   unsee, on a fresh checkpointer, and runs the same turns. Every state key
   must be equal: messages by type, content and tool calls (ids aside), every
   other key by value;
5. **continue**: one more turn on both; still equal;
6. **erase**: the forget erased the target from every record: the report says
   clean, and no file under the test's folder (unsee's home, a SQLite
   checkpointer's file) holds a byte of the secret;
7. **side effects once**: what your tools fired (``world.fire``) after the
   forget is exactly what they fired before it, plus what the continued turn
   fired in the reference; effects the counterfactual makes and the original did
   not are reported deferred, and the reverse orphaned.

What it assumes of your agent: the model's reply is a function of the
messages it is shown (a deterministic test model; :class:`ScriptedChatModel`
is one that behaves like a hosted chat API), the secret reaches the agent only
through what your tools return from ``world.secret``, and your tools declare
their effects (``unsee.declare_effect``) as they do in production.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict

__all__ = ["AgentCase", "AgentWorld", "CompatFailure", "CompatResult", "ScriptedChatModel", "TranscriptRejected",
           "check_agent", "acheck_agent", "normalized_state", "file_copies", "DEFAULT_SECRET"]

#: what the suite's worlds hold as the secret unless a case names another
DEFAULT_SECRET = "4417-2231-9034"
#: the thread the recorded session runs in, and the one the reference runs in
THREAD, REFERENCE_THREAD = "compat", "compat-reference"

if TYPE_CHECKING:
    from unsee.core import Unsee


class CompatFailure(AssertionError):
    """A step of the compatibility check failed; ``step`` names it."""

    def __init__(self, case: str, step: str, message: str):
        super().__init__(f"[{case}] {step}: {message}")
        self.case, self.step = case, step


# -- a test model that behaves like a hosted chat API -------------------------------------------
class TranscriptRejected(ValueError):
    """What a hosted API answers a transcript with an unanswered tool call (HTTP 400)."""


def _digest(messages: Sequence[BaseMessage]) -> str:
    h = hashlib.sha256()
    for m in messages:
        calls = [(c["name"], c["args"]) for c in getattr(m, "tool_calls", None) or []]
        h.update(json.dumps([type(m).__name__, str(m.content), calls], sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


class ScriptedChatModel(BaseChatModel):
    """A chat model whose reply is ``policy(messages, tool_names) -> AIMessage``, answered the way
    a hosted chat API answers: a function of the transcript only (so a replay gets the
    counterfactual's replies), a transcript with an unanswered tool call is rejected
    (``TranscriptRejected``), and every reply is a new message object whose id and tool call
    ids derive from the transcript (never reused across different transcripts)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    policy: Any
    role: str = "m"
    tool_names: tuple[str, ...] = ()

    @property
    def _llm_type(self) -> str:
        return "scripted-hosted"

    def bind_tools(self, tools, **kwargs) -> "ScriptedChatModel":
        from langchain_core.utils.function_calling import convert_to_openai_tool

        names = tuple(convert_to_openai_tool(t)["function"]["name"] for t in tools)
        return self.model_copy(update={"tool_names": names})

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        for m in messages:
            for c in getattr(m, "tool_calls", None) or []:
                if c["id"] not in answered:
                    raise TranscriptRejected(f"400: tool call {c['id']} has no tool message")
        out = self.policy(messages, self.tool_names)
        d = _digest(messages)
        calls = [{"name": c["name"], "args": c["args"], "id": f"call_{self.role}_{d}_{i}", "type": "tool_call"}
                 for i, c in enumerate(out.tool_calls or [])]
        msg = AIMessage(content=out.content, tool_calls=calls, id=f"ai_{self.role}_{d}",
                        response_metadata=dict(out.response_metadata or {}))
        return ChatResult(generations=[ChatGeneration(message=msg)])


# -- the world an agent is built in --------------------------------------------------------------
@dataclass
class AgentWorld:
    """What a case's factory builds its agent with: the secret as this world holds it (the
    empty text in the reference world), the checkpointer, unsee's middleware (none in the
    reference) and the log of real side effects (``fire``)."""

    secret: str
    checkpointer: Any
    unsee: Any = None
    fired: list[tuple[str, tuple]] = field(default_factory=list)
    #: a fresh folder of this world's own (a tool server's files, a log)
    folder: Path | None = None

    @property
    def reference(self) -> bool:
        """Whether this is the counterfactual world (no secret, no unsee)."""
        return self.unsee is None

    def middleware(self) -> list:
        """The middleware to add to a ``create_agent`` (``[]`` in the reference world)."""
        return [] if self.unsee is None else [self.unsee.middleware()]

    def recorded_model(self, model: Any) -> Any:
        """``model`` recorded by unsee (``u.recorded_model``), for a hand-written graph or an agent
        built without middleware (itself in the reference world)."""
        return model if self.unsee is None else self.unsee.recorded_model(model)

    def tool_node(self, tools: Any, **kw: Any) -> Any:
        """A ``ToolNode`` of ``tools`` recorded by unsee, for a hand-written graph (a plain one in
        the reference world)."""
        if self.unsee is None:
            from langgraph.prebuilt import ToolNode

            return ToolNode(tools, **kw)
        return self.unsee.tool_node(tools, **kw)

    #: functions that list side effects counted elsewhere (a server process's log)
    sources: list[Callable[[], list[tuple[str, tuple]]]] = field(default_factory=list)

    def fire(self, effect: str, *args: Any) -> None:
        """Log a real side effect (call it where your tool does the thing)."""
        self.fired.append((effect, tuple(map(str, args))))

    def count_from(self, source: Callable[[], list[tuple[str, tuple]]]) -> None:
        """Count the side effects ``source()`` lists too, e.g. what a tool server outside this
        process wrote to its log: ``[(effect, args), ...]`` in the order they happened."""
        self.sources.append(source)

    def effects(self) -> list[tuple[str, tuple]]:
        """Every real side effect so far: those fired here, then those of each source."""
        out = list(self.fired)
        for source in self.sources:
            out.extend(source())
        return out


@dataclass(frozen=True)
class AgentCase:
    """An agent shape to check. ``build(world)`` returns the compiled graph; ``turns`` are the
    inputs of the recorded session (a ``str`` is a user message; a ``dict`` a graph input as
    given; a ``Command`` as given); ``follow_up`` is the turn run after the forget."""

    name: str
    build: Callable[[AgentWorld], Any]
    turns: Sequence[Any]
    follow_up: Any = "thanks, anything else?"
    secret: str = DEFAULT_SECRET
    #: "invoke" | "ainvoke" | "stream" | "astream" (the forget is ``aforget`` for the async ones)
    run: str = "invoke"
    stream_mode: Any = "updates"
    #: keys of the state not compared
    ignore_keys: tuple[str, ...] = ()
    #: fields of dictionaries anywhere in the state not compared: values of the wall clock, which
    #: no two runs share (deepagents' files carry ``created_at`` / ``modified_at``)
    ignore_fields: tuple[str, ...] = ("created_at", "modified_at")
    #: passed to ``u.forget`` (e.g. ``{"side_effects": "execute"}``)
    forget_kwargs: dict = field(default_factory=dict)


@dataclass
class CompatResult:
    """What :func:`check_agent` saw (every check passed when it returns one)."""

    case: str
    saver: str
    report: Any
    state: dict[str, Any]
    reference: dict[str, Any]
    fired: list
    reference_fired: list
    copies: dict[str, int]


# -- helpers -------------------------------------------------------------------------------------
def _calls_of(m: BaseMessage) -> list:
    return [(c["name"], json.dumps(c["args"], sort_keys=True, default=str))
            for c in getattr(m, "tool_calls", None) or []]


def normalized_state(values: dict[str, Any], ignore: Sequence[str] = (), fields: Sequence[str] = ()
                     ) -> dict[str, Any]:
    """A graph state as the suite compares it: messages as (type, content, tool calls), ids left
    out; every other key as JSON; ``ignore``: keys left out; ``fields``: dictionary fields left
    out wherever they are."""
    out: dict[str, Any] = {}
    for key, value in (values or {}).items():
        if key in ignore:
            continue
        if key == "messages":
            out[key] = [(type(m).__name__, json.dumps(_content(m.content), sort_keys=True, default=str), _calls_of(m))
                        for m in value]
        else:
            out[key] = json.dumps(_plain(value, frozenset(fields)), sort_keys=True, default=str)
    return out


def _content(content: Any) -> Any:
    """A message's content as compared: content blocks without the ids a tool adapter draws at
    random for each (``langchain-mcp-adapters``); text as it is."""
    if isinstance(content, list):
        return [{k: v for k, v in b.items() if k != "id"} if isinstance(b, dict) else b for b in content]
    return content


def _plain(value: Any, fields: frozenset = frozenset()) -> Any:
    """A state value without what differs between runs of the same transcript (message ids,
    ``fields``)."""
    if isinstance(value, BaseMessage):
        return [type(value).__name__, _content(value.content), _calls_of(value)]
    if isinstance(value, dict):
        return {str(k): _plain(v, fields) for k, v in value.items() if k not in fields}
    if isinstance(value, (list, tuple)):
        return [_plain(v, fields) for v in value]
    if hasattr(value, "model_dump"):
        return _plain(value.model_dump(), fields)
    return value


def file_copies(roots: Sequence[Path], needle: str) -> dict[str, int]:
    """Raw copies of ``needle`` (UTF-8 bytes) in every file under ``roots``, per file."""
    raw = needle.encode()
    out: dict[str, int] = {}
    for root in roots:
        root = Path(root)
        for p in [root] if root.is_file() else sorted(root.rglob("*")):
            if p.is_file():
                n = p.read_bytes().count(raw)
                if n:
                    out[str(p)] = n
    return out


def _input(turn: Any) -> Any:
    return {"messages": [HumanMessage(turn)]} if isinstance(turn, str) else turn


def _config(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


class _Loop:
    """One event loop in a thread of its own, for the whole of an async check: an async
    checkpointer's connection belongs to the loop it was opened on, and the forget's own sync
    calls on it (from this thread) go through that loop."""

    def __init__(self):
        import threading

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="unsee-compat-loop", daemon=True)
        self.thread.start()

    def run(self, coro) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class _Ops:
    """How a case runs its agent and the forget: synchronously (``invoke``, ``stream``,
    ``u.forget``) or on one event loop (``ainvoke``, ``astream``, ``u.aforget``)."""

    def __init__(self, how: str, stream_mode: Any):
        if how not in ("invoke", "ainvoke", "stream", "astream"):
            raise ValueError(f"AgentCase.run must be invoke, ainvoke, stream or astream, not {how!r}")
        self.how, self.stream_mode = how, stream_mode
        self.loop = _Loop() if how.startswith("a") else None

    def turn(self, app: Any, thread: str, turn: Any) -> None:
        cfg, given = _config(thread), _input(turn)
        if self.how == "invoke":
            app.invoke(given, cfg)
        elif self.how == "stream":
            for _ in app.stream(given, cfg, stream_mode=self.stream_mode):
                pass
        else:
            self.loop.run(self._aturn(app, cfg, given))

    async def _aturn(self, app: Any, cfg: dict, given: Any) -> None:
        if self.how == "astream":
            async for _ in app.astream(given, cfg, stream_mode=self.stream_mode):
                pass
        else:
            await app.ainvoke(given, cfg)

    def values(self, app: Any, thread: str) -> dict:
        if self.loop is None:
            return app.get_state(_config(thread)).values
        return self.loop.run(app.aget_state(_config(thread))).values

    def forget(self, u: Unsee, event: Any, app: Any, **kw: Any) -> Any:
        if self.loop is None:
            return u.forget(THREAD, event, agent=app, **kw)
        return self.loop.run(u.aforget(THREAD, event, agent=app, **kw))

    def call(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """A sync call of unsee's (audit, dry run) on the case's agent (off the loop's thread)."""
        return fn(*args, **kw)

    def close(self) -> None:
        if self.loop is not None:
            self.loop.close()


class _Saver:
    """A fresh checkpointer of a kind ("memory", "sqlite" or a PostgreSQL URL) per world, sync or
    async as the case runs (an async one is opened on the check's loop)."""

    def __init__(self, kind: str, folder: Path, ops: _Ops):
        self.kind, self.folder, self.ops = kind, folder, ops
        self._closers: list[Callable[[], None]] = []

    def make(self, name: str) -> Any:
        from unsee.middleware.checkpointers import aopen_saver, open_saver

        if self.kind == "sqlite":
            kind, where = "sqlite", str(self.folder / f"{name}.sqlite")
        elif self.kind.startswith(("postgresql://", "postgres://")):
            kind, where = "postgres", self.kind
        elif self.kind == "memory":
            kind, where = "memory", None
        else:
            raise ValueError(f"saver must be 'memory', 'sqlite' or a postgresql:// URL, not {self.kind!r}")
        if kind == "memory":
            return open_saver(kind)[0]
        if self.ops.loop is not None:  # an async saver, opened on the check's loop
            saver, close = self.ops.loop.run(aopen_saver(f"async-{kind}", where))
            self._closers.append(lambda: self.ops.loop.run(close()))
            return saver
        saver, close = open_saver(kind, where)
        self._closers.append(close)
        return saver

    @property
    def label(self) -> str:
        return "postgres" if self.kind.startswith("postgres") else self.kind

    def close(self) -> None:
        for close in reversed(self._closers):
            try:
                close()
            except Exception:  # a test's teardown: nothing left to do about it
                pass


def _fresh(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _diff(a: dict, b: dict) -> str:
    """The keys (and, for messages, the first position) where two normalized states differ."""
    lines = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if x == y:
            continue
        if key == "messages" and isinstance(x, list) and isinstance(y, list):
            i = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            lines.append(f"messages differ at {i} (forgotten {len(x)} messages, reference {len(y)}):\n"
                         f"  forgotten: {x[i] if i < len(x) else '-'}\n  reference: {y[i] if i < len(y) else '-'}")
        else:
            lines.append(f"{key}: forgotten {str(x)[:300]} != reference {str(y)[:300]}")
    return "\n".join(lines)




def _effects(report: Any, status: str) -> Counter:
    items = list(getattr(report, "orphaned_side_effects", []) or []) + list(
        getattr(report, "deferred_side_effects", []) or [])
    return Counter(s.tool for s in items if s.status == status)


# -- the check -----------------------------------------------------------------------------------
def check_agent(case: AgentCase, folder: str | Path, *, saver: str = "sqlite", unsee_options: dict | None = None
                ) -> CompatResult:
    """Run the compatibility check of ``case`` (module docstring) in ``folder`` (a fresh, empty
    directory: unsee's home and the checkpointers' files go there); ``saver``: "memory",
    "sqlite" or a PostgreSQL URL. Returns what it saw; raises ``CompatFailure`` at the first
    step that fails."""
    from unsee import RevocationEvent, Unsee

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ops = _Ops(case.run, case.stream_mode)
    savers = _Saver(saver, folder, ops)
    u = Unsee(home=folder / "home", **(unsee_options or {}))

    def state(app: Any, thread: str) -> dict[str, Any]:
        return normalized_state(ops.values(app, thread), case.ignore_keys, case.ignore_fields)

    try:
        # 1. record
        world = AgentWorld(case.secret, savers.make("live"), u, folder=_fresh(folder / "world"))
        app = case.build(world)
        for turn in case.turns:
            ops.turn(app, THREAD, turn)
        if case.secret not in json.dumps(_plain(ops.values(app, THREAD)), default=str):
            raise CompatFailure(case.name, "record", "the secret never reached the agent's state: the case "
                                "checks nothing (do the tools return world.secret?)")
        fired_before = world.effects()
        event = RevocationEvent(target=case.secret, event_id=f"compat-{case.name}"[:60])
        # 2. locate
        try:
            plan = ops.call(u.forget, THREAD, event, agent=app, dry_run=True, **case.forget_kwargs)
        except Exception as e:
            raise CompatFailure(case.name, "locate", f"{type(e).__name__}: {e}") from e
        # 3. forget
        try:
            report = ops.forget(u, event, app, **case.forget_kwargs)
        except Exception as e:
            raise CompatFailure(case.name, "forget", f"{type(e).__name__}: {e}") from e
        if not getattr(report, "committed", False) or getattr(report, "errors", None):
            raise CompatFailure(case.name, "forget", f"not committed cleanly: errors={report.errors}, "
                                f"notes={getattr(report, 'notes', None)}")
        # 4. the counterfactual, from scratch, without unsee
        ref_world = AgentWorld("", savers.make("reference"), None, folder=_fresh(folder / "reference-world"))
        ref_app = case.build(ref_world)
        for turn in case.turns:
            ops.turn(ref_app, REFERENCE_THREAD, turn)
        now, ref = state(app, THREAD), state(ref_app, REFERENCE_THREAD)
        if now != ref:
            raise CompatFailure(case.name, "counterfactual", "the forgotten state is not the one computed from "
                                "scratch without the secret:\n" + _diff(now, ref))
        # 7a. nothing fired again; what differs is reported
        if world.effects() != fired_before:
            raise CompatFailure(case.name, "side effects", f"the forget fired {world.effects()[len(fired_before):]} "
                                "again")
        mine, theirs = Counter(e for e, _ in fired_before), Counter(e for e, _ in ref_world.effects())
        deferred, orphaned = _effects(report, "deferred") + _effects(report, "awaiting_approval"), _effects(
            report, "orphaned")
        if +(theirs - mine) != deferred or +(mine - theirs) != orphaned:
            raise CompatFailure(case.name, "side effects", f"fired {dict(mine)} originally, the counterfactual "
                                f"{dict(theirs)}; the report says deferred {dict(deferred)}, orphaned "
                                f"{dict(orphaned)}")
        # 5. one more turn on both
        n_fired, n_ref_fired = len(world.effects()), len(ref_world.effects())
        ops.turn(app, THREAD, case.follow_up)
        ops.turn(ref_app, REFERENCE_THREAD, case.follow_up)
        now, ref = state(app, THREAD), state(ref_app, REFERENCE_THREAD)
        if now != ref:
            raise CompatFailure(case.name, "continue", "after one more turn the states differ:\n" + _diff(now, ref))
        after, ref_after = world.effects()[n_fired:], ref_world.effects()[n_ref_fired:]
        if [e for e, _ in after] != [e for e, _ in ref_after]:
            raise CompatFailure(case.name, "continue", f"the next turn fired {after}, the reference {ref_after}")
        # 6. erased: the report says so and no file holds the secret
        u.flush()
        if getattr(report, "erased_clean", None) is not True:
            raise CompatFailure(case.name, "erase", f"the erasure is not clean (erased_clean="
                                f"{getattr(report, 'erased_clean', None)}; notes={getattr(report, 'notes', None)})")
        roots = [folder / "home", *sorted(folder.glob("live.sqlite*"))]
        copies = file_copies(roots, case.secret)
        if copies:
            raise CompatFailure(case.name, "erase", f"files still hold the secret: {copies}")
        audit = ops.call(u.audit, THREAD, case.secret, agent=app)
        if not getattr(audit, "clean", False):
            raise CompatFailure(case.name, "erase", f"the audit finds copies: {audit}")
        del plan
        return CompatResult(case.name, savers.label, report, now, ref, world.effects(), ref_world.effects(),
                            copies)
    finally:
        u.close()
        savers.close()
        ops.close()


async def acheck_agent(case: AgentCase, folder: str | Path, *, saver: str = "sqlite",
                       unsee_options: dict | None = None) -> CompatResult:
    """:func:`check_agent` from an event loop (it runs in a worker thread, which runs its own)."""
    return await asyncio.to_thread(check_agent, case, folder, saver=saver, unsee_options=unsee_options)
