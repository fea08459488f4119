"""Session graphs kept up to date as sessions grow (what ``Unsee.graph`` reads through).

Building a session's :class:`~.graph.ProvenanceGraph` from the store reads
every artifact, checkpoint and content of the session: at every sink call of
a long session that is most of an IFC decision. :class:`GraphCache` keeps the
graph of the sessions it was asked for and, at the next read, asks the store
only for what was recorded since (:meth:`~.store.ProvenanceStore.records_since`:
the new artifacts, checkpoints and their content, and which of the graph's
uncommitted tool calls are committed by now). The graph is extended with them
(:meth:`~.graph.ProvenanceGraph.extended`): a graph handed out before never
changes.

A stale graph is a security bug (a forgotten target found again, an IFC
decision on records that were erased), so any doubt rebuilds from the store:

- the store's stamp moved: a rewrite in this process (a forget's fork or
  commit, a dropped session, erasure's rewrites and scrubs, an edited content,
  content recorded again for a recorded artifact), or on SQLite any commit by
  another connection (another process or another ``Unsee`` on the home);
- the counts do not add up: a row arrived with a seq below the graph's last
  one (spans can end out of order) or a row went away;
- on PostgreSQL, where the stamp sees other machines' rewrites only through
  the session row and the commit journal: a forget or an erasure holds the
  session, or ended less than ``skew_s`` before the graph was read, in any
  process (the session leases say so);
- the read overlapped a rewrite: that graph is handed out but not kept.

A replay's scratch fork is read whole each time and never kept.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Protocol

from .errors import InvalidArgument, SessionNotFound
from .graph import ProvenanceGraph
from .store import SessionSlice, SliceMark


class SessionRecords(Protocol):
    """What the cache reads (``ProvenanceStore``)."""

    def records_since(self, session_id: str, since: SliceMark | None = None,
                      uncommitted: Collection[str] = ()) -> SessionSlice: ...

    def add_rewrite_listener(self, fn: Callable[[str | None], None]) -> None: ...


#: ``forgot_since(session, since_ns)``: whether a forget (or erasure) on the session ended after
#: ``since_ns`` or holds it now, in any process (``LeaseTable.forgot_since``)
ForgotSince = Callable[[str, int], bool]


@dataclass
class _Entry:
    graph: ProvenanceGraph
    stamp: tuple
    exact: bool
    built_ns: int
    mark: SliceMark
    uncommitted: frozenset[str]


class GraphCache:
    """The provenance graphs of up to ``size`` sessions, extended as they grow.

    ``hash_of``: the keyed hash graphs hand to ``Hit`` (``ContentHasher.hash``).
    ``forgot_since``: the session leases' view of forgets in other processes, needed on
    a shared (PostgreSQL) store; without it such a store's graphs are rebuilt at every
    read. ``stats`` counts reads answered as they were (``hits``), by extending
    (``extended``) and by rebuilding (``rebuilt``).
    """

    def __init__(self, store: SessionRecords, hash_of: Callable[[str], str] | None = None, *, size: int = 16,
                 forgot_since: ForgotSince | None = None, skew_s: float = 120.0):
        self._store = store
        self._hash_of = hash_of
        self.size = size
        self._forgot_since = forgot_since
        self._skew_ns = int(skew_s * 1e9)
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.stats = {"hits": 0, "extended": 0, "rebuilt": 0}
        # dropped at once at a rewrite, so erased text does not wait in memory for the next read
        # (lock-free on purpose: the store calls it while its own lock may be held)
        store.add_rewrite_listener(self.clear)

    def clear(self, session_id: str | None = None) -> None:
        """Forget the kept graph of ``session_id`` (None: every kept graph); the next read
        of each session dropped rebuilds it."""
        if session_id is None:
            self._entries = OrderedDict()
        else:
            self._entries.pop(session_id, None)

    def graph(self, session_id: str) -> ProvenanceGraph:
        """The session's graph as recorded now (``SessionNotFound`` when it is not recorded)."""
        with self._lock:
            entry = self._entries.get(session_id)
            if entry is not None and self._rewritten_elsewhere(session_id, entry):
                entry = None
            if entry is not None:
                try:
                    s = self._store.records_since(session_id, entry.mark, entry.uncommitted)
                except SessionNotFound:
                    self._entries.pop(session_id, None)
                    raise
                g = self._extend(entry, s)
                if g is not None:
                    entries = self._entries  # (clear() may swap it meanwhile)
                    entries[session_id] = entry
                    with contextlib.suppress(KeyError):  # (or drop this one meanwhile)
                        entries.move_to_end(session_id)
                    return g
            return self._rebuild(session_id)

    def _rewritten_elsewhere(self, session_id: str, entry: _Entry) -> bool:
        if entry.exact:
            return False  # the stamp sees other connections' commits
        if self._forgot_since is None:
            return True
        return self._forgot_since(session_id, entry.built_ns - self._skew_ns)

    def _extend(self, entry: _Entry, s: SessionSlice) -> ProvenanceGraph | None:
        """The entry's graph brought up to ``s`` (and the entry with it), None when it must be rebuilt."""
        old = entry.graph
        if s.stamp is None or s.stamp != entry.stamp or not s.appended:
            return None  # rewritten, or a row arrived below the graph's last seq: not an append
        if not (s.artifacts or s.checkpoints or s.committed):
            entry.mark = s.mark
            self.stats["hits"] += 1
            return old
        now_committed = [old.get(i).model_copy(update={"committed": True}) for i in s.committed if i in old]
        try:
            g = old.extended(s.artifacts, s.checkpoints, s.contents, replaced=now_committed)
        except InvalidArgument:
            return None
        entry.graph = g
        entry.mark = s.mark
        entry.uncommitted = (entry.uncommitted - s.committed) | {a.id for a in s.artifacts if not a.committed}
        self.stats["extended"] += 1
        return g

    def _rebuild(self, session_id: str) -> ProvenanceGraph:
        built_ns = time.time_ns()
        try:
            s = self._store.records_since(session_id)
        except SessionNotFound:
            self._entries.pop(session_id, None)
            raise
        g = ProvenanceGraph.from_records(s.artifacts, s.checkpoints, dict(s.contents), hash_of=self._hash_of,
                                         session_id=session_id)
        self.stats["rebuilt"] += 1
        if s.stamp is None or not s.appended or len(g) != len(s.artifacts):
            self._entries.pop(session_id, None)
            return g
        entries = self._entries
        entries[session_id] = _Entry(
            graph=g, stamp=s.stamp, exact=s.exact, built_ns=built_ns, mark=s.mark,
            uncommitted=frozenset(a.id for a in s.artifacts if not a.committed))
        with contextlib.suppress(KeyError):  # (clear() may drop it meanwhile)
            entries.move_to_end(session_id)
        while len(entries) > self.size:
            with contextlib.suppress(KeyError):
                entries.popitem(last=False)
        return g
