"""Session pool: per-session caches, LRU eviction, restore (fake runtime)."""

from __future__ import annotations

import pytest

from tests.support.model_fakes import FakeRuntime
from unsee.plugins.model.errors import CacheRangeError
from unsee.plugins.model.sessions import SessionPool


def _fill(pool: SessionPool, session: str, text: str) -> None:
    with pool.use(session) as rt:
        rt.sync(rt.tokenize(text))


def test_sessions_have_separate_caches():
    pool = SessionPool(FakeRuntime())
    _fill(pool, "a", "alpha alpha")
    _fill(pool, "b", "beta")
    assert pool.runtime("a").length == len("alpha alpha")
    assert pool.runtime("b").length == len("beta")
    assert pool.counters("a")["prefilled"] == len("alpha alpha")


def test_lru_eviction_under_budget():
    pool = SessionPool(FakeRuntime(), token_budget=25)
    _fill(pool, "a", "a" * 10)
    _fill(pool, "b", "b" * 10)
    _fill(pool, "a", "a" * 12)  # touch a: b is now least recently used
    _fill(pool, "c", "c" * 10)
    assert pool.runtime("b").length == 0
    assert pool.counters("b")["evictions"] == 1
    assert pool.cached_tokens() <= 25 + 10
    # the active session is never evicted, even alone over budget
    _fill(pool, "d", "d" * 40)
    assert pool.runtime("d").length == 40
    # an evicted session is rebuilt by prefill on its next call
    before = pool.counters("b")["prefilled"]
    _fill(pool, "b", "b" * 10)
    assert pool.counters("b")["prefilled"] == before + 10


def test_restore_crops_and_checks_bounds():
    pool = SessionPool(FakeRuntime())
    _fill(pool, "s", "0123456789")
    assert pool.restore("s", 4) == 4
    with pytest.raises(CacheRangeError):
        pool.restore("s", 9)
    pool.evict("s")
    assert pool.restore("s", 9) == 0  # evicted: the next call re-prefills


def test_drop_forgets_session():
    pool = SessionPool(FakeRuntime())
    _fill(pool, "s", "xyz")
    pool.drop("s")
    assert "s" not in pool.sessions
    assert pool.counters("s")["calls"] == 0
