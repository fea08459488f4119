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
  previous word;
- **imperative**: a clause that starts with an order (``Send …``, ``Please
  delete …``, ``Do … instead``);
- **tool action**: the order's verb is one of the agent's own tools' actions
  (``send`` for ``send_money``, ``change`` for ``update_password``), or a
  common consequential action when the tools are not known; stronger when
  the clause also names what the tool acts on (``file`` for ``delete_file``);
- **tool name**: the clause names one of the agent's tools or ``arg=``
  argument names — what only unsee, which knows the agent's registry, can see;
- **identifier**: an IBAN, e-mail address, URL or phone number in the order;
- **principal**: the order talks *about* the user in the third person
  (``the user's password``): data written for the agent, not for its reader;
- **addressed**: text addressed to an AI agent (assistant, AI, model, agent,
  bot, LLM) in English, German, French, Spanish, Italian or Dutch;
- **hidden**: instructions hidden from a human reader: HTML comments, hidden
  CSS, zero-width characters inside words, Unicode tag characters, markdown
  images whose URL carries data.

:meth:`SignalDetector.with_tools` binds the agent's tools
(:class:`~.base.ToolSpec`); without them a built-in list of consequential
actions stands in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .base import Finding, ToolSpec, finding, merge_findings
from .rules import DEFAULT_RULES, Rule, RuleDetector

# -- the actions an order can ask for -------------------------------------------------------
#: verb -> the tool-name words it stands for (a tool ``update_password`` is asked for by "change")
SYNONYMS: dict[str, tuple[str, ...]] = {
    "send": ("send", "transfer", "pay", "wire", "email", "message", "forward", "post"),
    "transfer": ("send", "transfer", "money", "transaction"),
    "pay": ("send", "money", "transaction", "pay"),
    "wire": ("send", "money", "transfer"),
    "forward": ("send", "email", "message", "forward"),
    "email": ("send", "email"),
    "mail": ("send", "email"),
    "message": ("send", "message"),
    "dm": ("send", "message"),
    "change": ("update", "change", "set", "reset"),
    "modify": ("update", "change", "edit"),
    "update": ("update",),
    "set": ("update", "set"),
    "reset": ("update", "reset", "password"),
    "edit": ("update", "edit", "append"),
    "delete": ("delete", "remove", "cancel"),
    "remove": ("delete", "remove", "cancel"),
    "erase": ("delete", "remove"),
    "cancel": ("cancel", "delete"),
    "create": ("create", "add", "schedule", "make"),
    "add": ("add", "create", "append", "invite"),
    "append": ("append", "add"),
    "schedule": ("schedule", "create", "reschedule"),
    "reschedule": ("reschedule", "update"),
    "invite": ("invite", "add"),
    "share": ("share",),
    "grant": ("share", "give"),
    "give": ("share", "give", "send"),
    "post": ("post", "send"),
    "publish": ("post",),
    "upload": ("post", "upload", "share"),
    "book": ("reserve", "book"),
    "reserve": ("reserve",),
    "make": ("reserve", "create", "make"),
    "visit": ("get", "webpage", "visit"),
    "open": ("get", "webpage", "open"),
    "buy": ("buy", "order", "pay"),
    "order": ("order", "buy"),
    "concatenate": ("post", "send"),
    "invoke": (),
    "call": (),
    "use": (),
    "run": (),
    "execute": (),
}
#: without the agent's tools: the actions that change something or reach outside
CONSEQUENTIAL = frozenset(("send", "transfer", "pay", "wire", "forward", "email", "mail", "delete", "remove",
                           "erase", "change", "modify", "update", "reset", "invite", "share", "grant", "post",
                           "publish", "upload", "book", "reserve", "buy", "order", "schedule", "cancel"))
#: other verbs an order to an agent starts with (no tool implied)
OTHER_VERBS = ("say", "tell", "write", "reply", "respond", "answer", "recommend", "include", "mention", "find",
               "get", "read", "list", "search", "summarize", "summarise", "click", "go", "download", "stop",
               "ignore", "disregard", "forget", "do", "act", "pretend", "output", "print", "show", "insert",
               "rate", "give", "provide", "put", "make", "let", "keep", "check", "look", "contact", "inform")

_POLITE = r"(?:(?:please|kindly|now|then|also|immediately|first|urgently|just|quickly|and|finally)[\s,]+){0,3}"
#: where an order or marker can start: a line, sentence or quoted value, an escaped "\n" of a
#: rendered Python string, or a word glued to the previous one
_START = r"(?:^|(?<=[\n.!?:;'\"(\[>\]])|(?<=\s-)|(?<=\\n)|(?-i:(?<=[a-z0-9])(?=[A-Z][a-z])))[ \t'\"*\-]*"

_IDENT = re.compile(
    r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){10,30}\b"  # IBAN
    r"|[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+"  # e-mail
    r"|(?:https?://|www\.)[^\s'\"<>)]+"  # URL
    r"|\b[a-z0-9\-]+(?:\.[a-z0-9\-]+)*\.(?:com|org|net|io|co|biz|info|xyz)(?:/[^\s'\"<>)]*)?\b"  # domain
    r"|\+?\d[\d ()\-]{8,}\d", re.IGNORECASE)  # phone
