"""The decode loop's helpers without a model: the incremental stop-string check,
draft lookup, and speculative decoding giving exactly the tokens of plain decoding."""

from __future__ import annotations

import random

import pytest
import torch

from unsee.plugins.model.decoding import StopStrings, propose_draft
from unsee.plugins.model.runtime import SamplingParams
from unsee.plugins.model.sampling import seed_for

from tests.support.model_fakes import EOS, VOCAB, FakeRuntime

# -- stop strings --------------------------------------------------------------

PIECES = {1: "Hel", 2: "lo", 3: "\n", 4: "\n\n", 5: "END", 6: "E", 7: "ND", 8: " wor", 9: "ld", 10: "x",
          11: "<|im_start|>", 0: "<eos>"}


def _detok(ids):
    return "".join(PIECES[i] for i in ids)


def _first_stop_reference(tokens, stop, skip=()):
    """The old check: detokenize all tokens so far at every token."""
    for i in range(1, len(tokens) + 1):
        text = _detok([t for t in tokens[:i] if t not in skip])
        if any(s in text for s in stop):
            return i
    return None


def _first_stop(tokens, stop, skip=()):
    check = StopStrings(stop, _detok, skip)
    for i in range(1, len(tokens) + 1):
        if check.check(tokens[:i]):
            return i
    return None


@pytest.mark.parametrize(
    "tokens, stop, expected",
    [
        ([1, 2, 3, 3, 10], ["\n\n"], 4),  # split across two tokens
        ([4, 1, 2], ["\n\n"], 1),  # at the very first token
        ([1, 2, 8, 9], ["\n\n", "END"], None),  # no stop
        ([1, 6, 7, 10], ["END"], 3),  # "E" + "ND"
        ([1, 2, 10, 5], ["xEN"], 4),  # ends inside a token
        ([1, 2, 8, 9], ["Hello world"], 4),  # longer than any token, across four tokens
        ([1, 2, 11, 10], ["<|im_start|>"], 3),  # special tokens are text, as before
        ([1, 0, 3, 3], ["\n\n"], 4),  # skipped ids (end of turn) are not text
        ([1, 2], [""], 1),  # an empty stop string matches at once, as before
        ([], ["\n"], None),
    ],
)
def test_stop_strings_table(tokens, stop, expected):
    skip = (0,)
    assert _first_stop(tokens, stop, skip) == expected
    assert _first_stop_reference(tokens, stop, skip) == expected


def test_stop_strings_match_the_full_check_on_random_streams():
    rng = random.Random(7)
    ids = list(PIECES)
    for _ in range(300):
        tokens = [rng.choice(ids) for _ in range(rng.randint(1, 30))]
        stop = rng.choice([["\n\n"], ["END", "lo\n"], ["Hello"], ["d\n\nE"], ["x" * 3], ["ld<|im_start|>"]])
        assert _first_stop(tokens, stop, (0,)) == _first_stop_reference(tokens, stop, (0,)), (tokens, stop)


def test_stop_strings_decode_only_a_tail():
    seen = []

    def detok(ids):
        seen.append(len(ids))
        return _detok(ids)

    check = StopStrings(["\n\n"], detok)
    tokens = [1, 2] * 200
    for i in range(1, len(tokens) + 1):
        assert not check.check(tokens[:i])
    assert max(seen) == check.window == len("\n\n") + 4


def test_stop_strings_multibyte_character_split_across_byte_tokens():
    """Byte-level tokens: "é" is two tokens; the window still sees it whole."""
    vocab = {i: bytes([i]) for i in range(256)}

    def detok(ids):
        return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")

    text = "caf\u00e9 au lait, s'il vous pla\u00eet"
    tokens = list(text.encode("utf-8"))
    for stop in (["\u00e9"], ["pla\u00ee"], ["lait"], ["zzz"]):
        check = StopStrings(stop, detok)
        first = next((i for i in range(1, len(tokens) + 1) if check.check(tokens[:i])), None)
        ref = next((i for i in range(1, len(tokens) + 1) if any(s in detok(tokens[:i]) for s in stop)), None)
        assert first == ref


# -- draft lookup ----------------------------------------------------------------


