"""The text as its reader sees it, with a map back to the original characters (pure logic).

An injection can hide its words from a template without hiding them from the
model that reads them: zero-width characters between or around the letters
(``s\\u200bend``), Unicode tag characters (invisible ASCII: U+E0020..U+E007E
stand for the printable ASCII characters), compatibility forms that NFKC folds
(fullwidth ``ｓｅｎｄ``, mathematical bold ``𝐬𝐞𝐧𝐝``, ligatures, no-break
spaces), JSON ``\\uXXXX`` escapes in an API response's string values, HTML
character references (``&#115;end``, ``&nbsp;``), Cyrillic or Greek look-alike
letters inside a Latin word (``Аssistаnt``), base64 that decodes to words, and
letters spaced out (``s e n d   t h e``).

:func:`reader_view` returns that text — invisible characters dropped, tag
characters decoded, NFKC applied, escapes and references decoded — and a
:class:`ViewMap` that turns a span of the view back into a span of the original
(a span that starts or ends next to dropped characters takes them in, so a
finding over an order wrapped in zero-width characters covers them too), and
records in :attr:`ViewMap.decoded` what was hidden from a human reader and
decoded (base64, spaced letters, look-alikes). Line
breaks escaped as ``\\n`` and escaped quotes stay as they are: the detectors
read a rendered data structure by them.

It returns None when there is nothing to decode (plain ASCII without escapes:
the common case costs one scan).
"""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Sequence

