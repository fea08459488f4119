"""Per-token helpers of the decode loop, shared by every backend.

- :class:`StopStrings`: incremental stop-string check. It detokenizes only a
  tail of the output (as many tokens as the longest stop string has bytes,
  plus a margin), never the whole output at every token.
- :func:`propose_draft`: draft tokens for speculative decoding, looked up in
  the text the cache holds (prompt-lookup decoding). The model verifies a
  draft in one forward pass and keeps only the tokens it would have chosen
  itself, so the output is the model's own.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

#: tokens of context a draft's match is extended backwards over (longer = better aligned)
MATCH_WINDOW = 32
#: a draft needs at least this many tokens of matching context
MIN_MATCH = 2
#: how many of the newest earlier positions of the last token are considered
MAX_CANDIDATES = 512
#: a draft is as long as its match (a long match predicts a long copy), at least this long
MIN_DRAFT = 5


class StopStrings:
    """Finds the first stop string in decoded output without re-decoding all of it.

    ``check(tokens)`` is called after each new token with all tokens so far and
    returns True once the text of ``tokens`` contains a stop string. Only the
    last ``window`` tokens are decoded: a stop string of ``b`` UTF-8 bytes that
    ends in the newest token lies within the last ``b`` tokens (every token of a
    byte-level vocabulary is at least one byte), and a margin of 4 tokens covers
    a character split across tokens at the window's start. Tokens in
    ``skip`` (end-of-turn ids) are left out, as the final text leaves them out.
    As before this class existed, an empty stop string matches at once.
    """

    def __init__(self, stop: Sequence[str], detokenize: Any, skip: Sequence[int] = ()) -> None:
        self.stop = tuple(stop)
        self.detokenize = detokenize
        self.skip = frozenset(int(t) for t in skip)
        longest = max((len(s.encode("utf-8")) for s in self.stop), default=0)
        self.window = longest + 4

    def __bool__(self) -> bool:
        return bool(self.stop)

    def check(self, tokens: Sequence[int]) -> bool:
        if not self.stop:
            return False
        tail: list[int] = []
        for t in reversed(tokens):
            if t in self.skip:
                continue
            tail.append(int(t))
            if len(tail) >= self.window:
                break
        tail.reverse()
        text = self.detokenize(tail)
        return any(s in text for s in self.stop)


def _longest_match(seq: np.ndarray, context: np.ndarray, end: int) -> tuple[int, int]:
    """(match length, position) of the best earlier occurrence in ``seq[:end]`` of
    ``context``'s last token, extended backwards; position = index of that token."""
    if end <= 0 or context.size == 0:
        return 0, -1
    cand = np.flatnonzero(seq[:end] == context[-1])
    if cand.size == 0:
        return 0, -1
    cand = cand[-MAX_CANDIDATES:]
    length = np.ones(cand.size, dtype=np.int64)
    alive = np.ones(cand.size, dtype=bool)
    for j in range(1, min(MATCH_WINDOW, context.size)):
        idx = cand - j
        ok = alive & (idx >= 0)
        ok[ok] = seq[idx[ok]] == context[-1 - j]
        alive = ok
        if not alive.any():
            break
        length += alive
    best = int(length.max())
    # among the longest matches, the newest
    pos = int(cand[np.flatnonzero(length == best)[-1]])
    return best, pos


def propose_draft(
    context: Sequence[int],
    max_len: int,
    *,
    min_match: int = MIN_MATCH,
    min_draft: int = MIN_DRAFT,
) -> list[int]:
    """Tokens that followed the best earlier match of the end of ``context``
    (prompt-lookup decoding): as many as the match is long, at least
    ``min_draft``, at most ``max_len``.

    The match is the longest run of tokens (up to :data:`MATCH_WINDOW`) ending
    at an earlier position of ``context`` that equals the run ending at its
    end; the newest wins a tie. Returns ``[]`` when no match has ``min_match``
    tokens or nothing follows it.
    """
    if max_len <= 0 or len(context) < min_match:
        return []
    arr = np.asarray(context, dtype=np.int64)
    # the match must end before the last token and leave something to copy
    length, pos = _longest_match(arr, arr[-MATCH_WINDOW:], arr.size - 1)
    if length < min_match:
        return []
    n = min(max_len, max(min_draft, length))
    return [int(t) for t in arr[pos + 1:pos + 1 + n]]


__all__ = ["StopStrings", "propose_draft"]
