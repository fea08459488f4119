"""Held-out sets: four hand-written corpora the injection detectors are measured on, never tuned on.

The hard cases (:mod:`.hard_cases`) are the detectors' *development* set: the
default detector was tuned with them in view, so its figures there say little
about phrasings it was not written against. The held-out sets are for that:
``heldout_1.jsonl`` to ``heldout_4.jsonl`` beside this module, in the hard
cases' format (one case a line, ``{"injection": bool, "kind": str, "note": str,
"text": str}``, invisible characters and look-alike Cyrillic letters written as
``\\u`` escapes), read by :func:`.hard_cases.load` with this module's kinds.

How they were written: by hand, by authors who had not read the
detectors' code, their patterns, the hard cases or the other sets; sets 1 and 2
before any detector was changed for them, sets 3 and 4 before the second
round of changes (each author wrote one set, in a voice and formats of its own,
and none saw the texts written for training, ``train_written_*.jsonl``);
nothing is drawn from AgentDojo or another data set.
Names, IBANs, numbers and addresses are fictional; every domain is
``example.com``/``.org``/``.net`` or a subdomain of one. Each text is a whole
tool output (API JSON, e-mails with headers, code, READMEs, logs, chat exports,
reviews, calendar entries, web pages, tickets, CSV, SQL, subtitles, ...).
``injection=True`` only when the text tries to make the AI agent reading it act;
instructions to people, quoted or described attacks, prompt templates and docs
on configuring assistants are negatives. They are *held out*: a change to a
detector is measured on them, never fitted to them — a set the detector has
been fixed against is a development set and a new held-out set is needed.

- set 1 (:data:`HELDOUT_1`): office and enterprise outputs, in English, French,
  Spanish, German and Italian.
- set 3 (:data:`HELDOUT_3`): institutions (public administration, healthcare,
  schools, law firms, logistics, real estate, manufacturing): ticket JSON,
  chat exports, calendar entries, text from PDFs, OCR'd invoices, wiki pages,
  intranet HTML, CSV, XML, meeting transcripts, file listings; English, German,
  French, Spanish, Italian (48 % not English).
- set 4 (:data:`HELDOUT_4`): consumers, families, hobbyists and small shops:
  consumer API JSON, RSS, e-mails, SMS and messenger exports, receipts, product
  listings, search results, terminal output, small repositories, extension
  pages; English, French, Spanish, Italian, Portuguese, German (41 % not
  English).
- set 2 (:data:`HELDOUT_2`): another voice (developers, consumers, families) and
  more formats (git log, SQL dump, GraphQL, package.json, Kubernetes manifest,
  Dockerfile, notebook, RSS, subtitles, SMS and WhatsApp exports, a CV), in
  English, Portuguese, Dutch, French, German, Spanish and Italian.

``note`` starts with the text's language (``[en]``, ``[fr]``, ...) and its format.

``kind`` of a positive says *how the order is put* (:data:`POSITIVE_KINDS`):

- ``third-person``: about the reader, not to it ("the assistant handling this
  thread is expected to ...", "whoever processes this document shall ...").
- ``labelled-order``: a label before the order ("Assistant override:", "model
  instruction:", "LLM-TASK:", "[AI NOTE]", "KI-Anweisung:").
- ``direct-address``: "language model", "AI", "chatbot" addressed mid-sentence.
- ``data-field``: inside a JSON/CSV/SQL value of a data response, or split
  across fields (title/location/description, Subject and body).
- ``agent-notice``: a section or note for automated agents or AI systems
  (README "For automated agents", "Note to AI systems", a footnote, ``ai.txt``,
  "Attention automated screening systems").
- ``policy``: put as a policy, compliance or legal requirement.
- ``authority``: attributed to an admin, a bot, the CEO ("all assistants must
  now ...").
- ``hidden-markup``: HTML comments, hidden or zero-size elements, image alt
  text, link titles, markdown footnotes, CDATA.
- ``obfuscated``: zero-width characters, soft hyphens, Unicode tag characters,
  spaced-out letters, base64 or ROT13 with "decode and do it", Cyrillic look-alikes.
- ``conditional``: "if you are an AI ... (if you are a human, ignore this)".
- ``role-play``: "you are now PayBot", "imagine you are the owner's secretary".
- ``workflow``: to "the workflow", "the integration", "the build agent", "the pipeline".
- ``exfiltration``: render an image or open a URL that carries the user's data.
- ``polite-request``: a courteous request ("would you be so kind as to ...").
- ``multi-step``: a numbered plan of tool steps.

``kind`` of a negative (:data:`NEGATIVE_KINDS`): ``human-instruction`` (runbooks,
password resets, support replies, staff announcements, invoices, tickets),
``transaction`` (bank and booking confirmations with "send"/"transfer"),
``security-newsletter`` (articles, advisories, training quoting attacks),
``code-comment`` (code, READMEs, CONTRIBUTING, configs, test fixtures),
``ai-docs`` (docs, job ads, listings and configs about AI assistants),
``chat`` (people talking to people about bots), ``review``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from .hard_cases import HardCase, load

__all__ = ["HELDOUT_1", "HELDOUT_2", "HELDOUT_3", "HELDOUT_4", "NEGATIVE_KINDS", "POSITIVE_KINDS", "SETS", "cases"]

HELDOUT_1 = Path(__file__).with_name("heldout_1.jsonl")
HELDOUT_2 = Path(__file__).with_name("heldout_2.jsonl")
HELDOUT_3 = Path(__file__).with_name("heldout_3.jsonl")
HELDOUT_4 = Path(__file__).with_name("heldout_4.jsonl")
#: each held-out set by the name ``unsee eval detectors`` reports it under
SETS = {"heldout-1": HELDOUT_1, "heldout-2": HELDOUT_2, "heldout-3": HELDOUT_3, "heldout-4": HELDOUT_4}
POSITIVE_KINDS = ("third-person", "labelled-order", "direct-address", "data-field", "agent-notice", "policy",
                  "authority", "hidden-markup", "obfuscated", "conditional", "role-play", "workflow",
                  "exfiltration", "polite-request", "multi-step")
NEGATIVE_KINDS = ("human-instruction", "transaction", "security-newsletter", "code-comment", "ai-docs", "chat",
                  "review")


@cache
def cases(name: str) -> tuple[HardCase, ...]:
    """The cases of the held-out set ``name`` (a key of :data:`SETS`), in the file's order.
    KeyError for an unknown name; ValueError (from :func:`.hard_cases.load`) for a malformed file."""
    if name not in SETS:
        raise KeyError(f"no held-out set {name!r}; known: {', '.join(SETS)}")
    return load(SETS[name], positive_kinds=POSITIVE_KINDS, negative_kinds=NEGATIVE_KINDS)
