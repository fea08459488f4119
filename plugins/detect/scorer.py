"""The default detector's scorer: :class:`SignalDetector` (the signals are listed in :mod:`.signals`).

It finds each signal's phrases (:mod:`.lexicon`) in the reader's view of a text, gives each
its clause or span (:mod:`.clauses`) and a weight (:class:`Weights`), and combines the weights
that fall on one region as a noisy-OR; a passage in quotation marks counts :data:`MENTION` of
its weight. The template rules of :mod:`.rules` run alongside (:data:`~.lexicon.SIGNAL_RULES`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .base import Finding, ToolSpec, finding, merge_findings
from .clauses import (
    CLAUSE_PUNCT, COMMA_COLON, FIELD_VALUE, JSON_VALUE, LINK_TITLE, QUOTED, SQUOTED, agent_windows, clause_end,
    near_agents, sentence_start, span_end, wrapped,
)
from .lexicon import (
    ADDRESSED, ADDRESSED_MORE, AFTER_MARKER, AGENT_FOR, CALLED, CALLING, CONCEAL, CONSEQUENTIAL, DECODE_ORDER,
    DECODE_WORDS, DEV_COMMENT, FOREIGN_INF, FOREIGN_ORDER, FOREIGN_VERBS, FOREIGN_WHO, FRONTED, HANDLE, HIDDEN,
    IDENT, INVISIBLE_RULES, LABEL, LABEL_ORDER, LABEL_STRONG, MARKER, MODAL, ORDER, PRINCIPAL, PROCESSING,
    PROCESSOR_FOREIGN, PROC_BEFORE, PROC_CLAUSE, PROC_VERBS, ROLE_MARKER, ROLE_SWITCH, ROLE_WORDS, SIGNAL_RULES,
    STANDING, STANDING_WORDS, SUBJECT, SYNONYMS, SYSTEM_WORDS, THIS, URL_TO_FILL, ZW_ANY, ZW_EDGE, trie,
)
from .normalize import ViewMap, reader_view
from .rules import Rule, RuleDetector

#: what a signal inside a quotation counts (it is more likely mentioned than meant)
MENTION = 0.5


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
    #: an order to an AI agent in the third person ("the assistant must forward ...")
    agent_order: float = 0.45
    #: ... that changes its orders from now on ("all assistants must now ...")
    standing_order: float = 0.2
    #: an IMPORTANT: heading (people write it to people: weak on its own and before an order)
    weak_marker: float = 0.2
    weak_marker_order: float = 0.25
    #: zero-width characters around words
    invisible_edge: float = 0.4
    #: a tool named neither called, given arguments nor asked for (documentation mentions them)
    tool_mention: float = 0.4
    #: an order kept from the agent's principal ("do not mention this step")
    conceal: float = 0.35
    #: an address to whatever program processes the text, or a note on how to process it
    #: (machine-like: "Agent completing this purchase:", "Anyone summarising this post:")
    processor: float = 0.6
    #: ... where a person could be meant ("whoever is reading this:")
    reader: float = 0.3
    #: an order to decode a hidden passage and act on it ("decode this and do what it says")
    decode_order: float = 0.55
    #: a passage decoded from base64, or words of mixed scripts (look-alike letters)
    encoded: float = 0.45


def _label_weights(m: re.Match[str]) -> tuple[float, float] | None:
    noun = m.group("noun")
    if m.group("agent"):
        if LABEL_STRONG.match(noun):
            return 0.6, 0.6
        return (0.45, 0.55) if LABEL_ORDER.match(noun) else (0.35, 0.5)
    if LABEL_STRONG.match(noun):
        return 0.45, 0.55
    return (0.3, 0.5) if LABEL_ORDER.match(noun) else None  # ("System notice:", "Admin update:": to people)


def _proc_verb_before(before: str) -> bool:
    """Whether ``before`` (the text before "this") ends as :data:`PROC_BEFORE` needs: a verb in
    -ing or of processing, maybe with "a summary of" after it, or "of"."""
    words = before.lower().split()[-4:]
    if not words:
        return False
    if words[-1].endswith("ing") or words[-1] in PROC_VERBS:
        return True
    return (len(words) == 4 and words[-3] in ("a", "an", "the") and words[-1] in ("of", "for", "on")
            and (words[-4].endswith("ing") or words[-4] in PROC_VERBS))


def _processors(text: str) -> Iterable[tuple[int, int, bool]]:
    """(start, end, whether a person could be meant) of each address to whatever processes the text
    (:data:`PROC_BEFORE`, :data:`PROCESSOR_FOREIGN`); the end is after its colon or comma."""
    for m in THIS.finditer(text):
        line = max(text.rfind("\n", 0, m.start()) + 1, m.start() - 120)
        before = text[line:m.start()]
        if not _proc_verb_before(before):  # (a cheap test first: cost)
            continue
        b = PROC_BEFORE.search(before)
        if b is None:
            continue
        c = COMMA_COLON.search(text, m.end())
        if b.group("reader") is not None and (c is None or text[c.start()] != ":"):
            continue
        person = bool(b.group("person") or b.group("reader") or b.group("person_verb")) and not b.group("machine_verb")
        yield line + b.start(), c.end() if c else m.end(), person
    if not text.isascii() or any(word in text for word in FOREIGN_WHO):  # (cost: most outputs are English)
        for m in PROCESSOR_FOREIGN.finditer(text):
            yield m.start(), m.end(), True


def _markers(text: str, w: Weights, low: str, windows: list[list[int]]) -> list[tuple[int, int, float, float, str]]:
    """(start, end, weight alone, weight added to an order right after it, reason) of the
    pseudo-instruction markers and labels; a task marker in a code comment (``# TODO: ...``) is not
    one."""
    out = [(m.start(), m.end(), w.role_marker, w.marker, "a role heading in data (###(system_message), [SYSTEM])")
           for m in ROLE_MARKER.finditer(text)]
    if any(word in low for word in ROLE_WORDS):
        out += [(m.start(), m.end(), w.marker, w.marker + 0.05, "a new role for the reader (from now on you are ...)")
                for m in ROLE_SWITCH.finditer(text)]
    if any(word in low for word in STANDING_WORDS):
        out += [(m.start(), m.end(), w.processing, w.marker, "a standing order for later requests (remember this "
                                                             "for every future request)")
                for m in STANDING.finditer(text)]
    for m in MARKER.finditer(text):
        line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        if not re.search(r"#|//|/\*|--|;;", line):
            if m.group("weak"):
                out.append((m.start(), m.end(), w.weak_marker, w.weak_marker_order, "an IMPORTANT: heading"))
            else:
                out.append((m.start(), m.end(), w.marker * 0.9, w.marker, "a pseudo-instruction marker (TODO:, ...)"))
    labels = (LABEL.finditer(text) if any(word in low for word in SYSTEM_WORDS)
              else near_agents(text, windows, (LABEL,)))
    for m in labels:
        weights = _label_weights(m)
        if weights is not None:
            whose = "the agent's" if m.group("agent") else "the system's"
            out.append((m.start(), m.end(), *weights, f"a label that gives {whose} orders ({m.group().strip()})"))
    return out


def _processing(text: str, w: Weights) -> list[tuple[int, int, float, float, str]]:
    """Like :func:`_markers`: the clauses that talk to whoever processes the text ("when you
    summarise this, ...", "Agent completing this purchase:"); an order right after one (after its
    comma or colon) is an order to the agent."""
    out = []
    for m in PROCESSING.finditer(text):
        # (the order follows the subordinate clause: "Once you have read this record, send ...")
        c = CLAUSE_PUNCT.search(text, m.end(), min(clause_end(text, m.end()), m.end() + 100))
        out.append((sentence_start(text, m.start()), c.end() if c else m.end(), w.processing, w.processing + 0.05,
                    "talks to whoever processes the text (when you summarise this ...)"))
    for a, b, person in _processors(text):
        weight = w.reader if person else w.processor
        c = COMMA_COLON.search(text, b, min(clause_end(text, b), b + 100)) if text[b - 1] not in ",:" else None
        out.append((a, c.end() if c else b, weight, max(weight, w.processing + 0.05),
                    "addressed to whatever processes the text (Agent completing this purchase: ...)"))
    return out


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
        # (each list as one trie: a long alternation of names costs a pass over the text per name)
        alts = [rf"\b(?:{trie(names)})\b"] if names else []
        if words:
            alts.append(rf"`(?:{trie(words)})`|\b(?:{trie(words)})\s*\(")
        if args:
            alts.append(rf"\b(?:{trie(args)})\s*=\s*['\"\w$\[{{]")
        # (led by the set of the names' first characters: the regex engine skips other positions fast)
        first = "".join(sorted({n[0].lower() for n in (*names, *words, *args)} | ({"`"} if words else set())))
        self._tool_name = (re.compile(f"(?=[{re.escape(first)}])(?:{'|'.join(alts)})", re.IGNORECASE) if alts
                           else None)

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

    def _orders(self, text: str, markers: list[tuple[int, int, float, float, str]],
                windows: list[list[int]]) -> list[tuple[int, int, float, list[str], str]]:
        """The orders in ``text`` and the signals on each (``markers``: :func:`_markers` of it,
        ``windows``: :func:`agent_windows`)."""
        w = self.weights
        out = []
        # (match, verb, where the span starts, the order's own signal: (weight, reason) or None)
        # (and what a fronted clause adds to the order after it)
        extra: dict[int, tuple[float, str]] = {}
        found: list[tuple[re.Match[str], str, int, tuple[float, str] | None]] = [
            (m, m.group("verb"), m.start("verb"), None) for m in ORDER.finditer(text) if not wrapped(text, m.start())]
        for _, me, _, _, _ in markers:
            m = AFTER_MARKER.match(text, me)
            if m is not None and not wrapped(text, m.start()):
                found.append((m, m.group("verb"), m.start("verb"), None))
        third = (w.agent_order, "an order to an AI agent in the third person (the assistant must ...)")
        for m in MODAL.finditer(text):
            begin = max(sentence_start(text, m.start()), m.start() - 160)
            sm = SUBJECT.search(text[begin:m.start()])
            if sm is not None:
                found.append((m, m.group("verb"), begin + sm.start("subj"), third))
        for m in near_agents(text, windows, (AGENT_FOR, FOREIGN_ORDER)):
            if m.re is AGENT_FOR:
                found.append((m, m.group("verb") or m.group("verb2"), sentence_start(text, m.start()), third))
                continue
            end = clause_end(text, m.end())
            vm = FOREIGN_INF.search(text, m.end(), end)
            if vm is not None:
                found.append((vm, vm.group(), m.start(), third))
            elif IDENT.search(text, m.end(), end):  # (a verb not listed, an account or address named)
                found.append((m, "do", m.start(), third))
        for m in FRONTED.finditer(text):
            vm = AFTER_MARKER.match(text, m.end())
            if vm is not None:
                if PROC_CLAUSE.search(text, m.start(), m.end()):
                    extra[vm.start("verb")] = (w.processing + 0.05, "after talks to whoever processes the text "
                                                                    "(once you have read this, ...)")
                found.append((vm, vm.group("verb"), sentence_start(text, m.start()), None))
        for m, verb, s, own in found:
            v = next((m.start(g) for g in ("verb", "verb2") if g in m.re.groupindex and m.start(g) >= 0), s)
            clause = text[v:clause_end(text, m.end())]
            score, reasons = w.imperative, ["imperative"]

            def add(weight: float, reason: str) -> None:
                nonlocal score
                score = 1 - (1 - score) * (1 - weight)
                reasons.append(reason)

            if (more := extra.get(v)) is not None:
                add(*more)
            aw, why = self._action(FOREIGN_VERBS.get(verb.lower(), verb), clause)
            named = self._tool_name is not None and self._tool_name.search(clause) is not None
            ident = IDENT.search(clause) is not None
            if own is not None:
                # (an agent's described duty is no order: "the assistant should answer briefly"; one that
                # acts, names an address or a tool, or starts "now" is)
                adv = (m.groupdict().get("adv") or m.groupdict().get("adv2") or "").lower()
                if not (why or named or ident or "now" in adv):
                    continue
                add(*own)
                if "now" in adv:  # ("the assistant must now ...": as "you must now" of the template rules)
                    add(w.standing_order, "a new standing order (... must now ...)")
            if why:
                add(aw, why)
            after = [(max(alone, wa), ms, why) for ms, me, alone, wa, why in markers if ms <= s and s - me <= 12]
            if after:
                best = max(after)
                if best[0] > 0:
                    add(best[0], f"after {best[2]}")
                s = min(ms for _, ms, _ in after)  # (the marker is part of what was injected)
            if named:
                add(w.tool_name, "names one of the agent's tools or arguments")
            if ident:
                add(w.identifier, "names an account, address or URL")
            if PRINCIPAL.search(clause):
                add(w.principal, "talks about the user in the third person")
            if score > w.imperative and CONCEAL.search(clause):  # (only what acts can be hidden: cost)
                add(w.conceal, "keeps something from the agent's principal (do not mention this step)")
            out.append((s, span_end(text, s), score, reasons, "order"))
        return out

    def _spans(self, text: str, original: str, where: ViewMap | None) -> list[tuple[int, int, float, list[str], str]]:
        """Every signal's (start, end, weight, reasons, kind) in ``text`` (the reader's view of
        ``original``; ``where`` maps it, None when they are the same)."""
        w = self.weights
        low = text.lower()
        windows = agent_windows(text, low)
        markers = _markers(text, w, low, windows) + _processing(text, w)
        out = self._orders(text, markers, windows)
        if self._tool_name is not None:
            for m in self._tool_name.finditer(text):
                s = text.rfind("\n", 0, m.start()) + 1
                # (a tool named as an example, "(e.g. send_email)", is mentioned; one called, given
                # arguments or asked for is used)
                used = CALLED.match(text, m.end()) or CALLING.search(text, s, m.start())
                out.append((s, span_end(text, m.start()), w.tool_name if used else w.tool_mention,
                            ["names one of the agent's tools"], "tool"))
        for m in near_agents(text, windows, (ADDRESSED, ADDRESSED_MORE)):
            out.append((m.start(), span_end(text, m.end()), w.addressed, ["addressed to an AI agent"], "addressed"))
        for m in HANDLE.finditer(text):
            out.append((m.start(), span_end(text, m.end()), w.handle, ["an AI agent mentioned by handle"],
                        "handle"))
        for m in (DECODE_ORDER.finditer(text) if any(word in low for word in DECODE_WORDS) else ()):
            s = m.start()
            out.append((s, span_end(text, m.end()), w.decode_order,
                        ["asks to decode a passage and act on it"], "decode"))
        for m in (URL_TO_FILL.finditer(text) if "http" in low else ()):
            s = sentence_start(text, m.start())
            out.append((s, span_end(text, m.end()), w.encoded + 0.25,
                        ["hidden from a human reader: a URL to be filled with someone's data"], "hidden"))
        for s, e, alone, _, why in markers:
            # (a marker right before an order counts once, in the order's score)
            m = AFTER_MARKER.match(text, e)
            if m is None or wrapped(text, m.start()):
                out.append((s, span_end(text, e), alone, [why], "marker"))
        out.extend(self._hidden(text, original, where))
        return out

    def _hidden(self, text: str, original: str, where: ViewMap | None) -> list[tuple[int, int, float, list[str], str]]:
        """Text hidden from a human reader; invisible characters are looked for in the original and
        placed on the view (where they are decoded or gone)."""
        def view(i: int) -> int:
            return i if where is None else where.to_view(i)

        out = []
        for k, (rx, weight, what) in enumerate(HIDDEN):
            invisible = k in INVISIBLE_RULES
            for m in rx.finditer(original if invisible else text):
                s, e = (view(m.start()), view(m.end())) if invisible else m.span()
                p = 0.1 if k == 0 and DEV_COMMENT.match(text, s) else weight
                out.append((s, max(e, s + 1) if invisible else e, p, [f"hidden from a human reader: {what}"],
                            "hidden"))
        if where is not None:
            alike = [d for d in where.decoded if d[2] == "look-alike"]
            for a, b, how in where.decoded:
                if how != "look-alike" or len(alike) >= 2:
                    what = {"base64": "a passage in base64", "spaced": "letters spaced out",
                            "look-alike": "look-alike letters of another script in words"}[how]
                    out.append((a, span_end(text, a) if how == "look-alike" else max(b, a + 1), self.weights.encoded,
                                [f"hidden from a human reader: {what}"], "hidden"))
        if len(ZW_ANY.findall(original, 1)) >= 2:
            for m in ZW_EDGE.finditer(original):
                s = view(m.start())
                out.append((s, span_end(text, s), self.weights.invisible_edge,
                            ["hidden from a human reader: zero-width characters around the text"], "hidden"))
        return out

    def detect(self, text: str, artifact_id: str | None = None) -> list[Finding]:
        if not text:
            return []
        read = reader_view(text)
        if read is None:
            return self._detect(text, text, None, artifact_id)
        view, where = read
        found = []
        for f in self._detect(view, text, where, artifact_id):
            s, e = where.span(f.start, f.end)
            found.append(finding(text, s, e, f.score, f.reason, f.detector, artifact_id))
        return merge_findings(found, text)

    def _detect(self, text: str, original: str, where: ViewMap | None, artifact_id: str | None) -> list[Finding]:
        """The findings on ``text``, the reader's view of ``original`` (see :meth:`_spans`)."""
        # (a rendered data structure's string, with escaped newlines, is data, not a quotation)
        # (and a string value of a JSON object, "key": "...", is the data itself)
        quoted = [m.span(1) for m in QUOTED.finditer(text)
                  if "\\n" not in m.group(1) and not LINK_TITLE.search(text, 0, m.start())
                  and not JSON_VALUE.search(text, max(0, m.start() - 40), m.start())
                  and not FIELD_VALUE.search(text[max(0, m.start() - 60):m.start()])]
        if "'" in text or "‘" in text:
            quoted += [m.span(m.lastindex or 1) for m in SQUOTED.finditer(text)]

        def mentioned(i: int) -> bool:
            while i < len(text) and text[i] in "\"“«„ ":  # (a span may start at the opening quote)
                i += 1
            return any(a <= i < b for a, b in quoted)

        raw = [self._mention(text, f, quoted) for f in self._rules.detect(text, artifact_id)]
        # different signals on one region reinforce each other (noisy-OR across kinds); more of the
        # same kind do not (a paragraph of several polite requests is not more of an attack)
        spans = sorted(self._spans(text, original, where), key=lambda x: (x[0], -x[1]))
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
            said, quoted_p = 1.0, 1.0
            for (_, inside), q in kinds.items():
                if inside:
                    quoted_p *= 1 - q
                else:
                    said *= 1 - q
            p = 1 - said * (1 - (1 - quoted_p) * MENTION)
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
