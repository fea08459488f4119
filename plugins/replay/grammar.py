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

import hashlib
import json
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

        self.info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=list(stop_token_ids)
        )
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=2)
        self._compiled: dict[str, Any] = {}
        self._lock = threading.Lock()

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
        return GrammarProcessor(self.compiled(tools, choice), self.info.vocab_size)


class GrammarProcessor:
    """A :class:`~.runtime.LogitsProcessor` that masks tokens the grammar forbids."""

    def __init__(self, compiled: Any, vocab_size: int) -> None:
        import xgrammar as xgr

        self._xgr = xgr
        self._compiled = compiled
        self.vocab_size = vocab_size
        self.matcher = xgr.GrammarMatcher(compiled)
        self.bitmask = xgr.allocate_token_bitmask(1, vocab_size)
        self._filled = False
        self.forced_count = 0

    def reset(self) -> None:
        self.matcher.reset()
        self._filled = False
        self.forced_count = 0

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
        return token

    def __call__(self, generated: Sequence[int], logits: Any) -> Any:
        self._fill()
        row = logits.reshape(1, -1)
        mask = self.bitmask if row.device.type == "cpu" else self.bitmask.to(row.device)
        self._xgr.apply_token_bitmask_inplace(row, mask, vocab_size=self.vocab_size)
        return row.reshape(-1)

    def accept(self, token: int) -> None:
        self._filled = False
        if not self.matcher.accept_token(int(token)):
            raise GrammarError(f"grammar rejected token {token}")

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


def tools_system_prompt(tools: Sequence[ToolSpec]) -> str:
    """Tool instructions appended to the system message (SmolLM2's template has
    no tool support, so tools are described in text, Hermes style)."""
    listing = "\n".join(json.dumps(t.as_openai(), ensure_ascii=False) for t in tools)
    return (
        "You can call functions. The available tools are listed between <tools> and </tools>:\n"
        f"<tools>\n{listing}\n</tools>\n"
        "To call a tool, reply with only:\n"
        f'{TOOL_CALL_OPEN}\n{{"name": <tool name>, "arguments": <JSON arguments>}}\n{TOOL_CALL_CLOSE}\n'
        "Otherwise answer the user in plain text."
    )


__all__ = [
    "GrammarCache",
    "GrammarProcessor",
    "ParsedToolCall",
    "ToolSpec",
    "build_grammar",
    "is_tool_call_text",
    "normalize_tool_choice",
    "parse_tool_calls",
    "render_tool_call",
    "tools_system_prompt",
]
