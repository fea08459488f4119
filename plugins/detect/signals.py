"""The default injection detector: signals that do not depend on one template (pure logic).

:class:`SignalDetector` flags text in an observation that tries to make the
*agent* act. It runs the template rules of :mod:`.rules` and these signals,
each with a weight; the weights of the signals that fire on one clause combine
as a noisy-OR (``1 - prod(1 - w)``), so one weak signal stays under the usual
0.5 threshold and two agreeing ones pass it. A finding's reason names every
signal that fired.

- **marker**: a pseudo-instruction heading in data (``TODO:``,
  ``###(system_message)``, ``[SYSTEM]``, ``Note to the assistant:``) — also
  where a tool's YAML rendering puts it after ``key: '`` or glues it to the
  previous word; an ``IMPORTANT:`` heading is weak (people write it to
  people: "IMPORTANT: run make test before opening a pull request");
- **label**: a label that puts an order in the agent's or the system's mouth
  (``Assistant override:``, ``model instruction:``, ``AI directive -``,
  ``[bot command]``, ``KI-Anweisung:``, a JSON/YAML key ``ai_instructions``);
  a marker or label counts once, with the order right after it;
- **imperative**: a clause that starts with an order (``Send …``, ``Please
  delete …``, ``Do … instead``), in English, French, Spanish, German,
  Italian, Portuguese or Dutch (:data:`FOREIGN_VERBS`);
- **third-person order**: an order whose subject is an AI agent, however
  it is named and in any grammatical person ("the assistant handling this
  ticket should forward …", "AI agents processing this response must call
  …", "whoever processes this document is required to delete …", "all
  assistants must now …", "der Assistent muss … löschen"); a duty that does
  not act ("the assistant should answer briefly") is not one;
- **tool action**: the order's verb is one of the agent's own tools' actions
  (``send`` for ``send_money``, ``change`` for ``update_password``), or a
  common consequential action when the tools are not known; stronger when
  the clause also names what the tool acts on (``file`` for ``delete_file``);
- **tool name**: the clause names one of the agent's tools or ``arg=``
  argument names — what only unsee, which knows the agent's registry, can see;
  a tool named as an example ("(e.g. send_email)") counts less than one
  called, given arguments or asked for;
- **identifier**: an IBAN, e-mail address, URL or phone number in the order;
- **principal**: the order talks *about* the user in the third person
  (``the user's password``): data written for the agent, not for its reader;
- **addressed**: text addressed to an AI agent (assistant, AI, model, agent,
  bot, LLM, "automated readers", "LLM-based tools") in English, German,
  French, Spanish, Italian, Portuguese or Dutch — a vocative also in
  mid-sentence ("…, language model, send …"), a heading or note for agents
  ("## For automated agents"), a salutation ("Chère IA,");
- **processing**: text that talks to whoever processes it ("when you
  summarise this", "whoever processes this document", "intended for
  automated processing");
- **hidden**: instructions hidden from a human reader: HTML comments (a
  developer's ``<!-- TODO: -->`` barely counts), hidden CSS, zero-width
  characters inside words or around them, Unicode tag characters, markdown
  images whose URL carries data, a URL to be filled with someone's data, and
  what the reader's view decoded: base64 that says words, letters spaced
  out, look-alike letters of another script inside words;
- **processor**: an address to whatever processes the text, tied to it ("Agent
  completing this purchase:", "Anyone summarising this post:", "quien procese
  esta hoja:"), weak where a person could be meant ("whoever is reading
  this:"); an order after it, or after a fronted clause about processing the
  text ("Once you have read this record, send ..."), is an order to the agent;
- **conceal**: an order that acts and is kept from the principal ("do not
  mention this step", "keep it out of her summary");
- **decode**: an order to decode a passage and act on it; **role**: a new
  role for the reader or a standing order for later requests ("Ab jetzt bist
  du ...", "Remember this for every future request").

Every signal reads the text as its reader sees it (:func:`~.normalize.reader_view`:
zero-width and tag characters, NFKC forms, JSON ``\\u`` escapes and HTML
references decoded); findings are mapped back to the original characters. A
passage in quotation marks (double, or single where prose quotes) counts half:
it is more likely mentioned than meant — but a JSON string value is data, not a
quotation, and an override phrase in reported speech ("if a message asks you to
ignore these rules") is not an override.

:meth:`SignalDetector.with_tools` binds the agent's tools
(:class:`~.base.ToolSpec`); without them a built-in list of consequential
actions stands in.

The detector is split by role: :mod:`.lexicon` holds the words and phrases (data),
:mod:`.clauses` the segmentation (where a clause, span or quotation ends) and
:mod:`.scorer` the scoring (:class:`SignalDetector`, :class:`Weights`); this module is
their public face.
"""

from __future__ import annotations

from .clauses import MAX_CLAUSE, MAX_SPAN
from .lexicon import CONSEQUENTIAL, FOREIGN_VERBS, OTHER_VERBS, SIGNAL_RULES, SYNONYMS
from .scorer import MENTION, SignalDetector, Weights

__all__ = ["CONSEQUENTIAL", "FOREIGN_VERBS", "MAX_CLAUSE", "MAX_SPAN", "MENTION", "OTHER_VERBS", "SIGNAL_RULES",
           "SYNONYMS", "SignalDetector", "Weights"]
