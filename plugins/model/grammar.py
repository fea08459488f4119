"""Constrained tool calling with xgrammar, for every backend.

When tools are bound, decoding is constrained by a grammar built from the
tools' JSON schemas. With ``tool_choice`` "auto" the model still chooses:

    root      ::= text | tool_call
    text      ::= [^<] [^]*                      (free text, not starting with "<")
    tool_call ::= "<tool_call>\\n{\\"name\\": \\"T\\", \\"arguments\\": " ARGS_T "}\\n</tool_call>"
                  for each bound tool T, ARGS_T = xgrammar's grammar of T's schema

Forced choices drop the text branch ("any"/"required") or keep one tool (a
tool name); "none" keeps only the text branch. Whatever the model picks, a tool call is a call of one bound tool
whose arguments are schema-valid JSON; then only an end-of-turn token is
allowed.

xgrammar produces a token bitmask per step (``fill_next_token_bitmask``) and
applies it to any torch logits tensor, CPU or CUDA, so the same
:class:`GrammarProcessor` plugs into the transformers loop and the ExLlamaV2
loop (see docs/model.md for why xgrammar over the alternatives).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .errors import GrammarError, ToolCallParseError

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
_TEXT_EBNF = "root ::= [^<] [^]*"


@dataclass(frozen=True)
class ToolSpec:
    """A bound tool as the model sees it: name, description, JSON schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    @classmethod
    def from_openai(cls, tool: Mapping[str, Any]) -> "ToolSpec":
        fn = tool.get("function", tool)
        params = dict(fn.get("parameters") or {"type": "object", "properties": {}})
        params.setdefault("type", "object")
        return cls(name=fn["name"], description=fn.get("description", ""), parameters=params)

    def as_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True)
class ParsedToolCall:
    name: str
    arguments: dict[str, Any]


def normalize_tool_choice(tool_choice: Any, tools: Sequence[ToolSpec]) -> str | None:
    """Map LangChain/OpenAI tool_choice values to "auto", "any", "none" or a tool name."""
    if tool_choice is None or tool_choice == "auto" or tool_choice is False:
        return "auto"
    if tool_choice in ("any", "required", True):
        return "any"
    if tool_choice == "none":
        return "none"
    if isinstance(tool_choice, Mapping):
        name = (tool_choice.get("function") or {}).get("name") or tool_choice.get("name")
        if name:
            tool_choice = name
    if isinstance(tool_choice, str):
        if tool_choice not in {t.name for t in tools}:
            raise GrammarError(f"tool_choice names an unbound tool: {tool_choice!r}")
        return tool_choice
    raise GrammarError(f"unsupported tool_choice: {tool_choice!r}")


def _literal(text: str) -> str:
    """An EBNF string literal (JSON escapes are valid xgrammar escapes)."""
    return json.dumps(text)


def build_grammar(tools: Sequence[ToolSpec], choice: str) -> Any:
    """The xgrammar ``Grammar`` for ``tools`` under a normalized ``choice``."""
    import xgrammar as xgr

    if choice == "none":  # text only: the answer may not start a tool call
        return xgr.Grammar.from_ebnf(_TEXT_EBNF)
    selected = [t for t in tools if choice in ("auto", "any") or t.name == choice]
    if not selected:
        raise GrammarError("no tool to call")
    calls = []
    for tool in selected:
        head = f'{TOOL_CALL_OPEN}\n{{"name": {json.dumps(tool.name)}, "arguments": '
        try:
            args = xgr.Grammar.from_json_schema(
                json.dumps(dict(tool.parameters)), any_whitespace=False, strict_mode=True
            )
        except Exception as exc:
            raise GrammarError(f"schema of tool {tool.name!r} is not supported: {exc}") from exc
        calls.append(
            xgr.Grammar.concat(
                xgr.Grammar.from_ebnf(f"root ::= {_literal(head)}"),
                args,
                xgr.Grammar.from_ebnf(f"root ::= {_literal(chr(125) + chr(10) + TOOL_CALL_CLOSE)}"),
            )
        )
    call = calls[0] if len(calls) == 1 else xgr.Grammar.union(*calls)
    if choice == "auto":
        return xgr.Grammar.union(xgr.Grammar.from_ebnf(_TEXT_EBNF), call)
    return call


