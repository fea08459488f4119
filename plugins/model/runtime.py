"""The local-model runtime interface: a causal LM with one persistent KV cache.

A runtime owns one token sequence and its KV cache. Callers extend it with
:meth:`LocalRuntime.prefill`, generate with :meth:`LocalRuntime.decode`, and go
back to any earlier offset with :meth:`LocalRuntime.crop` (O(1): restoring a
checkpoint is cropping, never a tensor copy). :meth:`LocalRuntime.spawn` gives
a sibling runtime that shares the weights and tokenizer but has its own, empty
cache — one per agent session.

Backends: :mod:`.cpu_backend` (transformers + torch, embedded default) and
:mod:`.exllama_backend` (ExLlamaV2 on CUDA). Both share the sampling and
grammar code (:mod:`.sampling`, :mod:`.grammar`), which works on a torch logits
row, so a replay decodes the same way on either backend (each backend is only
ever compared with itself: kernels differ).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from .errors import CacheRangeError
from .sampling_params import GREEDY, SamplingParams


@runtime_checkable
class LogitsProcessor(Protocol):
    """A per-step hook on the logits of the next token (grammar, bias, ...).

    ``reset()`` is called once before decoding starts; ``__call__`` receives
    the tokens generated so far in this decode call and a 1-D float logits row
    it may modify in place (or return a replacement); ``accept(token)`` is
    told which token was chosen; ``is_terminated()`` ends decoding early (e.g.
    the grammar is complete).
    """

    def reset(self) -> None: ...

    def __call__(self, generated: Sequence[int], logits: Any) -> Any: ...

    def accept(self, token: int) -> None: ...

    def is_terminated(self) -> bool: ...


@dataclass(frozen=True)
class DecodeResult:
    """What one :meth:`LocalRuntime.decode` call produced."""

    tokens: tuple[int, ...]
    text: str
    #: "stop" (stop token or stop string), "length" (max_new_tokens),
    #: "grammar" (the logits processor terminated).
    finish_reason: str
    #: Cache offsets: the sequence length before and after this call.
    offset_start: int
    offset_end: int
    seed: int | None = None


@dataclass
class RuntimeCounters:
    """Token accounting of one runtime (one session's cache).

    ``prefilled``: tokens run through the model in prefill; ``decoded``: tokens
    generated; ``reused``: prompt tokens served from the cache instead of being
    prefilled (maintained by callers that compute a common prefix, such as the
    chat model); ``cropped``: tokens dropped by :meth:`LocalRuntime.crop`;
    ``scored``: tokens run through the model by :meth:`LocalRuntime.score`
    (side computations that leave the cache as it was; not in the others).
    """

    prefilled: int = 0
    decoded: int = 0
    reused: int = 0
    cropped: int = 0
    crops: int = 0
    scored: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "prefilled": self.prefilled,
            "decoded": self.decoded,
            "reused": self.reused,
            "cropped": self.cropped,
            "crops": self.crops,
            "scored": self.scored,
        }


class LocalRuntime(abc.ABC):
    """A local causal LM with a persistent, croppable KV cache."""

    #: Short backend name ("cpu", "exllamav2").
    backend: str = "abstract"
    #: Longest draft of speculative decoding, in tokens (0: off). Worth it where
    #: a forward pass over a few tokens costs about as much as over one (decoding
    #: that is bound by reading the weights) and the backend returns the logits
    #: of every position in one pass (:meth:`_forward_rows`).
    draft_max: int = 0

    def __init__(self) -> None:
        self.counters = RuntimeCounters()
        self._tokens: list[int] = []
        self._last_logits: Any = None
        self._logits_at = -1
        #: speculative decoding: forward passes with a draft, tokens drafted, drafted tokens kept
        self.draft_stats = {"passes": 0, "proposed": 0, "accepted": 0}

    # -- tokenizer -----------------------------------------------------------
    @property
    @abc.abstractmethod
    def tokenizer(self) -> Any:
        """The Hugging Face tokenizer of the model."""

    @property
    @abc.abstractmethod
    def max_context(self) -> int:
        """Maximum sequence length the model (and cache) holds."""

    @property
    def vocab_size(self) -> int:
        """Width of a logits row (backends whose model pads its vocabulary override this)."""
        return len(self.tokenizer)

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        """Token ids that end a turn (EOS and the chat end-of-turn token)."""
        tok = self.tokenizer
        ids = {tok.eos_token_id}
        for special in ("<|im_end|>", "<|endoftext|>"):
            tid = tok.convert_tokens_to_ids(special)
            if isinstance(tid, int) and tid != tok.unk_token_id:
                ids.add(tid)
        return tuple(sorted(i for i in ids if i is not None))

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self.tokenizer.decode(list(tokens), skip_special_tokens=False)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text))

    def apply_chat_template(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        add_generation_prompt: bool = True,
    ) -> list[int]:
        """Token ids of ``messages`` rendered with the model's chat template."""
        text = self.render_chat(messages, tools, add_generation_prompt)
        return self.tokenize(text)

    def render_chat(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
        add_generation_prompt: bool = True,
    ) -> str:
        """The chat-templated text. ``tools`` (OpenAI format) go to the template
        when it supports them; otherwise (SmolLM2's ChatML template) they are
        described in the system message, as :class:`LocalChatModel` does."""
        kwargs: dict[str, Any] = {"tokenize": False, "add_generation_prompt": add_generation_prompt}
        messages = list(messages)
        if tools:
            template = getattr(self.tokenizer, "chat_template", None) or ""
            if "tools" in template:
                kwargs["tools"] = list(tools)
            else:
                from .grammar import ToolSpec
                from .prompting import inject_tools

                messages = inject_tools(messages, [ToolSpec.from_openai(t) for t in tools])
        return self.tokenizer.apply_chat_template(messages, **kwargs)

    # -- cache ---------------------------------------------------------------
    @property
    def tokens(self) -> tuple[int, ...]:
        """The token ids whose keys/values are in the cache, in order."""
        return tuple(self._tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    @property
    def length(self) -> int:
        """Current cache length in tokens (the next token's position)."""
        return len(self._tokens)

    def common_prefix(self, tokens: Sequence[int]) -> int:
        """Length of the longest common prefix of ``tokens`` and the cache."""
        n = 0
        for a, b in zip(self._tokens, tokens):
            if a != b:
                break
            n += 1
        return n

    def crop(self, n_tokens: int) -> None:
        """Keep the first ``n_tokens`` of the cache, drop the rest (O(1))."""
        length = len(self._tokens)
        if n_tokens < 0 or n_tokens > length:
            raise CacheRangeError(n_tokens, length)
        if n_tokens == length:
            return
        self._crop_cache(n_tokens)
        self.counters.cropped += length - n_tokens
        self.counters.crops += 1
        del self._tokens[n_tokens:]

    def reset(self) -> None:
        """Drop the whole cache and free its memory (the session can rebuild it)."""
        self._release_cache()
        self._last_logits = None
        self._tokens.clear()

    def prefill(self, tokens: Sequence[int]) -> None:
        """Append ``tokens`` to the cache (run them through the model)."""
        tokens = [int(t) for t in tokens]
        if not tokens:
            return
        self._feed(tokens)
        self.counters.prefilled += len(tokens)

    def prefill_logits(self, tokens: Sequence[int]) -> Any:
        """:meth:`prefill`, returning the logits of every position (2-D, float32 on
        the CPU; row ``i`` predicts the token after ``tokens[i]``). One forward pass
        where the backend can: checks compare these across chunkings, crops and
        backends (:mod:`.smoke`)."""
        tokens = [int(t) for t in tokens]
        if not tokens:
            raise ValueError("prefill_logits needs at least one token")
        self._check_fits(len(self._tokens) + len(tokens))
        rows = self._forward_rows(tokens, 0)
        self._tokens.extend(tokens)
        self._last_logits = rows[-1]
        self._logits_at = len(self._tokens)
        self.counters.prefilled += len(tokens)
        return rows.float().cpu()

    def sync(self, prompt: Sequence[int]) -> int:
        """Make the cache hold exactly ``prompt``: crop to the longest common
        prefix, prefill the rest. Returns the number of reused tokens.

        At least one token is always (re)prefilled so that decoding has fresh
        next-token logits.
        """
        prompt = [int(t) for t in prompt]
        reuse = min(self.common_prefix(prompt), max(len(prompt) - 1, 0))
        self.crop(reuse)
        self.counters.reused += reuse
        self.prefill(prompt[reuse:])
        return reuse

    def decode(
        self,
        max_new_tokens: int,
        *,
        sampling: SamplingParams = GREEDY,
        seed: int | None = None,
        stop: Sequence[str] = (),
        stop_token_ids: Sequence[int] | None = None,
        logits_processor: LogitsProcessor | None = None,
        on_token: Callable[[int], None] | None = None,
        overrun: int = 0,
    ) -> DecodeResult:
        """Generate up to ``max_new_tokens`` after the cached sequence.

        ``overrun``: when ``max_new_tokens`` runs out while the logits processor
        says its structure must be finished (``must_finish()`` is true: e.g. a
        grammar-constrained tool call is half written), keep decoding up to
        ``overrun`` more tokens until it terminates. A structure is never cut
        off while the hard cap ``max_new_tokens + overrun`` allows finishing it.

        Requires at least one cached token (the last one provides the first
        logits). Every generated token, including a final stop token, ends up
        in the cache, so ``offset_end == self.length`` and a checkpoint at
        ``offset_end`` can be restored by :meth:`crop`. ``seed`` seeds the
        sampler's own ``torch.Generator`` (ignored when greedy): the same
        cache contents, seed and parameters give the same tokens.

        Speculative decoding (backends with ``draft_max > 0``): where the text so
        far matches earlier text in the cache, the tokens that followed it there
        are run through the model together with the next token, in one forward
        pass; each is kept only if it is the token the model chooses at its
        position (the same selection as without a draft, one sampler draw per
        position), the rest is cut from the cache. The tokens are the model's
        own; only forward passes are saved. Drafts come only from what the cache
        holds now: nothing a crop dropped is kept anywhere (a forget crops the
        cache to drop exactly that).
        """
        from .decoding import StopStrings
        from .sampling import make_generator, pick_token

        if not self._tokens:
            raise CacheRangeError(0, 0, what="decode from")
        stops = tuple(self.eos_token_ids if stop_token_ids is None else stop_token_ids)
        start = len(self._tokens)
        budget = max(0, min(max_new_tokens, self.max_context - start))
        hard = max(budget, min(max_new_tokens + max(0, overrun), self.max_context - start))
        must_finish = getattr(logits_processor, "must_finish", None)
        generator = None if sampling.greedy else make_generator(seed or 0)
        # rows[0]: the logits of the next token; with a draft in the cache, rows[i]
        # follows draft[i - 1] (the last row follows the whole draft)
        rows = [self._logits_for_last()]
        if logits_processor is not None:
            logits_processor.reset()
        out: list[int] = []
        pending: list[int] = []  # chosen but not yet run through the model
        draft: list[int] = []  # run through the model (at the cache's end), not yet confirmed
        forced = getattr(logits_processor, "forced_token", None)
        stop_strings = StopStrings(stop, self.detokenize, stops)
        drafting = self.draft_max > 0
        finish = "length"
        for i in range(hard):
            if i >= budget and not (must_finish is not None and must_finish()):
                break
            # Jump-forward: where the grammar allows exactly one token there is
            # nothing to choose; queue it and run such runs in one forward pass.
            token = forced() if forced is not None else None
            if token is None:
                if pending:
                    proposal: list[int] = []
                    if drafting:
                        limit = hard if must_finish is not None and must_finish() else budget
                        room = min(limit - i, self.max_context - len(self._tokens) - len(pending))
                        proposal = self._propose(pending, room)
                    rows = self._feed_rows(pending + proposal, len(proposal) + 1)
                    self.counters.decoded += len(pending)
                    pending, draft = [], proposal
                    if proposal:
                        self.draft_stats["passes"] += 1
                        self.draft_stats["proposed"] += len(proposal)
                logits = rows[0]
                if logits_processor is not None:
                    processed = logits_processor(out, logits)
                    if processed is not None:
                        logits = processed
                token = pick_token(logits, sampling, generator)
            if draft and token == draft[0]:
                # the model chose the drafted token: it is in the cache already
                draft.pop(0)
                rows.pop(0)
                self.counters.decoded += 1
                self.draft_stats["accepted"] += 1
            else:
                if draft:
                    self._drop_draft(len(draft))
                    draft, rows = [], []
                pending.append(token)
            out.append(token)
            if logits_processor is not None:
                logits_processor.accept(token)
            if on_token is not None:
                on_token(token)
            if token in stops:
                finish = "stop"
                break
            if stop_strings and stop_strings.check(out):
                finish = "stop"
                break
            if logits_processor is not None and logits_processor.is_terminated():
                finish = "grammar"
                break
        if draft:
            # drafted tokens past the end of the reply: cut them off again
            self._drop_draft(len(draft))
            self._last_logits, self._logits_at = rows[0], len(self._tokens)
        if pending:
            # Feed the tail so the cache always holds everything generated.
            self._feed(pending)
            self.counters.decoded += len(pending)
        text = self.detokenize([t for t in out if t not in stops])
        for s in stop:
            cut = text.find(s)
            if cut >= 0:
                text = text[:cut]
        return DecodeResult(
            tokens=tuple(out),
            text=text,
            finish_reason=finish,
            offset_start=start,
            offset_end=len(self._tokens),
            seed=None if sampling.greedy else (seed or 0),
        )

    # -- speculative decoding --------------------------------------------------
    def _propose(self, pending: list[int], room: int) -> list[int]:
        """Draft tokens to run after ``pending`` (see :func:`.decoding.propose_draft`)."""
        from .decoding import propose_draft

        n = min(self.draft_max, room)
        if n <= 0:
            return []
        return propose_draft(self._tokens + pending, n)

    def _feed_rows(self, tokens: list[int], n_rows: int) -> list[Any]:
        """Like :meth:`_feed`, returning the logits rows of the last ``n_rows`` tokens."""
        if n_rows == 1:
            return [self._feed(tokens)]
        self._check_fits(len(self._tokens) + len(tokens))
        rows = list(self._forward_rows(tokens, n_rows))
        self._tokens.extend(tokens)
        self._last_logits = rows[-1]
        self._logits_at = len(self._tokens)
        return rows

    def _drop_draft(self, n: int) -> None:
        """Cut ``n`` unconfirmed draft tokens off the cache's end (not a :meth:`crop`:
        no counter moves)."""
        keep = len(self._tokens) - n
        self._drop_cache_tail(keep)
        del self._tokens[keep:]
        self._last_logits, self._logits_at = None, -1

    def _drop_cache_tail(self, n_tokens: int) -> None:
        """Backend part of dropping rejected draft tokens (copies of tokens the
        cache holds anyway); by default a :meth:`_crop_cache`."""
        self._crop_cache(n_tokens)

    def _forward_rows(self, tokens: list[int], n_rows: int) -> Any:
        """Run ``tokens`` at the end of the cache; the logits rows of the last
        ``n_rows`` of them (2-D). Backends that can skip the other rows override this."""
        return self._forward_all(tokens)[-n_rows:]

    def score(
        self,
        continuations: Sequence[Sequence[int]],
        *,
        at: int | None = None,
        tail: Sequence[int] = (),
    ) -> list[float]:
        """Log-probability of each continuation after the cache's first ``at``
        tokens (default: all of them) followed by ``tail``.

        A side computation: afterwards the cache holds exactly what it held
        before (tokens cut off to reach ``at`` are run again), the next-token
        logits are unchanged and only ``counters.scored`` moves. Continuations
        sharing a prefix run it once.
        """
        n = len(self._tokens)
        at = n if at is None else int(at)
        if at < 1 or at > n:
            raise CacheRangeError(at, n, what="score at")
        saved = (list(self._tokens), self._last_logits, self._logits_at)
        conts = [[int(t) for t in c] for c in continuations]
        tail = [int(t) for t in tail]
        work = 0
        try:
            if at < n:
                self._crop_cache(at)
                del self._tokens[at:]
            if tail:
                base = self._forward(tail, want_logits=True)
                self._tokens.extend(tail)
                work += len(tail)
            elif at < n:  # the logits after token at-1 were cropped away: recompute them
                last = self._tokens[-1]
                self._crop_cache(at - 1)
                base = self._forward([last], want_logits=True)
                work += 1
            else:
                base = self._logits_for_last_uncounted()
                saved = (saved[0], base, n)  # fresh next-token logits: keep them
            shared = _common_prefix(conts)
            lp_shared, logits = 0.0, base
            if shared:  # run the shared prefix once and keep it while scoring the rests
                lp_shared, logits = self._run_scored(base, shared)
                self._tokens.extend(shared)
                work += len(shared)
            mid = len(self._tokens)
            out = []
            for c in conts:
                rest = c[len(shared):]
                lp = lp_shared
                if rest:
                    part, _ = self._run_scored(logits, rest)
                    self._crop_cache(mid)
                    work += len(rest)
                    lp += part
                out.append(lp)
            if len(self._tokens) > at:
                self._crop_cache(at)
                del self._tokens[at:]
            if at < n:  # run the cut-off part of the cache again
                self._forward(saved[0][at:], want_logits=False)
                work += n - at
        except BaseException:
            # The backend cache may be out of step with the bookkeeping: drop it
            # (the next sync rebuilds it by prefill).
            self.reset()
            raise
        finally:
            self.counters.scored += work
        self._tokens = saved[0]
        self._last_logits, self._logits_at = saved[1], saved[2]
        return out

    def _run_scored(self, logits: Any, tokens: list[int]) -> tuple[float, Any]:
        """Sum of log-probabilities of ``tokens`` given ``logits`` (the logits
        before the first), running them through the model; returns the sum and
        the logits after the last token. Leaves the tokens in the backend cache
        (the caller crops them)."""
        import torch

        rows = self._forward_all(tokens)  # (len(tokens), vocab): row i predicts token i+1
        prev = torch.cat([logits.reshape(1, -1).float(), rows[:-1].float()], dim=0)
        lps = torch.log_softmax(prev, dim=-1)
        idx = torch.tensor(tokens, dtype=torch.long).reshape(-1, 1)
        return float(lps.gather(1, idx).sum()), rows[-1]

    def _forward_all(self, tokens: list[int]) -> Any:
        """The logits of every position of ``tokens`` run at the end of the
        cache, as a 2-D tensor. Backends that can return them in one pass
        override this; the default runs one token at a time."""
        import torch

        return torch.stack([self._forward([t], want_logits=True) for t in tokens])

    def _logits_for_last_uncounted(self) -> Any:
        before = self.counters.prefilled
        logits = self._logits_for_last()
        self.counters.scored += self.counters.prefilled - before
        self.counters.prefilled = before
        return logits

    def _feed(self, tokens: list[int]) -> Any:
        self._check_fits(len(self._tokens) + len(tokens))
        logits = self._forward(tokens, want_logits=True)
        self._tokens.extend(tokens)
        self._last_logits = logits
        self._logits_at = len(self._tokens)
        return logits

    def _logits_for_last(self) -> Any:
        """Next-token logits after the cache; recomputes the last position
        (one token, counted as prefilled) when a crop invalidated them."""
        logits = getattr(self, "_last_logits", None)
        if logits is not None and getattr(self, "_logits_at", -1) == len(self._tokens):
            return logits
        last = self._tokens[-1]
        self._crop_cache(len(self._tokens) - 1)
        self._tokens.pop()
        logits = self._feed([last])
        self.counters.prefilled += 1
        return logits

    @abc.abstractmethod
    def spawn(self) -> "LocalRuntime":
        """A sibling runtime sharing weights and tokenizer with an empty cache."""

    # -- numerics ------------------------------------------------------------
    def numerics_info(self) -> dict[str, str]:
        """What this runtime's logits depend on besides the cache and the tokens,
        as ordered ``name -> value`` pairs (backends name their kernels, library
        versions, weights and processor; this default names only the backend)."""
        return {"backend": self.backend, "runtime": type(self).__name__}

    def numerics(self) -> str:
        """The numerics fingerprint: :meth:`numerics_info` plus the speculative
        draft length (a row's bits depend on how many rows its pass has), as one
        ``key=value;...`` string (:func:`.numerics.fingerprint`). Equal across
        processes on the same machine and packages; two runs with equal
        fingerprints compute the same logits bits from the same cache and
        tokens, and a replay whose fingerprint differs from the recorded one may
        decode other tokens at a near-tie."""
        from .numerics import fingerprint

        info = dict(self.numerics_info())
        info.setdefault("drafts", str(int(self.draft_max)))
        return fingerprint(info)

    # -- backend hooks -------------------------------------------------------
    @abc.abstractmethod
    def _forward(self, tokens: list[int], want_logits: bool) -> Any:
        """Run ``tokens`` at the current end of the cache; return the logits
        row (1-D float32 torch tensor) of the last one."""

    @abc.abstractmethod
    def _crop_cache(self, n_tokens: int) -> None:
        """Backend part of :meth:`crop` (``n_tokens`` < current length)."""

    @abc.abstractmethod
    def _release_cache(self) -> None:
        """Backend part of :meth:`reset`."""

    def _check_fits(self, needed: int) -> None:
        from .errors import ContextOverflowError

        if needed > self.max_context:
            raise ContextOverflowError(needed, self.max_context)


def _common_prefix(seqs: Sequence[Sequence[int]]) -> list[int]:
    if not seqs:
        return []
    first = seqs[0]
    n = min(len(s) for s in seqs)
    if len(seqs) == 1:
        n = len(first) - 1  # keep one token to score from the shared logits
    i = 0
    while i < n and all(s[i] == first[i] for s in seqs):
        i += 1
    return list(first[:i])


class SharedWeightsRuntime(LocalRuntime):
    """A runtime whose weights and tokenizer live in a loaded ``shared`` object.

    ``shared`` has ``tokenizer``, ``max_context``, ``folder`` and ``lock`` (it
    serialises forward passes over the shared weights). :meth:`spawn` gives a
    sibling with its own, empty cache: one per session, nothing loaded twice.
    Subclasses take ``_shared=`` in their constructor and keep the backend
    cache in ``self._cache``.
    """

    def __init__(self, shared: Any) -> None:
        super().__init__()
        self._shared = shared
        self._cache: Any = None

    @property
    def tokenizer(self) -> Any:
        return self._shared.tokenizer

    @property
    def max_context(self) -> int:
        return self._shared.max_context

    @property
    def folder(self) -> Any:
        return self._shared.folder

    @property
    def lock(self) -> Any:
        return self._shared.lock

    def spawn(self) -> "SharedWeightsRuntime":
        return type(self)(_shared=self._shared)

    def _release_cache(self) -> None:
        self._cache = None


__all__ = [
    "DecodeResult",
    "GREEDY",
    "LocalRuntime",
    "SharedWeightsRuntime",
    "LogitsProcessor",
    "RuntimeCounters",
    "SamplingParams",
]
