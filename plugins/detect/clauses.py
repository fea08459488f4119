"""Where the default detector's clauses, spans and quotations are in a text (pure segmentation).

A signal fires at one position; what it flags runs to the end of its clause
(:func:`clause_end`), sentence or paragraph, or of the quoted YAML value it sits in
(:func:`span_end`), never further than :data:`MAX_SPAN`. A passage in quotation marks
(:data:`QUOTED`, :data:`SQUOTED`) is more likely mentioned than meant, unless it is a data
value (:data:`JSON_VALUE`, :data:`FIELD_VALUE`). The regexes that need an AI agent's name run
only in the stretches around one (:func:`agent_windows`, :func:`near_agents`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .lexicon import AGENT_WORDS

_SENT_END = re.compile(r"[.!?](?=\s|$|['\"\\])|\n|\\n")
# (also in a rendered data structure: an escaped blank line, or the closing quote of a string value)
_PARA_END = re.compile(r"\n[ \t]*\n|'\n\s*[\w\-]+:\s|\n\s*-\s+[\w\-]+:\s|\\n[ \t]*\\n"
                       r"|(?<!\\)[\"'](?=\s*(?:,\s*[\"'\[{]|[}\]]|$))")
MAX_SPAN = 2000
MAX_CLAUSE = 2 * MAX_SPAN

#: a short double-quoted passage (a phrase quoted in an article, a string in code): text there is
#: more likely mentioned than meant, so what fires inside it counts half
QUOTED = re.compile(r"(?=[\"“«„])(?<![\w\\])[\"“«„]\s?([^\"”»“\n]{3,160}(?:\n[^\"”»“\n]{0,160}){0,2})\s?[\"”»“]")
JSON_VALUE = re.compile(r"\"\s*:\s*$")
#: a field's value near the start of its line ("Verwendungszweck: "...", "Subject: "..."): data too
FIELD_VALUE = re.compile(r"(?:^|\n)[^\n]{0,30}\b[\w\-]+\s*:\s*$")
#: the same in single quotes where prose quotes ("such as 'Assistant override:'"): the opening quote
#: after a word and a space (not a YAML or Python string: those follow ": ", "[", "(" or ", ")
SQUOTED = re.compile(r"(?=['‘])(?:(?<=[A-Za-z] )'([^'\n]{3,160})'(?!\w)|‘([^’\n]{3,160})’)")
#: a markdown link's title: a quotation by syntax, not by intent
LINK_TITLE = re.compile(r"\]\([^\s)]+\s+$")


def sentence_start(text: str, i: int) -> int:
    j = i
    while j > 0 and text[j - 1] not in ".!?\n":
        j -= 1
    while j < i and text[j].isspace():
        j += 1
    return j


def clause_end(text: str, i: int) -> int:
    """Where the clause at ``i`` ends: its sentence's end, at most :data:`MAX_CLAUSE` on (a text
    without sentence ends would otherwise be read to its end once per signal)."""
    limit = min(len(text), i + MAX_CLAUSE)
    m = _SENT_END.search(text, i, limit)
    return limit if m is None else (m.end() if m.group()[0] in ".!?" else m.start())


#: the closing quote of a single-quoted YAML value ('' is an escaped quote inside it)
_VALUE_END = re.compile(r"(?<!')'(?:'')*(?=[ \t]*\n\s*(?:-\s|[\w\-]+:\s)|\s*$)")


def _in_quoted_value(text: str, i: int) -> bool:
    o = max(text.rfind(": '", 0, i), text.rfind("- '", 0, i))
    return o >= 0 and _VALUE_END.search(text, o + 3, i) is None


def span_end(text: str, i: int) -> int:
    """The end of the injected span that starts at ``i``: the quoted YAML value it is in (a tool's
    rendering keeps a multi-paragraph injection in one), else its paragraph."""
    if _in_quoted_value(text, i):
        m = _VALUE_END.search(text, i)
        if m is not None and m.start() - i <= MAX_SPAN:
            return m.start()
    # (looked for only as far as a span may reach: a text without paragraph ends and many
    # signals would be read to its end once per signal)
    m = _PARA_END.search(text, i, min(len(text), i + 2 * MAX_SPAN))
    end = m.start() if m is not None else len(text) if len(text) - i <= MAX_SPAN else i + MAX_SPAN + 1
    return end if end - i <= MAX_SPAN else clause_end(text, i)


def wrapped(text: str, i: int) -> bool:
    """Whether a match at ``i`` starts a line that only continues the previous one's sentence
    (prose wrapped mid-sentence: the line before ends in a letter, digit or comma)."""
    j = i
    while j < len(text) and text[j] in " \t'\"*-":
        j += 1
    k = j - 1
    while k >= 0 and text[k] in " \t'\"*-":
        k -= 1
    if k < 0 or text[k] != "\n":
        return False
    k -= 1
    while k >= 0 and text[k] in " \t":
        k -= 1
    return k >= 0 and (text[k].isalnum() or text[k] == ",")


CLAUSE_PUNCT = re.compile(r"[,:;]")
COMMA_COLON = re.compile(r"[,:]")

#: how far from an agent's name such a regex's match may start or end
_AROUND = 120


def agent_windows(text: str, low: str) -> list[list[int]]:
    """The stretches of ``text`` around an AI agent's name, merged (``low``: ``text.lower()``)."""
    starts = []
    for word in AGENT_WORDS:
        i = low.find(word)
        while i >= 0:
            e = i + len(word)
            if (i == 0 or not low[i - 1].isalpha()) and (
                    len(word) > 3 or e == len(low) or not low[e].isalpha() or low[e] == "s"):
                starts.append(i)
            i = low.find(word, e)
    windows: list[list[int]] = []
    for i in sorted(starts):
        a, b = max(0, i - _AROUND), min(len(text), i + 12 + _AROUND)
        if windows and a <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], b)
        else:
            windows.append([a, b])
    return windows


def near_agents(text: str, windows: list[list[int]], regexes: Sequence[re.Pattern[str]]) -> Iterable[re.Match[str]]:
    """The matches of ``regexes`` in ``windows`` of ``text`` (:func:`agent_windows`)."""
    for rx in regexes:
        for a, b in windows:
            yield from rx.finditer(text, a, b)
