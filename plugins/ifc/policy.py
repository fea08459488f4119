"""Sink policy: may this tool call carry that identifier? (pure logic)

Sinks are tool arguments declared as identifier sinks (``send_money.recipient``,
``send_email.to``, ``fetch.url``; ``tool.*`` for every argument). :func:`decide`
looks at a call's sink values and returns a :class:`Decision`: when a value
carries an identifier introduced by an untrusted or revoked artifact that does
not occur in trusted input, the action is the policy ``mode`` (``block``,
``ask`` or ``audit``), else ``allow``.

Matching is deliberately conservative (a false block is preferred to a missed
exfiltration). Sink values are percent-decoded repeatedly, NFKC-normalized and
lowercased, then compared twice: with whitespace removed (the *soft* form,
``alice @ evil.com``) and reduced to alphanumerics (the *key* form, which
ignores every separator: ``DE89-3704.0044...``). Each sink value is searched
alone and all sink values of the call concatenated in argument order, so an
identifier split over two arguments, or embedded in a longer string, is found.
Domain-shaped identifiers match only on label boundaries (``evil.com`` is in
``pay.evil.com``, not in ``devil.community``). An untrusted match that lies
entirely inside an occurrence of a trusted identifier is ignored (digits of an
untrusted phone number inside the IBAN the user typed).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, Protocol

from unsee.middleware.graph import ProvenanceGraph

from .decision import ALLOW, Decision, Evidence
from .errors import InvalidMode, InvalidSinkSpec
from .extract import ExtractorRegistry, _alnum, default_registry, extract, match_key, prepare
from .labels import ENDORSED, REVOKED, UNTRUSTED, is_restricted, is_trusted, label_graph

Mode = Literal["block", "ask", "audit"]
MODES: tuple[str, ...] = ("block", "ask", "audit")

#: keys shorter than this are not matched separator-blind (too many accidental hits)
MIN_KEY_LENGTH = 6

_NAME = re.compile(r"^[A-Za-z_][\w\-]*$")


# -- sinks --------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SinkSpec:
    """One identifier sink: argument ``arg`` of tool ``tool`` (``*``: every argument)."""

    tool: str
    arg: str

    def __post_init__(self) -> None:
        if not isinstance(self.tool, str) or not _NAME.match(self.tool):
            raise InvalidSinkSpec(f"{self.tool}.{self.arg}", f"bad tool name {self.tool!r}")
        if not isinstance(self.arg, str) or not (self.arg == "*" or _NAME.match(self.arg)):
            raise InvalidSinkSpec(f"{self.tool}.{self.arg}", f"bad argument name {self.arg!r}")

    def __str__(self) -> str:
        return f"{self.tool}.{self.arg}"

    @classmethod
    def parse(cls, spec: "str | SinkSpec") -> "SinkSpec":
        """``"send_money.recipient"`` -> ``SinkSpec("send_money", "recipient")``."""
        if isinstance(spec, SinkSpec):
            return spec
        if not isinstance(spec, str):
            raise InvalidSinkSpec(spec, "expected a string 'tool.arg'")
        tool, dot, arg = spec.strip().rpartition(".")
        if not dot or not tool or not arg:
            raise InvalidSinkSpec(spec)
        return cls(tool, arg)

    def covers(self, tool: str, arg: str) -> bool:
        return tool == self.tool and (self.arg == "*" or arg == self.arg)


def parse_sinks(specs: "str | SinkSpec | Iterable[str | SinkSpec]") -> tuple[SinkSpec, ...]:
    """Sinks from configuration: a list of specs, or one string separated by commas/whitespace."""
    if isinstance(specs, SinkSpec):
        return (specs,)
    if isinstance(specs, str):
        specs = [s for s in re.split(r"[,\s]+", specs) if s]
    out: dict[SinkSpec, None] = {}
    for s in specs:
        out[SinkSpec.parse(s)] = None
    return tuple(out)


SINKS_ATTRIBUTE = "__unsee_sinks__"


def identifier_sinks(*args: str) -> Callable[[Any], Any]:
    """Decorator marking arguments of a tool function as identifier sinks.

    ``@identifier_sinks("recipient")`` on ``def send_money(recipient, amount)``;
    :func:`declared_sinks` reads the marks back (adapters call it).
    """
    for a in args:
        if not isinstance(a, str) or not (a == "*" or _NAME.match(a)):
            raise InvalidSinkSpec(a, "expected an argument name")

    def mark(fn: Any) -> Any:
        setattr(fn, SINKS_ATTRIBUTE, tuple(dict.fromkeys(getattr(fn, SINKS_ATTRIBUTE, ()) + args)))
        return fn

    return mark


def declared_sinks(tool: Any, name: str | None = None) -> tuple[SinkSpec, ...]:
    """Sinks marked with :func:`identifier_sinks` on a function (or a tool object's ``func``)."""
    target = tool
    marks = getattr(tool, SINKS_ATTRIBUTE, None)
    for attr in ("func", "coroutine"):
        if marks is None and getattr(tool, attr, None) is not None:
            target = getattr(tool, attr)
            marks = getattr(target, SINKS_ATTRIBUTE, None)
    tool_name = name or getattr(tool, "name", None) or getattr(target, "__name__", None)
    if not marks:
        return ()
    if not isinstance(tool_name, str):
        raise InvalidSinkSpec(tool, "cannot tell the tool's name; pass name=")
    return tuple(SinkSpec(tool_name, a) for a in marks)


# -- deciding -----------------------------------------------------------------

def _check_mode(mode: str) -> str:
    if mode not in MODES:
        raise InvalidMode(mode, MODES)
    return mode


def _leaves(value: Any) -> list[str]:
    """String leaves of an argument value, in order."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (bytes, bytearray)):
        return [bytes(value).decode("utf-8", "replace")]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _leaves(v)]
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [s for v in items for s in _leaves(v)]
    return [str(value)]


@lru_cache(maxsize=1 << 16)
def _soft(text: str) -> str:
    return "".join(prepare(text).casefold().split())


_key = lru_cache(maxsize=1 << 16)(match_key)  # identifiers recur across calls: compute each form once


_DOMAIN_SHAPE = re.compile(r"^[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?)*\.[a-z]{2,}$")


def _occurrences(hay: str, needle: str) -> list[tuple[int, int]]:
    out, i = [], hay.find(needle)
    while i >= 0 and needle:
        out.append((i, i + len(needle)))
        i = hay.find(needle, i + 1)
    return out


def _domain_occurrences(hay: str, domain: str) -> list[tuple[int, int]]:
    pat = re.compile(r"(?<![a-z0-9\-])" + re.escape(domain) + r"(?![a-z0-9\-]|\.[a-z0-9])")
    return [m.span() for m in pat.finditer(hay)]


#: trusted identifiers: all of them, or a function of a haystack's soft and key forms giving
#: (at least) those whose soft form is in the first or whose key is in the second
TrustedIdentifiers = "Iterable[str] | Callable[[str, str], Iterable[str]]"


class _Haystack:
    """One searchable sink string in its soft and key forms, with trusted regions."""

    def __init__(self, text: str, args: tuple[str, ...], trusted: TrustedIdentifiers):
        self.args = args
        self.soft = _soft(text)
        self.key = _alnum(self.soft)
        self.soft_cover: list[tuple[int, int]] = []
        self.key_cover: list[tuple[int, int]] = []
        # (a trusted identifier occurring in neither form covers nothing: a function may leave it out)
        for t in (trusted(self.soft, self.key) if callable(trusted) else trusted):
            st, kt = _soft(t), _key(t)
            if st:
                self.soft_cover += _occurrences(self.soft, st)
            if kt:
                self.key_cover += _occurrences(self.key, kt)

    @staticmethod
    def _uncovered(spans: list[tuple[int, int]], cover: list[tuple[int, int]]) -> bool:
        return any(not any(a <= s and e <= b for a, b in cover) for s, e in spans)

    def may_contain(self, identifier: str) -> bool:
        """A cheap necessary condition for :meth:`contains` (plain substring tests)."""
        soft = _soft(identifier)
        return bool(soft) and (soft.removeprefix("www.") in self.soft or _key(identifier) in self.key)

    def contains(self, identifier: str, min_key_length: int) -> bool:
        if not self.may_contain(identifier):
            return False
        soft = _soft(identifier)
        if _DOMAIN_SHAPE.match(soft):
            bare = soft.removeprefix("www.")
            return self._uncovered(_domain_occurrences(self.soft, bare), self.soft_cover)
        if self._uncovered(_occurrences(self.soft, soft), self.soft_cover):
            return True
        key = _key(identifier)
        return len(key) >= min_key_length and self._uncovered(_occurrences(self.key, key), self.key_cover)


def _haystacks(tool: str, args: Mapping[str, Any], sinks: Iterable[SinkSpec],
               trusted: TrustedIdentifiers) -> tuple[tuple[str, ...], list[_Haystack]]:
    sinks = tuple(sinks)
    names = tuple(a for a in args if any(s.covers(tool, a) for s in sinks))
    trusted = trusted if callable(trusted) else tuple(trusted)
    hays: list[_Haystack] = []
    joined_all: list[str] = []
    for name in names:
        leaves = _leaves(args[name])
        if len(leaves) > 1:
            hays += [_Haystack(leaf, (name,), trusted) for leaf in leaves]
        joined = "".join(leaves)
        hays.append(_Haystack(joined, (name,), trusted))
        joined_all.append(joined)
    if len(names) > 1:
        hays.append(_Haystack("".join(joined_all), names, trusted))
    return names, hays


def _split_args(args: Mapping[str, Any], names: tuple[str, ...], ident: str, trusted: TrustedIdentifiers,
                min_key_length: int) -> tuple[str, ...]:
    for width in range(2, len(names) + 1):
        for i in range(len(names) - width + 1):
            window = names[i:i + width]
            text = "".join("".join(_leaves(args[n])) for n in window)
            if _Haystack(text, window, trusted).contains(ident, min_key_length):
                return window
    return names


def _order(ids: Iterable[str], labels: Mapping[str, frozenset[str]] | None) -> list[str]:
    ids = set(ids)
    if labels:
        first = [i for i in labels if i in ids]
        return first + sorted(ids - set(first))
    return sorted(ids)


class Known(Protocol):
    """What :func:`decide` reads of a session's identifiers.

    :class:`GivenIdentifiers` answers from complete mappings (what :func:`decide` is
    given); an index of a session (:mod:`.index`) answers from what matches the call's
    sink values, so a decision costs what the call carries, not what the session holds.
    Both must give the same decisions: a method may leave out only what cannot matter.
    """

    #: labels of artifacts by id (``get``; false when there are none), for the evidence
    labels: Any

    def untrusted_in(self, hays: list[_Haystack]) -> Mapping[str, Iterable[str]]:
        """Identifiers introduced by untrusted or revoked artifacts, with those artifacts'
        ids: at least those that ``may_contain`` says some haystack may hold."""

    def is_trusted(self, identifier: str) -> bool:
        """Whether trusted input carries it (the same, or the same key or soft form)."""

    def trusted_in(self, soft: str, key: str) -> Iterable[str]:
        """Trusted identifiers: at least those whose soft form is in ``soft`` or key in ``key``."""

    def endorsed_in(self, hays: list[_Haystack]) -> Mapping[str, Iterable[str]] | None:
        """Identifiers endorsed observations carry, with their ids (at least those some
        haystack may hold); None or empty when nothing is endorsed."""

    def order(self, ids: Iterable[str]) -> list[str]:
        """Artifact ids in recording order."""


class GivenIdentifiers:
    """:class:`Known` from complete mappings (see :func:`decide`'s arguments)."""

    def __init__(self, untrusted: Mapping[str, Iterable[str]], trusted: Iterable[str],
                 labels: Mapping[str, frozenset[str]] | None = None,
                 endorsed: Mapping[str, Iterable[str]] | None = None):
        self._untrusted = untrusted
        self._trusted = set(trusted)
        self._trusted_keys = {_key(t) for t in self._trusted} - {""}
        self._trusted_soft = {_soft(t) for t in self._trusted} - {""}
        self.labels = labels
        self._endorsed = endorsed

    def untrusted_in(self, hays: list[_Haystack]) -> Mapping[str, Iterable[str]]:
        return self._untrusted

    def is_trusted(self, identifier: str) -> bool:
        return (identifier in self._trusted or _key(identifier) in self._trusted_keys
                or _soft(identifier) in self._trusted_soft)

    def trusted_in(self, soft: str, key: str) -> Iterable[str]:
        return self._trusted

    def endorsed_in(self, hays: list[_Haystack]) -> Mapping[str, Iterable[str]] | None:
        return self._endorsed

    def order(self, ids: Iterable[str]) -> list[str]:
        return _order(ids, self.labels)


def decide(
    tool: str,
    args: Mapping[str, Any],
    sinks: "Iterable[SinkSpec | str]",
    untrusted_identifiers: Mapping[str, Iterable[str]],
    trusted_identifiers: Iterable[str],
    mode: str = "block",
    *,
    labels: Mapping[str, frozenset[str]] | None = None,
    min_key_length: int = MIN_KEY_LENGTH,
    endorsed_identifiers: Mapping[str, Iterable[str]] | None = None,
) -> Decision:
    """Decide one tool call.

    ``untrusted_identifiers`` maps each normalized identifier introduced by an
    untrusted or revoked artifact to those artifacts' ids;
    ``trusted_identifiers`` are normalized identifiers present in trusted
    input (both from :func:`identifiers_by_label`). ``labels`` (from
    :func:`~unsee.plugins.ifc.labels.label_graph`) puts each evidence
    artifact's labels on the decision and orders evidence by recording order.
    ``endorsed_identifiers`` (from :func:`endorsed_identifiers`) maps
    identifiers that endorsed observations carry to those observations: an
    untrusted identifier they vouch for is allowed, and the decision names them.
    """
    known = GivenIdentifiers(untrusted_identifiers, trusted_identifiers, labels, endorsed_identifiers)
    return decide_known(tool, args, sinks, known, mode, min_key_length=min_key_length)


def decide_known(tool: str, args: Mapping[str, Any], sinks: "Iterable[SinkSpec | str]", known: Known,
                 mode: str = "block", *, min_key_length: int = MIN_KEY_LENGTH) -> Decision:
    """:func:`decide` on what ``known`` says of the session's identifiers."""
    mode = _check_mode(mode)
    sinks = parse_sinks(sinks)
    names, hays = _haystacks(tool, args, sinks, known.trusted_in)
    if not names:
        return Decision(ALLOW, tool, (), None, (), (), f"{tool}: no identifier sink among its arguments", mode)

    untrusted_identifiers = known.untrusted_in(hays)
    matched: list[str] = []
    hit_args: set[str] = set()
    evidence_ids: set[str] = set()
    for ident in sorted(untrusted_identifiers, key=lambda i: (-len(_key(i)), i)):
        if not any(h.may_contain(ident) for h in hays):
            continue  # most identifiers of a long session are nowhere in this call's arguments
        if known.is_trusted(ident):
            continue  # the user (or other trusted input) supplied it too
        where = [h for h in hays if h.contains(ident, min_key_length)]
        if not where:
            continue
        matched.append(ident)
        single = [h for h in where if len(h.args) == 1]
        if single:
            hit_args.update(a for h in single for a in h.args)
        else:  # split over arguments: name the shortest run of them that carries it
            hit_args.update(_split_args(args, names, ident, known.trusted_in, min_key_length))
        evidence_ids.update(untrusted_identifiers[ident])

    checked = ", ".join(f"{tool}.{a}" for a in names)
    labels = known.labels
    # which endorsed observations carry an identifier that is in a sink value (they vouched for it)
    endorsed_ids: set[str] = set()
    endorsed_identifiers = known.endorsed_in(hays)
    if endorsed_identifiers:
        bare = _haystacks(tool, args, sinks, ())[1]
        for ident, ids in endorsed_identifiers.items():
            if any(h.contains(ident, min_key_length) for h in bare):
                endorsed_ids.update(ids)
    endorsements = tuple(
        Evidence(i, tuple(sorted(labels.get(i, frozenset({ENDORSED})))) if labels else (ENDORSED,))
        for i in known.order(endorsed_ids))
    if not matched:
        why = "carry no identifier from untrusted or revoked data"
        if endorsements:
            why = ("carry identifiers from untrusted data only where endorsed observations vouch for them "
                   f"({', '.join(e.artifact_id for e in endorsements[:5])})")
        return Decision(ALLOW, tool, names, None, (), (), f"{tool}: sink values ({checked}) {why}", mode,
                        endorsements)

    evidence = tuple(
        Evidence(i, tuple(sorted(labels.get(i, frozenset()))) if labels else ())
        for i in known.order(evidence_ids)
    )
    hit = tuple(a for a in names if a in hit_args)
    return Decision(mode, tool, hit, matched[0], tuple(matched), evidence,
                    _reason(mode, tool, hit, matched, evidence), mode, endorsements)


def _reason(mode: str, tool: str, args: tuple[str, ...], matched: list[str],
            evidence: tuple[Evidence, ...]) -> str:
    found = {lbl for e in evidence for lbl in e.labels}
    label = " and ".join(x for x in (UNTRUSTED, REVOKED) if x in found) or "untrusted or revoked"
    where = ", ".join(repr(a) for a in args)
    noun, verb = ("argument", "carries") if len(args) == 1 else ("arguments", "carry")
    # Never repeat the value into the model's context: a revoked one would come back, and an
    # untrusted one would gain a new carrier (the error message is itself a tool return).
    # People read it from Decision.identifiers; span events carry keyed hashes.
    what = "an identifier" if len(matched) == 1 else f"{len(matched)} identifiers"
    shown = ", ".join(e.artifact_id for e in evidence[:5]) + (" ..." if len(evidence) > 5 else "")
    facts = (f"{noun} {where} of {tool} {verb} {what} that came from {label} data "
             f"(artifact{'s' if len(evidence) != 1 else ''} {shown}) and not from trusted input")
    if mode == "block":
        return (f"Blocked by the information-flow policy: {facts}. The call was not executed; "
                "use only identifiers the user gave you, or ask the user to confirm.")
    if mode == "ask":
        return f"Needs human approval (information-flow policy): {facts}."
    return f"Allowed and recorded (information-flow policy in audit mode): {facts}."


# -- identifiers per label ----------------------------------------------------

#: (artifact id, content hash, extractor names) -> normalized identifiers of that content
#: (artifact id, content hash, extractor names) -> (fingerprint of the text read, its normalized identifiers)
ExtractionCache = MutableMapping[tuple[str, str, tuple[str, ...]], tuple[tuple[int, int], tuple[str, ...]]]


def _identifiers_of(graph: ProvenanceGraph, aid: str, registry: ExtractorRegistry | None,
                    cache: ExtractionCache | None) -> tuple[str, ...]:
    """Normalized identifiers in an artifact's content, through ``cache`` when its content hash is known."""
    h = graph.get(aid).content_hash if cache is not None else ""
    key = (aid, h, (registry or default_registry()).names()) if h else None
    text = graph.content(aid)
    # The record's hash is the text as recorded; erasure rewrites the text in place and keeps
    # the record, so an entry counts only for the very text it was made from.
    seen = (len(text), hash(text)) if text else (0, 0)
    hit = cache.get(key) if key is not None else None
    if hit is not None and hit[0] == seen:
        return hit[1]
    found = tuple(dict.fromkeys(i.normalized for i in extract(text, registry=registry))) if text else ()
    if key is not None:
        cache[key] = (seen, found)  # (replacing the entry of a text that is gone)
    return found


def identifiers_by_label(
    graph: ProvenanceGraph,
    labels: Mapping[str, frozenset[str]],
    *,
    registry: ExtractorRegistry | None = None,
    cache: ExtractionCache | None = None,
) -> tuple[dict[str, set[str]], set[str]]:
    """Identifiers in each artifact's content (``graph.content``), split by label.

    Returns ``(untrusted, trusted)``: ``untrusted`` maps each normalized
    identifier found in an untrusted or revoked artifact to those artifacts'
    ids; ``trusted`` is the set of normalized identifiers found in trusted
    artifacts. Artifacts without content or without labels are skipped.
    ``cache`` (any mutable mapping, kept by the caller across decisions)
    memoizes extraction per artifact id, content hash and extractor set, so a
    long session is not re-read at every sink call.
    """
    untrusted: dict[str, set[str]] = {}
    trusted: set[str] = set()
    for a in graph:
        lbl = labels.get(a.id)
        if lbl is None:
            continue
        restricted, ok = is_restricted(lbl), is_trusted(lbl)
        if not (restricted or ok):
            continue
        for ident in _identifiers_of(graph, a.id, registry, cache):
            if restricted:
                untrusted.setdefault(ident, set()).add(a.id)
            else:
                trusted.add(ident)
    return untrusted, trusted


def endorsed_identifiers(
    graph: ProvenanceGraph,
    labels: Mapping[str, frozenset[str]],
    *,
    registry: ExtractorRegistry | None = None,
    cache: ExtractionCache | None = None,
) -> dict[str, set[str]]:
    """Identifiers carried by endorsed observations, each mapped to those observations' ids."""
    out: dict[str, set[str]] = {}
    for aid, lbl in labels.items():
        if ENDORSED not in lbl or not is_trusted(lbl) or aid not in graph:
            continue
        for ident in _identifiers_of(graph, aid, registry, cache):
            out.setdefault(ident, set()).add(aid)
    return out


def evaluate(
    graph: ProvenanceGraph,
    tool: str,
    args: Mapping[str, Any],
    sinks: "Iterable[SinkSpec | str]",
    *,
    trusted_sources: Iterable[str] = (),
    revoked: Iterable[str] = (),
    mode: str = "block",
    registry: ExtractorRegistry | None = None,
    reset_at_trusted_sources: bool = False,
    endorsed: Iterable[str] = (),
    cache: ExtractionCache | None = None,
) -> Decision:
    """Label the graph, collect identifiers, decide: the whole pipeline in one call.

    ``endorsed``: ids of observations whose content was vetted (see
    :func:`~unsee.plugins.ifc.labels.label_graph`); ``cache``: see
    :func:`identifiers_by_label`.
    """
    _check_mode(mode)
    labels = label_graph(graph, trusted_sources, revoked, reset_at_trusted_sources=reset_at_trusted_sources,
                         endorsed=endorsed)
    untrusted, trusted = identifiers_by_label(graph, labels, registry=registry, cache=cache)
    vouched = endorsed_identifiers(graph, labels, registry=registry, cache=cache) if endorsed else None
    return decide(tool, args, sinks, untrusted, trusted, mode, labels=labels, endorsed_identifiers=vouched)
