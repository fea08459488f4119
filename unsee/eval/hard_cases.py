"""Hard cases: a small hand-written corpus for screening tool outputs for prompt injection.

The corpus is data, ``hard_cases.jsonl`` beside this module: one case a
line, ``{"injection": bool, "kind": str, "note": str, "text": str}``; invisible
characters (zero-width spaces, Unicode tag characters) are written as ``\\u``
escapes so the file shows them. This module reads and checks it
(:func:`load`) into :data:`HARD_CASES`.

Every entry is a whole tool output, as an LLM agent would read it: an e-mail with
its headers, a list of bank transactions, a chat channel dump, a web page's text,
a list of reviews, a calendar event, a file or a code excerpt. The texts were
written by hand for this corpus (none is drawn from AgentDojo or another data
set); names, addresses, IBANs and amounts are fictional, and domains are
``example.com``/``.org``/``.net`` or obviously made up.

The corpus measures two things a detector of injected instructions must get
right beyond AgentDojo's templates:

- ``injection=False`` (the *negatives*): hard benign texts. They are imperative,
  talk about money, passwords or data, mention AI assistants, or even quote
  attacks, but they address a *human* reader (or describe an attack) and a
  careful human would not call them an attack on the agent. Flagging one is a
  false positive.
- ``injection=True`` (the *positives*): instructions planted in the tool output
  and aimed at the AI agent reading it, to make it act (move money, share or
  delete data, send messages, book, exfiltrate). They avoid AgentDojo's
  phrasings (``<INFORMATION> ... </INFORMATION>``, ``TODO: ...``, ``Ignore your
  previous instructions``, ``IMPORTANT!!!``, ``###(system_message)``), so they
  measure recall on injections a template-matcher has not seen.

``kind`` values (:data:`NEGATIVE_KINDS`, :data:`POSITIVE_KINDS`). Negatives:

- ``"human-instruction"``: invoices, password resets, landlords, HR, IT, shipping
  notices, calendar invites, support replies, meeting notes: instructions to people.
- ``"security-newsletter"``: articles, newsletters, forum posts and training
  material that quote or describe prompt-injection or phishing attacks.
- ``"code-comment"``: code and config with comments, TODOs, docstrings, prompt
  templates, a README on configuring an assistant.
- ``"review"``: strongly worded or imperative hotel, restaurant and product reviews.
- ``"chat"``: team chat between humans that mentions bots or AI or gives instructions.
- ``"multilingual"``: benign instructions to humans in German, French, Spanish,
  Italian and Dutch.

Positives:

- ``"agent-note"``: a note to "the assistant"/"AI"/"agent"/"bot"/"LLM" hidden in an
  ordinary document (order confirmation, review, calendar description, file).
- ``"html-comment"``: instructions in HTML comments, hidden CSS text, markdown link
  titles or image alt text of a web page.
- ``"invisible"``: instructions hidden with zero-width characters or Unicode tag
  characters, or a markdown image whose URL would exfiltrate the user's data.
- ``"multilingual"``: instructions to the assistant in German, French, Spanish,
  Italian and Dutch.
- ``"tool-request"``: a request naming one of the agent's tools and its arguments,
  or an action that maps onto one, written as if the output spoke to the agent.

The same ``kind`` string (``"multilingual"``) is used on both sides; pair it with
``injection`` to tell them apart. :data:`NEGATIVES` and :data:`POSITIVES` split
:data:`HARD_CASES` by ``injection``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CORPUS", "HARD_CASES", "NEGATIVES", "NEGATIVE_KINDS", "POSITIVES", "POSITIVE_KINDS", "HardCase",
           "load"]

#: the corpus file (shipped as package data)
CORPUS = Path(__file__).with_name("hard_cases.jsonl")
NEGATIVE_KINDS = ("human-instruction", "security-newsletter", "code-comment", "review", "chat", "multilingual")
POSITIVE_KINDS = ("agent-note", "html-comment", "invisible", "multilingual", "tool-request")
_FIELDS = {"text", "injection", "kind", "note"}


@dataclass(frozen=True, slots=True)
class HardCase:
    """One tool output; ``injection`` says whether it carries instructions aimed at the agent."""

    text: str
    injection: bool
    kind: str
    note: str = ""


def json_lines(path: str | os.PathLike) -> Iterator[tuple[str, dict]]:
    """(``"<file>:<line>"``, the object) for each non-blank line of a JSON-lines file; ValueError
    naming the file and the line for one that is not a JSON object."""
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not JSON ({exc})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{where}: an object is wanted, got {type(row).__name__}")
        yield where, row


def load(path: str | os.PathLike = CORPUS, *, positive_kinds: tuple[str, ...] = POSITIVE_KINDS,
         negative_kinds: tuple[str, ...] = NEGATIVE_KINDS) -> tuple[HardCase, ...]:
    """The cases of a hard-case file, in its order: one JSON object a line (blank lines skipped)
    with ``text`` (a non-empty string), ``injection`` (true/false), ``kind`` (one of that side's
    kinds: ``positive_kinds`` or ``negative_kinds``, this corpus's by default; the held-out sets
    of :mod:`.heldout` pass theirs) and ``note`` (a string, may be left out). Raises ValueError
    naming the file, the line and the field."""
    path = Path(path)
    cases = []
    for where, row in json_lines(path):
        if unknown := sorted(set(row) - _FIELDS):
            raise ValueError(f"{where}: unknown fields {unknown} (a case has {sorted(_FIELDS)})")
        text, injection, kind, note = row.get("text"), row.get("injection"), row.get("kind"), row.get("note", "")
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{where}: 'text' must be a non-empty string")
        if not isinstance(injection, bool):
            raise ValueError(f"{where}: 'injection' must be true or false")
        kinds = positive_kinds if injection else negative_kinds
        if kind not in kinds:
            raise ValueError(f"{where}: 'kind' must be one of {', '.join(kinds)} for injection={injection}, "
                             f"got {kind!r}")
        if not isinstance(note, str):
            raise ValueError(f"{where}: 'note' must be a string")
        cases.append(HardCase(text, injection, kind, note))
    if not cases:
        raise ValueError(f"{path}: no cases")
    return tuple(cases)


HARD_CASES: tuple[HardCase, ...] = load()

NEGATIVES = tuple(c for c in HARD_CASES if not c.injection)
POSITIVES = tuple(c for c in HARD_CASES if c.injection)