class GrammarCache:
    """Compiles grammars for one tokenizer and memoizes them by tool set."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_token_ids: Sequence[int]) -> None:
        import xgrammar as xgr

        self.tokenizer = tokenizer

        self.info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=list(stop_token_ids)
        )
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=2)
        self._compiled: dict[str, Any] = {}
        self._lock = threading.Lock()
        #: tokens that start with a double quote (close a JSON string)
        self.quote_start = frozenset(
            i for i, piece in enumerate(self.info.decoded_vocab) if piece.startswith(b'"')
        )

    @functools.cached_property
    def call_start(self) -> frozenset[int]:
        """Tokens that, as the first token of an "auto" reply, start a tool call (a vocabulary
        scan, made only for an "auto" processor: the chat model decides auto calls itself)."""
        return frozenset(i for i, piece in enumerate(self.info.decoded_vocab) if piece.startswith(b"<"))

    def compiled(self, tools: Sequence[ToolSpec], choice: str) -> Any:
        key = hashlib.sha256(
            json.dumps([[t.name, t.parameters] for t in tools] + [choice], sort_keys=True).encode()
        ).hexdigest()
        with self._lock:
            hit = self._compiled.get(key)
            if hit is None:
                hit = self.compiler.compile_grammar(build_grammar(tools, choice))
                self._compiled[key] = hit
            return hit

    def processor(self, tools: Sequence[ToolSpec], choice: str) -> "GrammarProcessor":
        mode = "text" if choice == "none" else "auto" if choice == "auto" else "call"
        return GrammarProcessor(self.compiled(tools, choice), self.info.vocab_size,
                                mode=mode, call_start=self.call_start if mode == "auto" else frozenset(),
                                tokenizer=self.tokenizer,
                                quote_start=self.quote_start)


class GrammarProcessor:
    """A :class:`~.runtime.LogitsProcessor` that masks tokens the grammar forbids.

    ``mode``: "call" (the grammar is a tool call: everything decoded is part
    of it), "text" (plain text only) or "auto" (text or a call; a first token
    in ``call_start`` chooses the call). :meth:`must_finish` is true while a
    tool call is half written, so the decoder does not cut it off at its token
    limit (see ``LocalRuntime.decode(overrun=)``).

    Jump-forward: where the grammar forces a string (the call header, a
    property name with its ``": "``), :meth:`forced_token` hands out the
    *tokenizer's own* tokenization of it (with ``tokenizer``), so the model
    never sees a split it was not trained on: left to choose among the
    allowed tokens, SmolLM2 picked a lone space for the forced `` "`` of a
    string value, then ``");`` (a quote and code), and ran on inside the
    string. Without a tokenizer, only single allowed tokens are forced.

    Loops: greedy decoding of a small model can repeat itself inside a string
    argument forever (``"lookup_key_to_lookup_value_list_of_objects_by_key_to_
    lookup_value_list_of_objects_by_key..."``), which would run a call into the
    hard cap. When the tokens the model chose itself in a call end with the
    same run of 1-32 tokens three times in a row, the next token is limited to
    those that close a JSON string (``quote_start``) if the grammar allows one
    there; the rest of the call is then completed as usual. Off with
    ``max_repeats=0``.
    """

    #: a run repeated this many times in a row inside a call is a loop
    max_repeats = 3
    #: longest run (tokens) the loop check looks for
    max_cycle = 32

    def __init__(self, compiled: Any, vocab_size: int, *, mode: str = "call",
                 call_start: frozenset[int] = frozenset(), tokenizer: Any = None,
                 quote_start: frozenset[int] = frozenset()) -> None:
        import xgrammar as xgr

        self._xgr = xgr
        self._compiled = compiled
        self.vocab_size = vocab_size
        self.mode = mode
        self.call_start = call_start
        self.matcher = xgr.GrammarMatcher(compiled)
        self.bitmask = xgr.allocate_token_bitmask(1, vocab_size)
        self._filled = False
        self.forced_count = 0
        self.accepted = 0
        self.in_call = mode == "call"
        self.tokenizer = tokenizer
        self.quote_start = quote_start
        self._queue: list[int] = []
        self._handed: int | None = None
        self._free: list[int] = []  # tokens of the current call the model chose itself
        self.loops_closed = 0

    def reset(self) -> None:
        self.matcher.reset()
        self._filled = False
        self.forced_count = 0
        self.accepted = 0
        self.in_call = self.mode == "call"
        self._queue = []
        self._handed = None
        self._free = []
        self.loops_closed = 0

    def must_finish(self) -> bool:
        """True while a tool call has been started and is not complete."""
        return self.in_call and not self.matcher.is_terminated()

    def _fill(self) -> None:
        if not self._filled:
            self.matcher.fill_next_token_bitmask(self.bitmask)
            self._filled = True

    def forced_token(self) -> int | None:
        """The only token the grammar allows next, or None if there is a choice.

        Lets the decode loop skip the forward pass for forced tokens (runs of
        them are fed to the model in one batch: jump-forward decoding).
        """
        import torch

        if not self._queue and self.tokenizer is not None:
            self._queue = self._forced_run()
        if self._queue:
            self.forced_count += 1
            self._handed = self._queue.pop(0)
            return self._handed
        self._fill()
        words = self.bitmask[0]
        nz = torch.nonzero(words).flatten()
        if nz.numel() != 1:
            return None
        idx = int(nz[0])
        word = int(words[idx]) & 0xFFFFFFFF
        if word & (word - 1):
            return None
        token = idx * 32 + word.bit_length() - 1
        if token >= self.vocab_size:
            return None
        self.forced_count += 1
        self._handed = token
        return token

    def _forced_run(self) -> list[int]:
        """The tokenizer's tokens for the string the grammar forces next (or [])."""
        forced = self.matcher.find_jump_forward_string()
        if not forced:
            return []
        tokens = list(self.tokenizer.encode(forced, add_special_tokens=False))
        if not tokens or self.tokenizer.decode(tokens) != forced:
            return []
        return tokens

    def __call__(self, generated: Sequence[int], logits: Any) -> Any:
        self._fill()
        row = logits.reshape(1, -1)
        mask = self.bitmask if row.device.type == "cpu" else self.bitmask.to(row.device)
        self._xgr.apply_token_bitmask_inplace(row, mask, vocab_size=self.vocab_size)
        if self.in_call and self.quote_start and self._looping():
            row = self._close_string(row)
        return row.reshape(-1)

    def _looping(self) -> bool:
        """The free tokens end with one run repeated ``max_repeats`` times."""
        free, reps = self._free, self.max_repeats
        if reps < 2:
            return False
        for n in range(1, min(self.max_cycle, len(free) // reps) + 1):
            tail = free[-n:]
            if all(free[-(k + 1) * n:len(free) - k * n] == tail for k in range(1, reps)):
                return True
        return False

    def _close_string(self, row: Any) -> Any:
        import torch

        allowed = torch.isfinite(row[0])
        keep = torch.zeros_like(allowed)
        keep[list(self.quote_start)] = True
        keep &= allowed
        if not bool(keep.any()):  # not inside a string: nothing to close
            return row
        self.loops_closed += 1
        return torch.where(keep.reshape(1, -1), row, torch.full_like(row, float("-inf")))

    def accept(self, token: int) -> None:
        self._filled = False
        forced = self._handed is not None and int(token) == self._handed
        if not forced:
            self._queue = []  # not the forced run's token: recompute it next time
        self._handed = None
        if not self.matcher.accept_token(int(token)):
            raise GrammarError(f"grammar rejected token {token}")
        if self.accepted == 0 and self.mode == "auto" and int(token) in self.call_start:
            self.in_call = True
        if self.in_call and not forced:
            self._free.append(int(token))
        self.accepted += 1

    def is_terminated(self) -> bool:
        return bool(self.matcher.is_terminated())


def is_tool_call_text(text: str) -> bool:
    return text.lstrip().startswith(TOOL_CALL_OPEN)


def parse_tool_calls(text: str, tools: Sequence[ToolSpec]) -> list[ParsedToolCall]:
    """Parse ``<tool_call>{...}</tool_call>`` blocks of ``text``.

    Raises :class:`ToolCallParseError` for a block that is not a call of a
    bound tool (cannot happen under the grammar unless decoding was cut off by
    the token limit).
    """
    names = {t.name for t in tools}
    calls: list[ParsedToolCall] = []
    rest = text.strip()
    while rest.startswith(TOOL_CALL_OPEN):
        end = rest.find(TOOL_CALL_CLOSE)
        if end < 0:
            raise ToolCallParseError(text, "unterminated tool call (token limit?)")
        body = rest[len(TOOL_CALL_OPEN):end].strip()
        try:
            obj = json.loads(body)
        except json.JSONDecodeError as exc:
            raise ToolCallParseError(text, f"not JSON: {exc}") from exc
        if not isinstance(obj, dict) or obj.get("name") not in names:
            raise ToolCallParseError(text, "unknown tool name")
        args = obj.get("arguments", {})
        if not isinstance(args, dict):
            raise ToolCallParseError(text, "arguments are not an object")
        calls.append(ParsedToolCall(obj["name"], args))
        rest = rest[end + len(TOOL_CALL_CLOSE):].strip()
    return calls


def render_tool_call(name: str, arguments: Mapping[str, Any]) -> str:
    """The text form of a call, exactly as the grammar makes the model write it."""
    args = json.dumps(dict(arguments), ensure_ascii=False)  # xgrammar writes ", " and ": "
    return f'{TOOL_CALL_OPEN}\n{{"name": {json.dumps(name)}, "arguments": {args}}}\n{TOOL_CALL_CLOSE}'


def _param_sig(schema: Mapping[str, Any]) -> str:
    if isinstance(schema.get("enum"), list):
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False)
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list):
        return " | ".join(_param_sig(o) for o in options if isinstance(o, Mapping))
    kind = schema.get("type", "any")
    return " | ".join(kind) if isinstance(kind, list) else str(kind)


def tool_signature(tool: ToolSpec) -> str:
    """One line per tool, ``name(param: type, ...): description``."""
    props = (tool.parameters or {}).get("properties") or {}
    params = ", ".join(f"{k}: {_param_sig(v if isinstance(v, Mapping) else {})}" for k, v in props.items())
    return f"{tool.name}({params}): {tool.description}".rstrip(": ")


def tools_system_prompt(tools: Sequence[ToolSpec]) -> str:
    """Tool instructions appended to the system message.

    SmolLM2's template has no tool support, so tools are described in text:
    one signature line per tool (the grammar enforces the full JSON schema),
    the call format, and two short examples (a call, a plain answer).
    Measured on SmolLM2-135M (docs/model.md): signature lines instead of the
    tools' JSON schemas stop it writing placeholders such as ``"{ticket_id}"``
    as argument values, and the examples widen the gap between requests for
    a tool and chit-chat in the :class:`~.chat_model.LocalChatModel` "auto"
    decision.
    """
    listing = "\n".join(tool_signature(t) for t in tools)
    return (
        f"You can call these tools:\n{listing}\n"
        "To call a tool, reply with only:\n"
        f'{TOOL_CALL_OPEN}\n{{"name": <tool name>, "arguments": <JSON arguments>}}\n{TOOL_CALL_CLOSE}\n'
        "Otherwise answer the user in plain text.\n\n"
        "Call a tool only when the user's last message asks for it. "
        "After a tool result, answer in plain text.\n"
        'Example: the user says "Use the search tool to find cats" and you reply:\n'
        f'{TOOL_CALL_OPEN}\n{{"name": "search", "arguments": {{"query": "cats"}}}}\n{TOOL_CALL_CLOSE}\n'
        'Then the tool answers "3 cats found" and you reply: I found 3 cats.\n'
        "Example: the user says \"Thank you!\" and you reply: You're welcome!"
    )


def call_header(name: str) -> str:
    """The start of a call of ``name``, as the grammar makes the model write it."""
    return f'{TOOL_CALL_OPEN}\n{{"name": {json.dumps(name)}'


def partial_call_name(text: str) -> str | None:
    """The tool name of a (possibly cut-off) call text, if it got that far."""
    m = re.search(r'\{"name":\s*"((?:[^"\\]|\\.)*)"', text)
    return m.group(1) if m else None


__all__ = [
    "GrammarCache",
    "GrammarProcessor",
    "ParsedToolCall",
    "ToolSpec",
    "build_grammar",
    "call_header",
    "partial_call_name",
    "is_tool_call_text",
    "normalize_tool_choice",
    "parse_tool_calls",
    "render_tool_call",
    "tool_signature",
    "tools_system_prompt",
]