_PRINCIPAL = re.compile(r"\bthe\s+user(?:'s|s')?\b|\buser's\b|\bmy\s+(?:boss|owner|principal)\b", re.IGNORECASE)
_AGENT = (r"(?:AI|A\.I\.|KI|IA|assistant|assistent(?:in)?|assistente|asistente|assistant[e]?|agent(?:e|en)?|"
          r"bot|chat\s?bot|LLM|language\s+model|model|modell|modèle|modelo|modello|GPT[\w.\-]*|Claude|Gemini)")
#: words that make "the AI ..." a team, a product or a topic, not the agent being addressed
_NOT_ADDRESSEE = (r"(?!\s*(?:team|department|group|project|features?|tools?|models?|policy|act|lab|research|"
                  r"ethics|news|conference|company|startup|industry|safety|hype|era|revolution|strategy|"
                  r"at\s+the\s+(?:front|desk|counter)))")
_ADDRESSED = re.compile(
    rf"\b(?:note|message|instructions?|reminder|attention|notice|memo|step|task)\s+(?:for|to)\s+"
    rf"(?:the\s+|any\s+|all\s+|an?\s+|connected\s+)?(?:[\w\-]+\s+){{0,2}}{_AGENT}s?\b{_NOT_ADDRESSEE}"
    r"(?=[^.;\n]{0,60}(?:[:,—]|\s-\s))"
    rf"|\bfor\s+(?:any|the|all|every|connected|an?)\s+(?:[\w\-]+\s+)?{_AGENT}s?\b{_NOT_ADDRESSEE}"
    rf"(?=[^.\n]{{0,80}}[:,])"
    rf"|{_START}{_AGENT}(?:\s+(?:agent|assistant|de\s+IA|di\s+IA|IA|KI|AI))?\s*[,:](?=[ \t]+\S)"
    rf"|\b{_AGENT}\s+(?:instructions?|notice|note|task)\s+(?:for|on|about)\b"
    rf"|\b(?:dear|hey|hi|hello|attention)\s*,?\s+(?:the\s+)?(?:[\w\-]+\s+)?{_AGENT}\b"
    rf"|\bif\s+you\s+are\s+an?\s+(?:[\w\-]+\s+){{0,2}}{_AGENT}\b"
    rf"|\b(?:{_AGENT})s?\s+(?:reading|processing|summari[sz]ing|handling)\s+this\b"
    r"|\b(?:hinweis|nachricht|anweisung|notiz)\s+(?:an|für)\s+(?:den|die|das)?\s*(?:[\w\-]+\s+)?"
    r"(?:ki|assistent\w*|agent\w*|bot|modell|sprachmodell)"
    r"|\b(?:destinée?s?\s+à|pour)\s+(?:l'|le\s+|la\s+)(?:assistant\w*|agent|ia|bot)\b"
    r"|\b(?:voor|aan)\s+de\s+(?:ai-?|ki-?)?(?:assistent|agent|bot)\b"
    r"|\b(?:für|an)\s+(?:den|die)\s+(?:ki-?)?(?:assistent\w*|agent\w*)\b"
    r"|\b(?:note|message|instructions?|consigne)\s+(?:pour|à|a)\s+(?:l'|le\s+|la\s+)?(?:[\w\-]+\s+)?"
    r"(?:ia|assistant\w*|agent\w*|bot|modèle)"
    r"|\b(?:nota|mensaje|instrucciones?|aviso)\s+(?:para|al|a)\s+(?:el\s+|la\s+)?(?:[\w\-]+\s+)?"
    r"(?:ia|asistente\w*|agente\w*|bot|modelo)"
    r"|\b(?:nota|messaggio|istruzioni|avviso)\s+(?:per|al|all'|alla)\s*(?:l'|il\s+|la\s+)?(?:[\w\-]+\s+)?"
    r"(?:ia|assistente\w*|agente\w*|bot|modello)"
    r"|\b(?:opmerking|bericht|instructies?|notitie)\s+(?:voor|aan)\s+(?:de\s+|het\s+)?(?:[\w\-]+\s+)?"
    r"(?:ai|assistent\w*|agent\w*|bot|model)",
    re.IGNORECASE)