@pytest.mark.parametrize(
    "context, max_len, expected",
    [
        # the end of the context ("3 4") occurred before: copy what followed it
        ([1, 2, 3, 4, 5, 6, 7, 8, 9, 3, 4], 3, [5, 6, 7]),
        # at least MIN_DRAFT (5) tokens even for a short match, up to max_len
        ([1, 2, 3, 4, 5, 6, 7, 8, 9, 3, 4], 16, [5, 6, 7, 8, 9]),
        # as many as the match is long: 7 tokens match, 7 are drafted
        ([1, 2, 3, 4, 5, 6, 7, 20, 21, 22, 23, 24, 25, 26, 27, 0, 1, 2, 3, 4, 5, 6, 7], 16,
         [20, 21, 22, 23, 24, 25, 26]),
        # what follows the match may run into the context's end
        ([5, 6, 7, 5, 6], 16, [7, 5, 6]),
        # no earlier occurrence of a 2-token suffix: no draft
        ([1, 2, 3, 4, 5], 8, []),
        # a one-token match is too weak
        ([1, 5, 6, 7, 1], 8, []),
        ([1, 2], 0, []),
        ([], 4, []),
    ],
)
def test_propose_draft_table(context, max_len, expected):
    assert propose_draft(context, max_len) == expected


def test_propose_draft_prefers_the_longest_match_then_the_newest():
    # "2 3" occurs twice; the occurrence preceded by "1" matches 3 tokens
    context = [1, 2, 3, 40, 41, 9, 2, 3, 50, 51, 1, 2, 3]
    assert propose_draft(context, 2) == [40, 41]
    # equal matches: the newest
    context = [9, 2, 3, 40, 9, 2, 3, 50, 9, 2, 3]
    assert propose_draft(context, 1) == [50]


# -- speculative decoding -----------------------------------------------------------


class DraftingFake(FakeRuntime):
    """The fake runtime with speculative decoding on; counts forward passes."""

    draft_max = 6

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.passes = 0

    def spawn(self) -> "DraftingFake":
        return type(self)(self._tok, self._max)

    def _forward(self, tokens, want_logits):
        self.passes += 1
        return self._logits_after(tokens)

    def _logits_after(self, tokens):
        return FakeRuntime._forward(self, tokens, True)

    def _forward_rows(self, tokens, n_rows):
        # one pass: the rows of every position, as a real backend returns them
        self.passes += 1
        rows = [self._logits_after([t]) for t in tokens]
        return torch.stack(rows[-n_rows:])


class Bigram(FakeRuntime):
    """Logits depend on the last token only: replies repeat themselves, as
    SmolLM2's do, so drafts from the context match."""

    def _forward(self, tokens, want_logits):
        self.forward_calls += 1
        self.cache.extend(tokens)
        gen = torch.Generator().manual_seed(1000 + self.cache[-1])
        logits = torch.randn(VOCAB, generator=gen)
        logits[EOS] -= 3.0
        return logits


class DraftingBigram(DraftingFake, Bigram):
    def _logits_after(self, tokens):
        return Bigram._forward(self, tokens, True)


class _Forcing:
    """A logits processor that forces a token at some positions and bans another."""

    def __init__(self, every: int = 5, banned: int = 7) -> None:
        self.every, self.banned = every, banned

    def reset(self) -> None:
        self.n = 0

    def forced_token(self):
        return 3 if self.n % self.every == self.every - 1 else None

    def __call__(self, generated, logits):
        logits[self.banned] = float("-inf")
        return logits

    def accept(self, token):
        assert token != self.banned
        self.n += 1

    def is_terminated(self) -> bool:
        return False


def _decode_twice(cls, prompt, other, **kw):
    """Decode, crop into the prompt, append ``other`` and decode again: the cache
    must hold exactly the tokens, with no drafted token left over."""
    rt = cls()
    rt.prefill(prompt)
    first = rt.decode(40, **kw)
    rt.crop(len(prompt) - 2)
    rt.prefill(other)
    second = rt.decode(40, **kw)
    assert rt.cache == list(rt.tokens), "a drafted token was left in the cache"
    assert second.offset_end == rt.length
    return first, second, rt