#: characters a reader never sees: zero-width (space, non-joiner, joiner), word joiner and
#: invisible operators, soft hyphen, Mongolian vowel separator, bidirectional controls, BOM
INVISIBLE = frozenset("\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                      "\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\ufeff")
_TAGS = (0xE0000, 0xE007F)

#: text hidden in plain ASCII: a base64 run, letters spaced out ("s e n d   t h e")
_ENCODED = (r"(?P<b64>(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{28,}={0,2}(?![A-Za-z0-9+/=]))"
            r"|(?P<spaced>(?<!\S)[^\s](?: {1,3}[^\s]){7,}(?!\S))")
#: cheap tests first (most texts have neither; the regexes that look for them cost more): a long
#: token, then base64 in it; four letters spaced out
_LONG_TOKEN = re.compile(r"\S{28,}")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{28}")
_SPACED_LETTERS = re.compile(r"[A-Za-z] [A-Za-z] [A-Za-z] [A-Za-z] ")


def _maybe_hidden(text: str) -> bool:
    """Whether ``text`` may hide words in base64 or spaced-out letters."""
    return (any(_BASE64_RUN.search(t) for t in _LONG_TOKEN.findall(text))
            or _SPACED_LETTERS.search(text) is not None)
#: what may need decoding: a JSON \\u escape, an HTML character reference, a non-ASCII run, or
#: text hidden in ASCII
_ESCAPES = r"\\u[0-9a-fA-F]{4}|&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,9});|[^\x00-\x7f]+"
_SPECIAL = re.compile(_ESCAPES)
_SPECIAL_ENCODED = re.compile(_ENCODED + "|" + _ESCAPES)
#: Cyrillic and Greek letters that look like Latin ones (read as Latin inside a word of Latin letters)
LOOK_ALIKES = str.maketrans("аеорсухіјѕԁһӏԛԝАВЕКМНОРСТУХІЈЅοαρνικτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
                            "aeopcyxijsdhlqwABEKMHOPCTYXIJSoapvikTuxABEZHIKMNOPTYX")
_LOOK_ALIKE_SET = frozenset("аеорсухіјѕԁһӏԛԝАВЕКМНОРСТУХІЈЅοαρνικτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ")
_SURROGATE_LOW = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")


class ViewMap:
    """Maps view offsets to original offsets: piecewise, one piece per copied run or decoded unit.

    ``pieces``: (view start, original start, view length, original length), in order; a copied run
    has equal lengths (offsets map one to one), a decoded unit maps as a whole."""

    __slots__ = ("pieces", "view_len", "text", "decoded", "_starts", "_ostarts")

    def __init__(self, pieces: Sequence[tuple[int, int, int, int]], view_len: int, text: str,
                 decoded: Sequence[tuple[int, int, str]] = ()):
        self.pieces = tuple(pieces)
        #: (view start, view end, how) of text that was hidden from a human reader and decoded:
        #: ``base64``, ``spaced`` (letters spaced out), ``look-alike`` (Cyrillic or Greek letters
        #: inside a Latin word)
        self.decoded = tuple(decoded)
        self.view_len = view_len
        self.text = text
        self._starts = [p[0] for p in self.pieces]
        self._ostarts = [p[1] for p in self.pieces]

    def start(self, i: int) -> int:
        """The original offset where view character ``i`` starts (dropped characters just before
        it included)."""
        if i >= self.view_len:
            return len(self.text)
        k = bisect_right(self._starts, i) - 1
        vs, os, vl, ol = self.pieces[k]
        o = os + (i - vs) if vl == ol else os
        while o > 0 and _invisible(self.text[o - 1]):
            o -= 1
        return o

    def end(self, i: int) -> int:
        """The original offset where the view span ending at ``i`` (exclusive) ends (dropped
        characters right after it included)."""
        if i <= 0:
            return 0
        k = bisect_right(self._starts, i - 1) - 1
        vs, os, vl, ol = self.pieces[k]
        o = os + (i - vs) if vl == ol else os + ol
        while o < len(self.text) and _invisible(self.text[o]):
            o += 1
        return o

    def span(self, s: int, e: int) -> tuple[int, int]:
        """The original span of the view span ``[s, e)``."""
        return self.start(s), max(self.start(s), self.end(e))

    def to_view(self, o: int) -> int:
        """The view offset of original offset ``o`` (the first view character at or after it)."""
        k = bisect_right(self._ostarts, o) - 1
        if k < 0:
            return 0
        vs, os, vl, ol = self.pieces[k]
        if vl == ol:
            return vs + min(o - os, vl)
        return vs if o == os else vs + vl


def _invisible(c: str) -> bool:
    return c in INVISIBLE or _TAGS[0] <= ord(c) <= _TAGS[1]


def _decode_run(run: str) -> str | None:
    """A non-ASCII run as read (None: unchanged)."""
    if unicodedata.is_normalized("NFKC", run) and not any(_invisible(c) for c in run):
        return None
    out = []
    for c in run:
        o = ord(c)
        if 0xE0020 <= o <= 0xE007E:
            out.append(chr(o - 0xE0000))  # a tag character stands for its ASCII character
        elif not _invisible(c):
            out.append(c)
    return unicodedata.normalize("NFKC", "".join(out))


def _base64_text(run: str) -> str | None:
    """What a base64 run says, when it is text (words, mostly letters): None for binary data, a
    key, a token or JSON."""
    import base64
    import binascii

    try:
        raw = base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
        said = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if said.count(" ") < 2 or not all(c.isprintable() or c in "\n\t" for c in said):
        return None
    letters = sum(c.isalpha() or c == " " for c in said)
    return said if letters >= 0.75 * len(said) else None


def _spaced_text(run: str) -> str:
    """Letters spaced out read as words: a wider gap separates words."""
    return " ".join(w.replace(" ", "") for w in re.split(r" {2,}", run))


def reader_view(text: str) -> tuple[str, ViewMap] | None:
    """(the text as read, its map to ``text``), or None when reading changes nothing."""
    maybe_hidden = _maybe_hidden(text)
    if text.isascii() and "\\u" not in text and "&" not in text and not maybe_hidden:
        return None
    special = _SPECIAL_ENCODED if maybe_hidden else _SPECIAL
    parts: list[str] = []
    pieces: list[tuple[int, int, int, int]] = []
    vpos = opos = 0
    changed = False

    def copy(upto: int) -> None:
        nonlocal vpos, opos
        if upto > opos:
            parts.append(text[opos:upto])
            pieces.append((vpos, opos, upto - opos, upto - opos))
            vpos += upto - opos
            opos = upto

    decoded: list[tuple[int, int, str]] = []
    pos = 0
    while True:
        m = special.search(text, pos)
        if m is None:
            break
        tok = m.group()
        end = m.end()
        how = None
        if maybe_hidden and (m.group("b64") or m.group("spaced")):
            new = _base64_text(tok) if m.group("b64") else _spaced_text(tok)
            if new is None:
                pos = end
                continue
            how = "base64" if m.group("b64") else "spaced"
        elif tok.startswith("\\u"):
            code = int(tok[2:], 16)
            if 0xD800 <= code < 0xDC00 and _SURROGATE_LOW.match(text, end):
                low = int(text[end + 2:end + 6], 16)
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                end += 6
            new = "" if 0xD800 <= code < 0xE000 else _decode_run(chr(code))
            new = chr(code) if new is None else new
        elif tok.startswith("&"):
            new = html.unescape(tok)
            if new == tok:  # not a reference html knows
                pos = end
                continue
            new = _decode_run(new) or new
        else:
            new = _decode_run(tok)
            # (a Cyrillic or Greek look-alike inside a Latin word is read as the Latin letter)
            if ((m.start() > 0 and text[m.start() - 1].isascii() and text[m.start() - 1].isalpha())
                    or (end < len(text) and text[end].isascii() and text[end].isalpha())) \
                    and all(c in _LOOK_ALIKE_SET for c in (new or tok)):
                new, how = (new or tok).translate(LOOK_ALIKES), "look-alike"
            if new is None:
                pos = end
                continue
        copy(m.start())
        if how is not None:
            decoded.append((vpos, vpos + len(new), how))
        if new:
            pieces.append((vpos, opos, len(new), end - opos))
            parts.append(new)
            vpos += len(new)
        opos = end
        pos = end
        changed = True
    if not changed:
        return None
    copy(len(text))
    view = "".join(parts)
    return view, ViewMap(pieces, len(view), text, decoded)


__all__ = ["INVISIBLE", "ViewMap", "reader_view"]