#: pseudo-instruction markers: a task heading (upper case, after any non-letter: "4,TODO:") or a
#: role heading / tag (strong on its own)
#: an AI agent mentioned by handle ("@assistant-bot")
_HANDLE = re.compile(r"@[\w\-]*(?:assistant|bot|agent|gpt|llm|copilot)[\w\-]*|@ai\b", re.IGNORECASE)
#: text that talks to whoever processes it ("when you summarise this channel", "si estás resumiendo")
_PROCESSING = re.compile(
    r"\b(?:when|while|if|as)\s+you(?:'re|\s+are)?\s+(?:summari[sz](?:e|ing)|read(?:ing)?|process(?:ing)?|"
    r"handl(?:e|ing)|analy[sz](?:e|ing)|pars(?:e|ing)|index(?:ing)?)\s+(?:this|these|the|my|our)\b"
    r"|\bsi\s+(?:est[aá]s|vous|stai)\s+(?:resumiendo|leyendo|procesando|r[ée]sumez|lisez|riassumendo|leggendo)"
    r"|\bwenn\s+du\s+(?:diese|dies|das|den|die)\b[^.\n]{0,40}(?:zusammenfasst|liest|verarbeitest)"
    r"|\bals\s+je\s+(?:dit|deze)\b[^.\n]{0,40}(?:samenvat|leest|verwerkt)",
    re.IGNORECASE)
_MARKER = re.compile(
    r"(?-i:(?:(?<![a-z])|(?<=\\n))(?:TODO|FIXME|TASK|ACTION(?:\s+REQUIRED)?|NEW\s+TASK|INSTRUCTIONS?|IMPORTANT))\s*[:!\-]")
_ROLE_MARKER = re.compile(
    r"#{1,6}\s*\(?\s*(?:system|admin|developer|assistant)(?:[_ \-]?(?:message|prompt|note|instructions?))?\s*\)"
    r"|(?:^|(?<=[\n'\"]))\s*#{1,6}\s*(?:system|admin|developer)(?:[_ \-]?(?:message|prompt|instructions?))?\b"
    r"|\[\s*(?:SYSTEM|ADMIN|ASSISTANT)\s*(?:MESSAGE|NOTE)?\s*\]",
    re.IGNORECASE)
_HIDDEN = (
    (re.compile(r"<!--.*?-->", re.DOTALL), 0.3, "an HTML comment"),
    (re.compile(r"<[^>]+style\s*=\s*['\"][^'\"]*(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0)"
                r"[^>]*>.*?</[^>]+>", re.IGNORECASE | re.DOTALL), 0.4, "text hidden with CSS"),
    (re.compile(r"[\U000E0000-\U000E007F]{4,}"), 0.9, "Unicode tag characters (invisible text)"),
    (re.compile(r"\w[\u200b\u200c\u200d\u2060\ufeff]\w(?:\w*[\u200b\u200c\u200d\u2060\ufeff]\w)+"), 0.7,
     "zero-width characters inside words"),
    (re.compile(r"!\[[^\]]*\]\(\s*https?://[^)\s]+\?[^)\s]*(?:\{|%7B|=\s*\$|=\[)[^)]*\)", re.IGNORECASE), 0.8,
     "a markdown image whose URL carries data"),
    (re.compile(r"\]\([^\s)]+\s+\"[^\"]{12,}\"\)"), 0.35, "a link title (shown only on hover)"),
)

