"""A rule-based prompt-injection detector (pure logic, no model).

It flags instruction-like text addressed to the agent inside *data* (a tool
return, a memory read):

- override phrases: "ignore (all) previous instructions", "disregard the
  rules above", "your new task is", "from now on you ...";
- tag blocks: ``<INFORMATION> ... </INFORMATION>``, ``<IMPORTANT>``,
  ``<INSTRUCTIONS>``, ``<SYSTEM>`` — the whole block, tags included;
- role-play of the conversation: chat-template tokens (``<|im_start|>system``,
  ``[INST]``, ``<<SYS>>``), role headings (``### system``, ``###(system_message)``,
  ``### user``), ``System:``/``Assistant:`` lines that talk to the model;
- text addressed to the model ("a message from me, Emma, to you, GPT-4",
  "Dear assistant", "IMPORTANT!!!");
- requests to send, forward or transfer money or data to someone.

Each rule reports the whole injected span, not just the trigger words: a tag
block from its opening to its closing tag; an override or role marker from the
start of its sentence to the end of its paragraph; a request its sentence.
Overlapping findings are merged (highest score, all reasons).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .base import Finding, finding, merge_findings

MATCH = "match"
SENTENCE = "sentence"
PARAGRAPH = "paragraph"

#: a paragraph extent longer than this falls back to the sentence
MAX_PARAGRAPH = 2000

#: a word start: a word boundary, or a capitalised word glued to the previous one ("USAIgnore",
#: or after the escaped "\n" of a rendered Python string)
_W = r"(?:\b|(?-i:(?<=[A-Za-z_])(?=[A-Z][a-z])))"

_I = re.IGNORECASE
_IM = re.IGNORECASE | re.MULTILINE
_IS = re.IGNORECASE | re.DOTALL


@dataclass(frozen=True, slots=True)
class Rule:
    """A pattern, its score and reason, and how far a match extends (match/sentence/paragraph)."""

    name: str
    pattern: re.Pattern[str]
    score: float
    reason: str
    extent: str = MATCH


_MODEL = r"(?:AI|assistant|LLM|language\s+model|chat\s?bot|GPT[\w.\-]*|ChatGPT|Claude|Gemini|Llama[\w.\-]*|Mistral|Copilot)"
_OVERRIDE_VERB = r"(?:ignore|disregard|forget|override|bypass|skip|drop|abandon|neglect)"
_OVERRIDE_QUAL = (r"(?:all|any|the|your|my|these|those|every|of|previous|previously|prior|above|earlier|"
                  r"preceding|original|initial|system|developer|former|old|existing|given|other)")
_OVERRIDE_NOUN = (r"(?:i\w{0,2}nstruct\w*|prompts?|directions?|directives?|rules|guidelines|guidance|"
                  r"commands?|orders?|constraints?|policies|restrictions)")
_SEND = r"(?:send|forward|transfer|wire|pay|remit|e-?mail|share|upload|post|leak|export|exfiltrate|deposit|move)"
_WHAT = (r"(?:[$€£]\s?\d|\b(?:money|funds?|payments?|amounts?|balance|cash|usd|eur|dollars?|euros?|bitcoins?|btc|"
         r"eth|crypto\w*|data|files?|documents?|e-?mails?|messages?|passwords?|credentials?|contacts?|history|"
         r"records?|information|details|secrets?|keys?|tokens?|codes?|everything|all|inbox|attachments?)(?![\w]))")
#: where an override verb starts (the look-ahead of its first letters lets the regex engine skip
#: other positions fast: a pattern that starts with a set of characters is searched for that set)
_OVERRIDE_AT = rf"(?=[idfobsan]){_W}"
#: a character inside one sentence (a dot followed by a word char is not an end: 1.5, a@b.com)
_IN = r"(?:[^.!?\n]|[.!?](?=\w))"

DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("tag_block", re.compile(
        r"<\s*(INFORMATION|IMPORTANT(?:[_ ]\w+)?|INSTRUCTIONS?|SYSTEM(?:[_ ]\w+)?|ADMIN(?:[_ ]\w+)?)\s*>"
        r".*?(?:<\s*/\s*\1\s*>|\Z)", _IS),
        0.9, "instruction block in data (<INFORMATION>-style tags)"),
    Rule("override", re.compile(
        rf"{_OVERRIDE_AT}{_OVERRIDE_VERB}\s+(?:{_OVERRIDE_QUAL}\s+){{0,4}}{_OVERRIDE_NOUN}\b", _I),
        0.9, "asks the agent to ignore its instructions", PARAGRAPH),
    Rule("new_instructions", re.compile(
        r"(?=[nuratshyfbi])(?:\b(?:new|updated|real|actual|true|secret|hidden|additional|urgent)\s+(?:system\s+)?"
        r"(?:instructions?|orders|directives?)\s*[:\-]"
        r"|\byour\s+(?:new|real|actual|true|next|only|first)\s+(?:task|goal|objective|instructions?|job|"
        r"mission|priority)\s+(?:is|are)\b"
        r"|\bfrom\s+now\s+on,?\s+(?:you|the\s+assistant)\b"
        r"|\byou\s+(?:are|must|will|should)\s+now\b"
        r"|\bbefore\s+you\s+(?:can\s+)?(?:solve|complete|do|answer|continue|finish|proceed\s+with)\s+"
        r"(?:the|your|any|this)\s+(?:task|request|question|job)"
        r"|\binstead\s+of\s+(?:solving|completing|doing|answering)\s+(?:the|your)\s+(?:task|request))", _I),
        0.8, "gives the agent new instructions", PARAGRAPH),
    Rule("addressed_to_model", re.compile(
        rf"(?=[tdahnmri])(?:\bto\s+you,?\s+(?:the\s+)?{_MODEL}\b"
        rf"|\b(?:dear|attention|hey|hi|hello|note\s+to(?:\s+the)?)\s*,?\s+{_MODEL}\b"
        r"|\b(?:message|note|instructions?|request)\s+from\s+me\b"
        r"|\bIMPORTANT\s*!{2,})", _I),
        0.7, "text addressed to the AI agent inside data", PARAGRAPH),
    Rule("chat_template", re.compile(
        r"<\|im_start\|>\s*(?:system|user|assistant|developer|tool)\b.*?(?:<\|im_end\|>|\Z)", _IS),
        0.95, "chat-template role markers in data (role play of system/user)"),
    Rule("role_tokens", re.compile(
        r"<\|(?:system|user|assistant|start_header_id|end_header_id|eot_id|begin_of_text)\|>"
        r"|\[/?INST\]|<</?SYS>>|<start_of_turn>|<end_of_turn>", _I),
        0.9, "chat-template role markers in data (role play of system/user)", PARAGRAPH),
    Rule("role_heading", re.compile(
        r"^[ \t]*#{1,6}[ \t]*\(?(?:system|user|assistant|developer|admin)"
        r"(?:[ _\-]?(?:message|prompt|instructions?|note))?\)?(?![\w])", _IM),
        0.85, "role heading in data (role play of system/user)", PARAGRAPH),
    Rule("role_line", re.compile(
        r"^[ \t]*[\[<]?(?:system|assistant|developer)(?:[ _]?(?:message|prompt))?[\]>]?[ \t]*:[ \t]*"
        r"(?=[^\n]*\b(?:you|your|ignore|disregard|must|always|never|instructions?|assistant|AI|send|forward|"
        r"transfer|new\s+task)\b)", _IM),
        0.75, "a 'System:'-style line talking to the model (role play)", PARAGRAPH),
    Rule("send_request", re.compile(
        rf"\b{_SEND}\b{_IN}{{0,120}}?{_WHAT}{_IN}{{0,120}}?\b(?:to|towards|into|at)\b\s+\S"
        rf"|\b{_SEND}\s+(?:it|them|this|that|everything)\s+to\b\s+\S", _I),
        0.6, "asks to send, forward or transfer money or data to someone", SENTENCE),
)

# A tool's output is often a rendered data structure (``str(dict)``, JSON) whose strings carry
# their line breaks escaped: there ``\\n`` is a line break, and a string value ends at its closing
# quote. Without that, a sentence runs back to the start of the rendering (flagging the benign
# text before the injection) and a paragraph stops at the first sentence (leaving the injected
# request after "Ignore your previous instructions." unflagged).
_SENT_END = re.compile(r"[.!?](?=\s|$|\\n)|\n|\\n")
_PARA_END = re.compile(r"\n[ \t]*\n|\\n[ \t]*\\n|(?<!\\)[\"'](?=\s*(?:,\s*[\"'\[{]|[}\]]|$))")


def _sentence_start(text: str, i: int) -> int:
    j = i
    while j > 0:
        c = text[j - 1]
        if c == "\n" or (c in ".!?" and j < len(text) and text[j].isspace()):
            break
        if c == "n" and j >= 2 and text[j - 2] == "\\":  # an escaped line break
            break
        j -= 1
    while j < i and text[j].isspace():
        j += 1
    return j


def _sentence_end(text: str, i: int) -> int:
    m = _SENT_END.search(text, i)
    if m is None:
        return len(text)
    return m.start() if m.group() in ("\n", "\\n") else m.end()


def _paragraph_end(text: str, i: int) -> int:
    m = _PARA_END.search(text, i)
    end = len(text) if m is None else m.start()
    return end


def _extent(text: str, m: re.Match[str], extent: str) -> tuple[int, int]:
    s, e = m.span()
    if extent == SENTENCE:
        return _sentence_start(text, s), max(e, _sentence_end(text, e))
    if extent == PARAGRAPH:
        start = _sentence_start(text, s)
        end = _paragraph_end(text, e)
        if end - start > MAX_PARAGRAPH:
            end = max(e, _sentence_end(text, e))
        return start, end
    return s, e


def _trim(text: str, s: int, e: int) -> tuple[int, int]:
    while e > s and text[e - 1].isspace():
        e -= 1
    while s < e and text[s].isspace():
        s += 1
    return s, e


class RuleDetector:
    """Flags instruction-like text addressed to the agent (see the module doc).

    ``rules`` replaces the built-in set (extend with ``DEFAULT_RULES + (...)``);
    findings scoring below ``min_score`` are dropped.
    """

    def __init__(self, rules: Iterable[Rule] = DEFAULT_RULES, *, name: str = "rules", min_score: float = 0.0):
        self.rules = tuple(rules)
        self.name = name
        self.min_score = min_score

    def detect(self, text: str, artifact_id: str | None = None) -> list[Finding]:
        if not text:
            return []
        raw: list[Finding] = []
        for rule in self.rules:
            if rule.score < self.min_score:
                continue
            for m in rule.pattern.finditer(text):
                s, e = _trim(text, *_extent(text, m, rule.extent))
                if e <= s:
                    continue
                raw.append(finding(text, s, e, rule.score, f"{rule.name}: {rule.reason}", self.name, artifact_id))
        return merge_findings(raw, text)

    def __repr__(self) -> str:
        return f"RuleDetector(name={self.name!r}, rules={len(self.rules)})"
