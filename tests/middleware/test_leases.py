"""Session leases: who blocks whom, expiry, re-entrant runs (two LeaseTables = two processes),
in a SQLite file and in PostgreSQL."""

import time

import pytest

from unsee.middleware.errors import SessionBusy
from unsee.middleware.leases import FORGET, RUN, LeaseTable


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def leases(tmp_path, request):
    """``leases(ttl=None)`` -> a LeaseTable of its own (another owner) on one shared place."""
    pools, tables = [], []

    def make(ttl=None):
        if request.param == "sqlite":
            tables.append(LeaseTable(tmp_path / "leases.sqlite", ttl=ttl))
            return tables[-1]
        from unsee.middleware.sqldb import PostgresDb, open_pool

        pools.append(open_pool(request.getfixturevalue("pg_url")))
        tables.append(LeaseTable(PostgresDb(pools[-1]), ttl=ttl))
        return tables[-1]

    yield make
    for table in tables:  # (a test closes some itself: closing again is a no-op)
        table.close()
    for pool in pools:
        pool.close()


@pytest.fixture
def two(leases):
    a, b = leases(), leases()
    yield a, b
    a.close()
    b.close()


@pytest.mark.parametrize("held,wanted,same_owner,blocked", [
    (RUN, RUN, False, False),      # runs of two processes on one session: not this table's business
    (RUN, RUN, True, False),       # runs of one process stack
    (RUN, FORGET, False, True),    # a forget waits for any run
    (RUN, FORGET, True, True),     # ... its own process's too
    (FORGET, RUN, False, True),    # a run waits for a forget
    (FORGET, RUN, True, True),
    (FORGET, FORGET, False, True),
    (FORGET, FORGET, True, True),  # forgets are not re-entrant
])
def test_who_blocks_whom(two, held, wanted, same_owner, blocked):
    a, b = two
    assert a.try_acquire("s", held)
    other = a if same_owner else b
    assert other.try_acquire("s", wanted) is (not blocked)
    assert b.try_acquire("other-session", FORGET)  # sessions are independent


def test_release_and_wait(two):
    a, b = two
    a.acquire("s", RUN)
    a.acquire("s", RUN)
    with pytest.raises(SessionBusy):
        b.acquire("s", FORGET, wait=False)
    a.release("s", RUN)
    assert not b.try_acquire("s", FORGET)  # one run still holds it
    a.release("s", RUN)
    with b.held("s", FORGET):
        assert [k for _, k in a.holders("s")] == [FORGET]
    assert a.holders("s") == []
    assert a.forgot_since("s", time.time_ns() - 10**9)


def test_a_lapsed_lease_is_taken(leases):
    a, b = leases(ttl=0.3), leases(ttl=0.3)
    a.try_acquire("s", RUN)
    a._stop.set()  # the holder stops renewing (it died)
    b.acquire("s", FORGET, timeout=10)  # (raises if the dead holder's lease never lapses)
    assert [k for _, k in b.holders("s")] == [FORGET]
    b.close()


def test_a_held_lease_is_renewed(leases):
    a, b = leases(ttl=0.3), leases(ttl=0.3)
    a.acquire("s", RUN)
    time.sleep(1.0)  # three ttls: the heartbeat kept it
    assert not b.try_acquire("s", FORGET)
    a.close()  # closing releases everything it held
    assert b.try_acquire("s", FORGET)
    b.close()