#: the template rules run alongside; "send_request" is left to the tool-action signals, which
#: also ask who the request is for (it flagged bills and hand-offs between people)
SIGNAL_RULES: tuple[Rule, ...] = tuple(r for r in DEFAULT_RULES if r.name != "send_request")

#: a short double-quoted passage (a phrase quoted in an article, a string in code): text there is
#: more likely mentioned than meant, so what fires inside it counts half
_QUOTED = re.compile(r"(?<![\w\\])[\"“]([^\"”\n]{3,160}(?:\n[^\"”\n]{0,160}){0,2})[\"”]")
MENTION = 0.5
#: a markdown link's title: a quotation by syntax, not by intent
_LINK_TITLE = re.compile(r"\]\([^\s)]+\s+$")

_SENT_END = re.compile(r"[.!?](?=\s|$|['\"\\])|\n|\\n")
# (also in a rendered data structure: an escaped blank line, or the closing quote of a string value)
_PARA_END = re.compile(r"\n[ \t]*\n|'\n\s*[\w\-]+:\s|\n\s*-\s+[\w\-]+:\s|\\n[ \t]*\\n"
                       r"|(?<!\\)[\"'](?=\s*(?:,\s*[\"'\[{]|[}\]]|$))")
MAX_SPAN = 2000


@dataclass(frozen=True, slots=True)
class Weights:
    """How much each signal counts (noisy-OR of the signals that fire on one clause)."""

    marker: float = 0.5
    role_marker: float = 0.6
    handle: float = 0.35
    processing: float = 0.4
    imperative: float = 0.05
    tool_action: float = 0.25
    tool_object: float = 0.2
    tool_name: float = 0.55
    identifier: float = 0.2
    principal: float = 0.35
    addressed: float = 0.6


def _sentence_start(text: str, i: int) -> int:
    j = i
    while j > 0 and text[j - 1] not in ".!?\n":
        j -= 1
    while j < i and text[j].isspace():
        j += 1
    return j


def _clause_end(text: str, i: int) -> int:
    m = _SENT_END.search(text, i)
    return len(text) if m is None else (m.end() if m.group()[0] in ".!?" else m.start())


#: the closing quote of a single-quoted YAML value ('' is an escaped quote inside it)
_VALUE_END = re.compile(r"(?<!')'(?:'')*(?=[ \t]*\n\s*(?:-\s|[\w\-]+:\s)|\s*$)")


def _in_quoted_value(text: str, i: int) -> bool:
    o = max(text.rfind(": '", 0, i), text.rfind("- '", 0, i))
    return o >= 0 and _VALUE_END.search(text, o + 3, i) is None


def _span_end(text: str, i: int) -> int:
    """The end of the injected span that starts at ``i``: the quoted YAML value it is in (a tool's
    rendering keeps a multi-paragraph injection in one), else its paragraph."""
    if _in_quoted_value(text, i):
        m = _VALUE_END.search(text, i)
        if m is not None and m.start() - i <= MAX_SPAN:
            return m.start()
    m = _PARA_END.search(text, i)
    end = len(text) if m is None else m.start()
    return end if end - i <= MAX_SPAN else _clause_end(text, i)


def _markers(text: str) -> list[tuple[int, int, bool]]:
    """(start, end, is a role marker) of pseudo-instruction markers; a task marker in a code
    comment (``# TODO: ...``) is not one."""
    out = [(m.start(), m.end(), True) for m in _ROLE_MARKER.finditer(text)]
    for m in _MARKER.finditer(text):
        line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        if not re.search(r"#|//|/\*|--|;;", line):
            out.append((m.start(), m.end(), False))
    return out


_VERBS = "|".join(sorted((re.escape(v) for v in set(SYNONYMS) | set(OTHER_VERBS)), key=len, reverse=True))
#: an order: a clause that starts with one of the verbs (after "please", "now", ...)
_ORDER = re.compile(rf"{_START}{_POLITE}(?P<verb>{_VERBS})(?=[\s,:]+\S)", re.IGNORECASE)
#: an order right after a marker ("###(system_message) Please email ...")
_AFTER_MARKER = re.compile(rf"[\s'\"*:\-]*{_POLITE}(?P<verb>{_VERBS})(?=[\s,:]+\S)", re.IGNORECASE)


