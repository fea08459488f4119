"""Identifier extraction from observation text (pure logic).

An *identifier* is something a consequential tool call can be pointed at: an
IBAN, an account or card number, an e-mail address, a URL or domain, a phone
number, a crypto address. Extractors are small callables ``text -> identifiers``
kept in a registry (:func:`register_extractor` adds one); :func:`extract` runs
them on the text *and* on each percent-decoded layer of it, so an address hidden
as ``alice%40evil.com`` is found too. Every span refers to the text given.

Normalization (``Identifier.normalized``) is canonical per kind and robust to
case, whitespace, separators (spaces, dashes, dots) and percent-encoding, so a
laundered form compares equal to the plain one:
``DE89 3704 0044 0532 0130 00`` and ``de89370400440532013000`` both normalize
to ``DE89370400440532013000``. :func:`match_key` reduces a normalized form
further (lowercase alphanumerics, no scheme) for substring matching in sinks.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

# decode_layers/DecodedLayer/MAX_DECODE_ROUNDS are also imported from here by callers
from .decode import MAX_DECODE_ROUNDS, DecodedLayer, decode_layers, unquote_all  # noqa: F401
from .errors import DuplicateExtractor, InvalidExtractor, UnknownExtractor

IBAN = "iban"
ACCOUNT = "account"
CARD = "card"
PHONE = "phone"
EMAIL = "email"
URL = "url"
DOMAIN = "domain"
BTC = "btc"
ETH = "eth"


@dataclass(frozen=True, slots=True)
class Identifier:
    """One identifier found in a text.

    ``raw`` is exactly ``text[span[0]:span[1]]`` of the text it was found in
    (for an identifier found only after percent-decoding, the encoded slice);
    ``normalized`` is its canonical form.
    """

    kind: str
    raw: str
    normalized: str
    span: tuple[int, int]

    @property
    def key(self) -> str:
        """The substring-matching key of the normalized form (see :func:`match_key`)."""
        return match_key(self.normalized)


Extractor = Callable[[str], Iterable[Identifier]]


# -- normalization ----------------------------------------------------------

def _invisible(ch: str) -> bool:
    return unicodedata.category(ch) == "Cf"  # zero-width spaces, joiners, BOM, bidi marks


def prepare(text: str) -> str:
    """Common first step of every normalization: decode, NFKC, drop invisible chars, strip."""
    text = unicodedata.normalize("NFKC", unquote_all(text))
    return "".join(ch for ch in text if not _invisible(ch)).strip()


def _alnum(text: str) -> str:
    return "".join(ch for ch in text if ch.isalnum())


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def _norm_url(raw: str) -> str:
    s = "".join(prepare(raw).split())
    if s.lower().startswith("www."):
        s = "http://" + s
    try:
        parts = urlsplit(s)
    except ValueError:
        return s.lower()
    scheme = parts.scheme.lower()
    netloc = parts.netloc.lower().rstrip(".")
    for default in (":80", ":443"):
        if netloc.endswith(default):
            netloc = netloc[: -len(default)]
    path = "" if parts.path == "/" else parts.path
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def _norm_phone(raw: str) -> str:
    s = prepare(raw)
    digits = _digits(s)
    if s.startswith("+"):
        return "+" + digits
    if s.startswith("00") and len(digits) > 9:
        return "+" + digits[2:]
    return digits


def _norm_btc(raw: str) -> str:
    s = _alnum(prepare(raw))
    return s.lower() if s[:3].lower() in ("bc1", "tb1") else s  # base58 is case-sensitive


_NORMALIZERS: dict[str, Callable[[str], str]] = {
    IBAN: lambda r: _alnum(prepare(r)).upper(),
    ACCOUNT: lambda r: _alnum(prepare(r)).upper(),
    CARD: lambda r: _digits(prepare(r)),
    PHONE: _norm_phone,
    EMAIL: lambda r: "".join(prepare(r).split()).lower().removeprefix("mailto:"),
    URL: _norm_url,
    DOMAIN: lambda r: "".join(prepare(r).split()).lower().rstrip(".").removeprefix("www."),
    BTC: _norm_btc,
    ETH: lambda r: _alnum(prepare(r)).lower(),
}


def normalize(kind: str, raw: str) -> str:
    """Canonical form of ``raw`` as an identifier of ``kind``.

    Unknown kinds (custom extractors) get the generic form: decoded, NFKC,
    lowercase, whitespace removed.
    """
    fn = _NORMALIZERS.get(kind)
    if fn is not None:
        return fn(raw)
    return "".join(prepare(raw).split()).casefold()


def match_key(normalized: str) -> str:
    """Lowercase alphanumerics of an identifier, without URL scheme, ``www.`` or ``mailto:``.

    Two spellings of one identifier that differ only in case, separators or
    encoding share a key; a sink value contains the identifier when its own
    reduction contains the key.
    """
    s = prepare(normalized).casefold()
    if "://" in s:
        s = s.split("://", 1)[1]
    s = s.removeprefix("mailto:").removeprefix("www.")
    return _alnum(s)


def make_identifier(kind: str, text: str, start: int, end: int, normalized: str | None = None) -> Identifier:
    """Build an :class:`Identifier` for ``text[start:end]`` (for custom extractors)."""
    raw = text[start:end]
    return Identifier(kind, raw, normalize(kind, raw) if normalized is None else normalized, (start, end))


# -- checks -----------------------------------------------------------------

#: IBAN lengths per country (ISO 13616 registry).
IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
    "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
    "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
    "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32,
    "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
    "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31,
    "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28, "TL": 23,
    "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}


def iban_valid(candidate: str) -> bool:
    """ISO 7064 mod-97 check of a compact IBAN (letters and digits only)."""
    s = candidate.upper()
    if not (15 <= len(s) <= 34) or not s.isascii() or not s.isalnum():
        return False
    if not (s[:2].isalpha() and s[2:4].isdigit()):
        return False
    expected = IBAN_LENGTHS.get(s[:2])
    if expected is not None and expected != len(s):
        return False
    rearranged = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def luhn_valid(digits: str) -> bool:
    if not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


_DATE = re.compile(r"^(?:\d{4}[-./ ]\d{1,2}[-./ ]\d{1,2}|\d{1,2}[-./ ]\d{1,2}[-./ ]\d{4})$")


def _date_like(s: str) -> bool:
    return bool(_DATE.match(s.strip()))


# -- built-in extractors ----------------------------------------------------

_IBAN_RE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}[0-9]{2}(?:[ \-.\u00a0]?[A-Za-z0-9]){11,40}")


def extract_ibans(text: str) -> Iterator[Identifier]:
    """IBANs with separators in any case; the greedy match is trimmed to a mod-97-valid prefix."""
    pos = 0
    while (m := _IBAN_RE.search(text, pos)) is not None:
        pos = m.start() + 1  # a failed candidate may still hide a later IBAN in its tail
        positions = [m.start() + i for i, ch in enumerate(m.group()) if ch.isalnum()]
        compact = "".join(text[p] for p in positions).upper()
        expected = IBAN_LENGTHS.get(compact[:2])
        lengths = [expected] if expected else range(min(len(compact), 34), 14, -1)
        for n in lengths:
            if n > len(compact):
                continue
            end = positions[n - 1] + 1
            if end < len(text) and text[end].isalnum():
                continue  # runs on without a separator: not this IBAN
            if iban_valid(compact[:n]):
                yield Identifier(IBAN, text[m.start():end], compact[:n], (m.start(), end))
                pos = end
                break


# IBAN-shaped account numbers that fail mod-97 (test data and fakes use them),
# compact or printed in groups of four; groups must contain a digit so a
# following upper-case word is not swallowed.
_ACCOUNT_SHAPED_RE = re.compile(
    r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[A-Z0-9]{8,30}|(?:[ \-](?=[A-Z]{0,3}\d)[A-Z0-9]{4}){2,8}"
    r"(?:[ \-](?=[A-Z]{0,3}\d)[A-Z0-9]{1,3})?)(?![A-Za-z0-9])"
)
_ACCOUNT_DIGITS_RE = re.compile(r"(?<![\w.,])\d(?:[ \-]?\d){7,19}(?![\w]|[.,]\d)")


def extract_accounts(text: str) -> Iterator[Identifier]:
    """Bank account numbers: IBAN-shaped strings failing mod-97, and runs of 8-20 digits."""
    for m in _ACCOUNT_SHAPED_RE.finditer(text):
        compact = _alnum(m.group())
        if sum(c.isdigit() for c in compact) >= 8 and not iban_valid(compact):
            yield Identifier(ACCOUNT, m.group(), compact, m.span())
    for m in _ACCOUNT_DIGITS_RE.finditer(text):
        digits = _digits(m.group())
        if _date_like(m.group()) or (13 <= len(digits) <= 19 and luhn_valid(digits)):
            continue  # a date, or a card number (the card extractor reports it)
        yield Identifier(ACCOUNT, m.group(), digits, m.span())


_CARD_RE = re.compile(r"(?<![\w.,])\d(?:[ \-]?\d){12,18}(?![\w]|[.,]\d)")


def extract_cards(text: str) -> Iterator[Identifier]:
    """Payment card numbers: 13-19 digits, spaces or dashes allowed, Luhn-valid."""
    for m in _CARD_RE.finditer(text):
        digits = _digits(m.group())
        if luhn_valid(digits) and len(set(digits)) > 1:
            yield Identifier(CARD, m.group(), digits, m.span())


_PHONE_RE = re.compile(r"(?<![\w+])(?:\+|00)?\(?\d(?:[ .\-()\u00a0]{0,2}\d){6,16}(?![\w])")


def extract_phones(text: str) -> Iterator[Identifier]:
    """Phone numbers of 7-15 digits: with a ``+``/``00`` prefix, with separators, or 10+ digits."""
    for m in _PHONE_RE.finditer(text):
        s = m.group()
        digits = _digits(s)
        intl = s.startswith(("+", "00"))
        seps = any(not c.isdigit() for c in s.lstrip("+"))
        if not (7 <= len(digits) <= 15) or _date_like(s):
            continue
        if s.count(".") == 1 and not any(c in s for c in " -()+"):
            continue  # a decimal number
        if intl or seps or len(digits) >= 10:
            yield Identifier(PHONE, s, _norm_phone(s), m.span())


_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?"
_EMAIL_RE = re.compile(
    r"(?<![\w.+%\-])(?:mailto:)?[A-Za-z0-9](?:[A-Za-z0-9._%+\-]*[A-Za-z0-9_%+\-])?@"
    rf"{_LABEL}(?:\.{_LABEL})*\.[A-Za-z]{{2,24}}(?![\w\-])"
)


def extract_emails(text: str) -> Iterator[Identifier]:
    for m in _EMAIL_RE.finditer(text):
        yield Identifier(EMAIL, m.group(), normalize(EMAIL, m.group()), m.span())


_URL_RE = re.compile(r"(?i)\b(?:https?|ftp|wss?)://[^\s<>\"'`]+|(?<![\w.@/])www\.[^\s<>\"'`]+")
_TRAILING = ".,;:!?'\"]}>*"


def _trim_url(s: str) -> str:
    while s:
        if s[-1] in _TRAILING:
            s = s[:-1]
        elif s[-1] == ")" and s.count("(") < s.count(")"):
            s = s[:-1]
        else:
            break
    return s


#: a host ending in ".Word" (capitalized) with nothing after: a missing space after a sentence
_SENTENCE_TAIL = re.compile(r"\.[A-Z][a-z]+$")


def _drop_sentence_tail(raw: str) -> str:
    """``www.site.com.They`` -> ``www.site.com`` (when what remains still has a dot in its host)."""
    m = _SENTENCE_TAIL.search(raw)
    if m is None or "/" in raw.split("://", 1)[-1]:
        return raw
    head = raw[:m.start()]
    return head if "." in head.split("://", 1)[-1] else raw


def extract_urls(text: str) -> Iterator[Identifier]:
    for m in _URL_RE.finditer(text):
        raw = _drop_sentence_tail(_trim_url(m.group()))
        if "." not in raw.split("://", 1)[-1] and "localhost" not in raw.lower():
            continue
        yield Identifier(URL, raw, _norm_url(raw), (m.start(), m.start() + len(raw)))


#: endings that look like a TLD but are almost always file names in text
FILE_EXTENSIONS = frozenset(
    "txt json py md pdf csv tsv png jpg jpeg gif svg webp bmp ico html htm js mjs ts tsx jsx css "
    "scss yaml yml toml ini cfg conf log exe dll so zip gz tgz bz2 xz tar rar doc docx xls xlsx ppt "
    "pptx odt rtf xml sh bash rs go java kt cpp hpp cc rb php pl lua sql db sqlite bak tmp lock "
    "mp3 mp4 wav avi mov mkv ipynb whl egg pyc pkl pt bin dat iso img dmg apk jar war".split()
)
_DOMAIN_RE = re.compile(
    rf"(?<![\w\-.%])((?:{_LABEL}\.)+[A-Za-z]{{2,24}})(?![\w\-@]|\.[A-Za-z0-9])"
)


def extract_domains(text: str) -> Iterator[Identifier]:
    """Domain names anywhere (also inside URLs and e-mail addresses), file names excluded."""
    for m in _DOMAIN_RE.finditer(text):
        raw = m.group(1)
        tld = raw.rsplit(".", 1)[1]
        if tld.lower() in FILE_EXTENSIONS:
            continue
        if tld[0].isupper() and tld[1:].islower():
            # "Mr.Smith", "end.Next": a missing space, not a domain; "site.com.They": the domain before it
            raw = _drop_sentence_tail(raw)
            tld = raw.rsplit(".", 1)[-1]
            if ("." not in raw or not (tld.isalpha() and 2 <= len(tld) <= 24) or tld.lower() in FILE_EXTENSIONS
                    or (tld[0].isupper() and tld[1:].islower())):
                continue
        yield Identifier(DOMAIN, raw, normalize(DOMAIN, raw), (m.start(1), m.start(1) + len(raw)))


_BECH32_RE = re.compile(r"(?i)(?<![\w])(?:bc1|tb1)[ac-hj-np-z02-9]{11,71}(?![\w])")
_BASE58_RE = re.compile(r"(?<![\w])[13][a-km-zA-HJ-NP-Z1-9]{25,34}(?![\w])")


def extract_btc(text: str) -> Iterator[Identifier]:
    """Bitcoin addresses by shape: bech32 (``bc1``/``tb1``, one case) or base58 (``1``/``3``)."""
    for m in _BECH32_RE.finditer(text):
        s = m.group()
        if s == s.lower() or s == s.upper():
            yield Identifier(BTC, s, s.lower(), m.span())
    for m in _BASE58_RE.finditer(text):
        s = m.group()
        if any(c.isupper() for c in s) and any(c.islower() for c in s):
            yield Identifier(BTC, s, s, m.span())


_ETH_RE = re.compile(r"(?<![\w])0[xX][0-9a-fA-F]{40}(?![0-9A-Za-z])")


def extract_eth(text: str) -> Iterator[Identifier]:
    for m in _ETH_RE.finditer(text):
        yield Identifier(ETH, m.group(), m.group().lower(), m.span())


BUILTIN_EXTRACTORS: Mapping[str, Extractor] = {
    IBAN: extract_ibans,
    ACCOUNT: extract_accounts,
    CARD: extract_cards,
    PHONE: extract_phones,
    EMAIL: extract_emails,
    URL: extract_urls,
    DOMAIN: extract_domains,
    BTC: extract_btc,
    ETH: extract_eth,
}

#: kinds dropped when a longer identifier covers them (digits inside an IBAN, a URL)
WEAK_KINDS = frozenset({ACCOUNT, PHONE})


# -- the registry -----------------------------------------------------------

class ExtractorRegistry:
    """Named extractors, run in registration order."""

    def __init__(self, extractors: Mapping[str, Extractor] | None = None):
        self._extractors: dict[str, Extractor] = {}
        for name, fn in (extractors or {}).items():
            self.register(name, fn)

    def register(self, name: str, fn: Extractor, *, replace: bool = False) -> Extractor:
        if not isinstance(name, str) or not name:
            raise InvalidExtractor("an extractor needs a non-empty name")
        if not callable(fn):
            raise InvalidExtractor(f"extractor {name!r} is not callable: {fn!r}")
        if name in self._extractors and not replace:
            raise DuplicateExtractor(name)
        self._extractors[name] = fn
        return fn

    def unregister(self, name: str) -> None:
        if name not in self._extractors:
            raise UnknownExtractor(name, self.names())
        del self._extractors[name]

    def names(self) -> tuple[str, ...]:
        return tuple(self._extractors)

    def get(self, name: str) -> Extractor:
        try:
            return self._extractors[name]
        except KeyError:
            raise UnknownExtractor(name, self.names()) from None

    def __contains__(self, name: object) -> bool:
        return name in self._extractors

    def copy(self) -> "ExtractorRegistry":
        return ExtractorRegistry(self._extractors)

    def _run(self, name: str, fn: Extractor, text: str) -> list[Identifier]:
        found = list(fn(text) or ())
        for ident in found:
            if not isinstance(ident, Identifier):
                raise InvalidExtractor(f"extractor {name!r} returned {type(ident).__name__}, not Identifier")
        return found

    def extract(self, text: str, *, only: Iterable[str] | None = None, decode: bool = True) -> list[Identifier]:
        """Identifiers in ``text`` (and its percent-decoded layers), ordered by position.

        ``only`` restricts to some extractor names. Spans and ``raw`` always
        refer to ``text``; duplicates (same kind and normalized form at
        overlapping places) are reported once; weak kinds (account, phone)
        lying strictly inside another identifier are dropped.
        """
        if not text:
            return []
        names = self.names() if only is None else tuple(only)
        chosen = [(n, self.get(n)) for n in names]
        layers = decode_layers(text) if decode else decode_layers(text, rounds=0)
        found: list[Identifier] = []
        seen: dict[tuple[str, str], list[tuple[int, int]]] = {}
        for depth, layer in enumerate(layers):
            for name, fn in chosen:
                for ident in self._run(name, fn, layer.text):
                    s, e = ident.span
                    if depth:
                        if e <= s:
                            continue
                        s, e = layer.to_original(s, e)
                        ident = Identifier(ident.kind, text[s:e], ident.normalized, (s, e))
                    spans = seen.setdefault((ident.kind, ident.normalized), [])
                    k = bisect_right(spans, (s, e))
                    if any(ps < e and s < pe for ps, pe in spans[max(0, k - 1):k + 1]):
                        continue  # this identifier, found already at (about) this place
                    spans.insert(k, (s, e))
                    found.append(ident)
        return sorted(_drop_covered_weak(found), key=lambda i: (i.span[0], -i.span[1], i.kind))


def _drop_covered_weak(found: list[Identifier]) -> list[Identifier]:
    """Drop weak-kind identifiers lying strictly inside another identifier's span."""
    spans = sorted({i.span for i in found})
    starts = [sp[0] for sp in spans]
    prefix_end: list[int] = []
    best = -1
    for _, pe in spans:
        best = max(best, pe)
        prefix_end.append(best)
    max_end_at: dict[int, int] = {}
    for ps, pe in spans:
        max_end_at[ps] = max(max_end_at.get(ps, -1), pe)
    kept = []
    for i in found:
        s, e = i.span
        if i.kind in WEAK_KINDS:
            k = bisect_left(starts, s)  # spans starting strictly before s
            if (k and prefix_end[k - 1] >= e) or max_end_at.get(s, -1) > e:
                continue
        kept.append(i)
    return kept


_DEFAULT = ExtractorRegistry(BUILTIN_EXTRACTORS)


def default_registry() -> ExtractorRegistry:
    """The process-wide registry :func:`register_extractor` and :func:`extract` use."""
    return _DEFAULT


def builtin_registry() -> ExtractorRegistry:
    """A fresh registry holding only the built-in extractors."""
    return ExtractorRegistry(BUILTIN_EXTRACTORS)


def register_extractor(name: str, fn: Extractor | None = None, *, replace: bool = False,
                       registry: ExtractorRegistry | None = None):
    """Register ``fn`` under ``name``; without ``fn`` it is a decorator."""
    reg = registry or _DEFAULT
    if fn is None:
        return lambda f: reg.register(name, f, replace=replace)
    return reg.register(name, fn, replace=replace)


def unregister_extractor(name: str, *, registry: ExtractorRegistry | None = None) -> None:
    (registry or _DEFAULT).unregister(name)


def extract(text: str, *, only: Iterable[str] | None = None, decode: bool = True,
            registry: ExtractorRegistry | None = None) -> list[Identifier]:
    """Identifiers in ``text`` using ``registry`` (default: the process-wide one)."""
    return (registry or _DEFAULT).extract(text, only=only, decode=decode)