@pytest.mark.parametrize("pair", [(FakeRuntime, DraftingFake), (Bigram, DraftingBigram)], ids=["hash", "bigram"])
@pytest.mark.parametrize("kw", [
    dict(stop_token_ids=()),
    dict(stop_token_ids=[EOS]),
    dict(stop_token_ids=(), sampling=SamplingParams(temperature=0.8, top_p=0.9), seed=seed_for("s", 1)),
    dict(stop_token_ids=(), sampling=SamplingParams(temperature=0.1), seed=seed_for("s", 2)),
    dict(stop_token_ids=(), stop=["!"]),
])
def test_speculative_decoding_gives_the_tokens_of_plain_decoding(pair, kw):
    plain_cls, fast_cls = pair
    base = FakeRuntime()
    prompt = base.tokenize("hello world, tell me things")
    for other in (prompt[-2:], base.tokenize("zz")):  # the same prompt again, then another one
        plain = _decode_twice(plain_cls, prompt, other, **kw)
        fast = _decode_twice(fast_cls, prompt, other, **kw)
        assert [o.tokens for o in plain[:2]] == [o.tokens for o in fast[:2]]
        assert [o.text for o in plain[:2]] == [o.text for o in fast[:2]]
        assert [o.finish_reason for o in plain[:2]] == [o.finish_reason for o in fast[:2]]
        pc, fc = plain[2].counters, fast[2].counters
        assert (pc.prefilled, pc.decoded, pc.cropped, pc.crops) == (fc.prefilled, fc.decoded, fc.cropped, fc.crops)
        if fast_cls is DraftingBigram and kw.get("sampling", SamplingParams()).temperature < 0.5:
            # replies repeat at low temperature: drafts are proposed (and kept, the sampler drawing as usual)
            assert fast[2].draft_stats["passes"] > 0
            if kw.get("stop_token_ids") == () and "stop" not in kw:
                assert fast[2].draft_stats["accepted"] > 0


def test_speculative_decoding_saves_passes_on_repeating_text():
    plain, fast = Bigram(), DraftingBigram()
    prompt = plain.tokenize("hello world, tell me things")
    plain.prefill(prompt)
    fast.prefill(prompt)
    calls = plain.forward_calls
    ref = plain.decode(60, stop_token_ids=())
    passes = fast.passes
    out = fast.decode(60, stop_token_ids=())
    assert out.tokens == ref.tokens
    assert plain.forward_calls - calls == 60
    assert fast.passes - passes < 30
    assert fast.draft_stats["accepted"] > 30


def test_speculative_decoding_with_forced_tokens_and_masks():
    base = FakeRuntime()
    prompt = base.tokenize("a prompt with forced tokens")
    outs = {}
    for cls in (Bigram, DraftingBigram):
        rt = cls()
        rt.prefill(prompt)
        a = rt.decode(33, logits_processor=_Forcing(), stop_token_ids=())
        rt.crop(len(prompt))
        b = rt.decode(33, logits_processor=_Forcing(), stop_token_ids=())
        assert rt.cache == list(rt.tokens)
        outs[cls] = (a.tokens, b.tokens)
        if cls is DraftingBigram:
            assert rt.draft_stats["accepted"] > 0
    assert outs[Bigram] == outs[DraftingBigram]
    assert outs[Bigram][0] == outs[Bigram][1]


def test_speculative_decoding_stops_inside_a_draft_and_keeps_the_cache_exact():
    plain = Bigram()
    prompt = plain.tokenize("stop inside the draft")
    plain.prefill(prompt)
    ref = plain.decode(40, stop_token_ids=())
    n = len(prompt)
    # a token that occurs late, after drafts have started to match
    stop_tok = ref.tokens[30]
    first = ref.tokens.index(stop_tok)
    rt = DraftingBigram()
    rt.prefill(prompt)
    out = rt.decode(40, stop_token_ids=[stop_tok])
    assert out.tokens == ref.tokens[:first + 1] and out.finish_reason == "stop"
    assert rt.length == n + first + 1 == out.offset_end
    assert rt.cache == list(rt.tokens)
    # the next decode starts from the logits at the cache's end
    nxt = rt.decode(5, stop_token_ids=())
    again = Bigram()
    again.prefill(list(rt.tokens[:n + first + 1]))
    assert nxt.tokens == again.decode(5, stop_token_ids=()).tokens


def test_drafts_respect_the_budget_and_the_context():
    plain = Bigram(max_context=60)
    prompt = plain.tokenize("x" * 20)
    plain.prefill(prompt)
    ref = plain.decode(100, stop_token_ids=())
    rt = DraftingBigram(max_context=60)
    rt.prefill(prompt)
    out = rt.decode(100, stop_token_ids=())
    assert out.tokens == ref.tokens and rt.length == 60 == len(rt.cache)
    assert rt.draft_stats["accepted"] > 0
    rt.crop(20)
    short = rt.decode(7, stop_token_ids=())
    assert short.tokens == ref.tokens[:7] and rt.length == 27 and rt.cache == list(rt.tokens)


def test_a_crop_keeps_nothing_to_draft_from():
    """Drafts come from the cache only: tokens a crop dropped are gone (a forget's
    crop drops a secret)."""
    rt = DraftingBigram()
    secret = rt.tokenize("card 4417-2231")
    rt.prefill(rt.tokenize("hello ") + secret)
    rt.crop(len("hello "))
    assert not any(isinstance(v, list) and secret[0] in v for v in vars(rt).values() if v is not rt.cache)
    assert list(rt.tokens) == rt.cache == rt.tokenize("hello ")