def _wrapped(text: str, i: int) -> bool:
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


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[_\W]+", name.lower()) if w]


class SignalDetector:
    """The default detector (see the module doc). ``tools``: the agent's tools; ``rules``: the
    template rules run alongside (default :data:`~.rules.DEFAULT_RULES`)."""

    def __init__(self, tools: Sequence[ToolSpec] = (), *, rules: Iterable[Rule] = SIGNAL_RULES,
                 weights: Weights = Weights(), name: str = "signals"):
        self.tools = tuple(tools)
        self.name = name
        self.weights = weights
        self._rules = RuleDetector(rules, name=name)
        # each word of an acting tool's name -> the tools it names ("send" -> send_money, send_email)
        self._acting: dict[str, set[str]] = {}
        for t in self.tools:
            if (t.effect or "external") != "read":
                for word in _words(t.name):
                    self._acting.setdefault(word, set()).add(t.name)
        # a tool's name where it cannot be an ordinary word (snake_case, or called), an argument
        # where it is assigned (a tool's YAML output has the same names as keys: "subject: ...")
        names = sorted({t.name for t in self.tools if "_" in t.name}, key=len, reverse=True)
        words = sorted({t.name for t in self.tools if "_" not in t.name and len(t.name) >= 4}, key=len, reverse=True)
        args = sorted({a for t in self.tools for a in t.args if len(a) >= 3}, key=len, reverse=True)
        alts = [rf"\b{re.escape(n)}\b" for n in names] + [rf"`{re.escape(n)}`|\b{re.escape(n)}\s*\(" for n in words]
        if args:
            alts.append(rf"\b(?:{'|'.join(map(re.escape, args))})\s*=\s*['\"\w$\[{{]")
        self._tool_name = re.compile("|".join(alts), re.IGNORECASE) if alts else None

    def with_tools(self, tools: Sequence[ToolSpec]) -> SignalDetector:
        return SignalDetector(tools, rules=self._rules.rules, weights=self.weights, name=self.name)

    # -- signals -------------------------------------------------------------------
    def _action(self, verb: str, clause: str) -> tuple[float, str | None]:
        """(weight, reason) of the order's verb as one of the agent's actions."""
        w = self.weights
        verb = verb.lower()
        if not self.tools:
            return (w.tool_action, f"asks to {verb} (a consequential action)") if verb in CONSEQUENTIAL else (0, None)
        stands = SYNONYMS.get(verb, (verb,))
        tools = {name for s in stands for name in self._acting.get(s, ())}
        if not tools:
            return 0, None
        low = clause.lower()
        objects = [t for t in tools if any(x in low for x in _words(t)[1:] if len(x) >= 3 and x not in stands)]
        if objects:
            p = 1 - (1 - w.tool_action) * (1 - w.tool_object)
            return p, f"asks for the agent's action {sorted(objects)[0]} ({verb} …)"
        return w.tool_action, f"asks for an action of the agent's tools ({verb}: {', '.join(sorted(tools))})"

    def _orders(self, text: str, markers: list[tuple[int, int, bool]]) -> list[tuple[int, int, float, list[str],
                                                                                    str]]:
        """The orders in ``text`` and the signals on each (``markers``: :func:`_markers` of it)."""
        w = self.weights
        out = []
        found = list(_ORDER.finditer(text))
        for _, me, _ in markers:
            m = _AFTER_MARKER.match(text, me)
            if m is not None:
                found.append(m)
        for m in found:
            if _wrapped(text, m.start()):
                continue
            s = m.start("verb")
            clause = text[s:_clause_end(text, m.end("verb"))]
            score, reasons = w.imperative, ["imperative"]

            def add(weight: float, reason: str) -> None:
                nonlocal score
                score = 1 - (1 - score) * (1 - weight)
                reasons.append(reason)

            aw, why = self._action(m.group("verb"), clause)
            if why:
                add(aw, why)
            if any(ms <= s and s - me <= 12 for ms, me, _ in markers):
                add(w.marker, "after a pseudo-instruction marker (TODO:, ###(system_message), ...)")
            if self._tool_name is not None and self._tool_name.search(clause):
                add(w.tool_name, "names one of the agent's tools or arguments")
            if _IDENT.search(clause):
                add(w.identifier, "names an account, address or URL")
            if _PRINCIPAL.search(clause):
                add(w.principal, "talks about the user in the third person")
            out.append((s, _span_end(text, s), score, reasons, "order"))
        return out

    def _spans(self, text: str) -> list[tuple[int, int, float, list[str], str]]:
        w = self.weights
        markers = _markers(text)
        out = self._orders(text, markers)
        if self._tool_name is not None:
            for m in self._tool_name.finditer(text):
                s = text.rfind("\n", 0, m.start()) + 1
                out.append((s, _span_end(text, m.start()), w.tool_name, ["names one of the agent's tools"], "tool"))
        for m in _ADDRESSED.finditer(text):
            out.append((m.start(), _span_end(text, m.end()), w.addressed, ["addressed to an AI agent"], "addressed"))
        for m in _HANDLE.finditer(text):
            out.append((m.start(), _span_end(text, m.end()), w.handle, ["an AI agent mentioned by handle"],
                        "handle"))
        for m in _PROCESSING.finditer(text):
            s = _sentence_start(text, m.start())
            out.append((s, _span_end(text, m.end()), w.processing,
                        ["talks to whoever processes the text (when you summarise this ...)"], "processing"))
        for s, e, role in markers:
            out.append((s, _span_end(text, e), w.role_marker if role else w.marker * 0.9,
                        ["a role heading in data (###(system_message), [SYSTEM])" if role
                         else "a pseudo-instruction marker (TODO:, ...)"], "marker"))
        for rx, weight, what in _HIDDEN:
            for m in rx.finditer(text):
                out.append((m.start(), m.end(), weight, [f"hidden from a human reader: {what}"], "hidden"))
        return out

    def detect(self, text: str, artifact_id: str | None = None) -> list[Finding]:
        if not text:
            return []
        # (a rendered data structure's string, with escaped newlines, is data, not a quotation)
        quoted = [m.span(1) for m in _QUOTED.finditer(text)
                  if "\\n" not in m.group(1) and not _LINK_TITLE.search(text, 0, m.start())]

        def mentioned(i: int) -> bool:
            return any(a <= i < b for a, b in quoted)

        raw = [self._mention(text, f, quoted) for f in self._rules.detect(text, artifact_id)]
        # different signals on one region reinforce each other (noisy-OR across kinds); more of the
        # same kind do not (a paragraph of several polite requests is not more of an attack)
        spans = sorted(self._spans(text), key=lambda x: (x[0], -x[1]))
        groups: list[list] = []
        # (what sits inside a short quotation counts half, once its signals are combined)
        for s, e, p, why, kind in spans:
            key = (kind, mentioned(s))
            if groups and s < groups[-1][1]:
                g = groups[-1]
                g[1] = max(g[1], e)
                g[2][key] = max(g[2].get(key, 0.0), p)
                g[3].extend(r for r in why if r not in g[3])
            else:
                groups.append([s, e, {key: p}, list(why)])
        for s, e, kinds, why in groups:
            said, quoted = 1.0, 1.0
            for (_, inside), q in kinds.items():
                if inside:
                    quoted *= 1 - q
                else:
                    said *= 1 - q
            p = 1 - said * (1 - (1 - quoted) * MENTION)
            while e > s and text[e - 1].isspace():
                e -= 1
            if e > s:
                raw.append(finding(text, s, e, round(min(p, 0.99), 3), "signals: " + "; ".join(why), self.name,
                                   artifact_id))
        return merge_findings(raw, text)

    def _mention(self, text: str, f: Finding, quoted: list[tuple[int, int]]) -> Finding:
        """A template rule's finding counts half when every rule match in it is inside a quotation."""
        inside = [(a, b) for a, b in quoted if f.start <= a and b <= f.end]
        if not inside:
            return f
        outside = list(f.text)
        for a, b in inside:
            outside[a - f.start:b - f.start] = " " * (b - a)
        rest = "".join(outside)
        if any(r.pattern.search(rest) for r in self._rules.rules):
            return f
        return finding(text, f.start, f.end, f.score * MENTION, f.reason + " (inside a quotation)", f.detector,
                       f.artifact_id)

    def __repr__(self) -> str:
        return f"SignalDetector(name={self.name!r}, tools={len(self.tools)})"
