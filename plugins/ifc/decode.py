"""Percent-decoding for identifier extraction (pure logic).

:func:`unquote_all` undoes percent-encoding repeatedly (normalization);
:func:`decode_layers` gives the text and each further decoded form of it, each
able to map a span back to the original text (extraction finds
``alice%2540evil.com`` and reports the encoded slice).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from urllib.parse import unquote

#: how many percent-decoding rounds normalization and extraction undo at most
MAX_DECODE_ROUNDS = 8


def unquote_all(text: str, rounds: int = MAX_DECODE_ROUNDS) -> str:
    """Undo percent-encoding repeatedly (``%2540`` -> ``%40`` -> ``@``)."""
    for _ in range(rounds):
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    return text


# -- percent-decoded layers with offsets back into the original -------------

_PCT_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2})+")


class DecodedLayer:
    """One percent-decoded form of a text, mapping its spans back to the original.

    Kept as segments (literal runs map 1:1, a decoded ``%XX`` run maps every
    char to the whole run), so a megabyte of text costs a few segments, not a
    tuple per character.
    """

    def __init__(self, text: str, segments: list[tuple[int, int, int, int, bool]],
                 previous: "DecodedLayer | None"):
        self.text = text
        self._segments = segments  # (dec_start, dec_end, src_start, src_end, literal)
        self._starts = [seg[0] for seg in segments]
        self._previous = previous

    def _char(self, i: int) -> tuple[int, int]:
        if self._previous is None and not self._segments:
            return i, i + 1
        ds, _de, ss, se, literal = self._segments[bisect_right(self._starts, i) - 1]
        src = (ss + (i - ds), ss + (i - ds) + 1) if literal else (ss, se)
        if self._previous is None:
            return src
        return self._previous._char(src[0])[0], self._previous._char(src[1] - 1)[1]

    def to_original(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that ``self.text[start:end]`` came from."""
        if end <= start:
            s = self._char(start)[0] if start < len(self.text) else None
            return (s, s) if s is not None else (start, end)
        return self._char(start)[0], self._char(end - 1)[1]


def _unquote_segments(text: str) -> tuple[str, list[tuple[int, int, int, int, bool]]]:
    """``unquote(text)`` plus its segments (see :class:`DecodedLayer`)."""
    out: list[str] = []
    segs: list[tuple[int, int, int, int, bool]] = []
    pos = dec = 0
    for m in _PCT_RUN.finditer(text):
        if m.start() > pos:
            out.append(text[pos:m.start()])
            segs.append((dec, dec + m.start() - pos, pos, m.start(), True))
            dec += m.start() - pos
        piece = unquote(m.group())
        out.append(piece)
        segs.append((dec, dec + len(piece), m.start(), m.end(), False))
        dec += len(piece)
        pos = m.end()
    if pos < len(text):
        out.append(text[pos:])
        segs.append((dec, dec + len(text) - pos, pos, len(text), True))
    return "".join(out), segs


def decode_layers(text: str, rounds: int = MAX_DECODE_ROUNDS) -> list[DecodedLayer]:
    """The text and each further percent-decoded form of it (at most ``rounds`` more)."""
    layers = [DecodedLayer(text, [], None)]
    for _ in range(rounds):
        if "%" not in layers[-1].text:
            break
        decoded, segs = _unquote_segments(layers[-1].text)
        if decoded == layers[-1].text:
            break
        layers.append(DecodedLayer(decoded, segs, layers[-1] if len(layers) > 1 else None))
    return layers
