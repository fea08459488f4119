"""Memory after a fork: which store writes lost their evidence (pure logic).

The memory store sits outside LangGraph's recovery boundary: when a run starts
from a checkpoint that is not the thread's head (time travel with a
``checkpoint_id``, ``update_state`` on an older checkpoint, a fork into another thread), the store still
holds what the abandoned branch wrote. unsee recorded each write as a
``memory_write`` artifact whose parent is the tool call (or model turn) that
made it, so it can tell which of them the new branch no longer justifies.

A write is **orphaned** when none of its causing artifacts (its parents) is an
ancestor of the new branch's start: the messages the run's state holds when it
begins, and everything they were derived from. A write the new branch also
justifies (its tool call's return is still in the state, it was made in an
earlier turn both branches share) is not. A write with no recorded cause is
never judged orphaned: nothing says which branch it belongs to.

What to do with an orphaned write is the session's **fork policy**:
``"flag"`` (report it, change nothing), ``"rollback"`` (put the item back to
its value before the abandoned write, or delete it), ``"keep"`` (record it,
report nothing). Only a write whose value the store still holds is acted on
(:func:`live_orphans`): one superseded by a later write of the session, or
overwritten since by anyone else, is not memory that outlives its evidence.

Everything here is a pure function of records (tests call them with tables);
``fork_watch`` is the adapter that reads the records, the store and the
journal, and applies the policy.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .context_delta import whole_parents
from .errors import InvalidArgument
from .records import Artifact, ArtifactType
from .store_journal import JournalEntry

ForkPolicy = Literal["flag", "rollback", "keep"]
FORK_POLICIES: tuple[str, ...] = ("flag", "rollback", "keep")
DEFAULT_FORK_POLICY: ForkPolicy = "flag"
#: what became of an orphaned item: ``rolling_back`` is a journaled rollback not finished yet;
#: ``superseded``: when the rollback ran, another writer had changed the item (left alone)
Action = Literal["flagged", "rolling_back", "rolled_back", "kept", "superseded"]
_ACTION_OF: dict[str, Action] = {"flag": "flagged", "rollback": "rolling_back", "keep": "kept"}


def parse_fork_policy(value: Any) -> ForkPolicy:
    """The policy named by ``value``; ``InvalidArgument`` for anything else (before anything changes)."""
    if isinstance(value, str) and value in FORK_POLICIES:
        return value  # type: ignore[return-value]
    raise InvalidArgument(f"unknown fork policy {value!r}: expected one of {', '.join(FORK_POLICIES)}")


def replaying(session_id: str, conf: Mapping[str, Any]) -> bool:
    """A forget's replay (a scratch thread run on behalf of a session, ``conf`` its run's
    ``configurable``): its store is an overlay and its start state a fork point on purpose,
    never a fork to act on."""
    return bool(conf.get("unsee_event")) or conf.get("unsee_session") not in (None, session_id)


def action_for(policy: ForkPolicy) -> Action:
    """The first action a policy records for an orphaned item (a rollback is then finished)."""
    return _ACTION_OF[policy]


class OrphanedMemory(BaseModel):
    """One store item whose value came from a write that only an abandoned branch justified."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    namespace: tuple[str, ...]
    key: str
    #: the ``memory_write`` artifact whose value the store held when the fork was found
    write_id: str
    #: the turn (of the session's recording) in which the abandoned write was made
    abandoned_turn: int
    #: the turn of the run that started the new branch
    detected_turn: int
    #: the LangGraph checkpoint that run started at (None when the run did not say)
    branch_checkpoint: str | None = None
    policy: ForkPolicy
    action: Action
    #: after a rollback: ``"previous"`` (the value before the write is back) or ``"deleted"``
    #: (the key did not exist before it); None otherwise
    restored: Literal["previous", "deleted"] | None = None
    created_ns: int = 0
    #: other sessions that read the orphaned value (a ``memory_read`` of the key holding the
    #: write's text): the assertion reached them, and a rollback here does not undo that
    read_by: tuple[str, ...] = ()
    #: the session that made the write, when it is not ``session_id``: the thread was forked from
    #: it (its first run started from that session's state), and the write is only reported —
    #: the other session's own branch still justifies it, and its writes are never touched
    writer: str | None = None


def ancestors(parents: Mapping[str, Sequence[str]], roots: Iterable[str]) -> set[str]:
    """``roots`` and every artifact they were derived from (walking ``parents``)."""
    seen = set(roots)
    stack = list(seen)
    while stack:
        for p in parents.get(stack.pop(), ()):
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return seen


def orphaned_writes(artifacts: Iterable[Artifact], branch: Iterable[str]) -> list[Artifact]:
    """The ``memory_write`` artifacts none of whose causes is an ancestor of ``branch`` (the
    artifact ids of the messages the new branch starts with), in recording order."""
    arts = sorted(artifacts, key=lambda a: a.seq)
    justified = ancestors(whole_parents(arts), branch)
    return [a for a in arts if a.type is ArtifactType.MEMORY_WRITE and a.parents
            and not any(p in justified for p in a.parents)]


@dataclass(frozen=True)
class LiveOrphan:
    """An orphaned write that is the session's latest write of its key: what a policy acts on.

    ``expect`` is the JSON of the value it wrote (the store must still hold it), ``restore``
    the JSON of the value before the first write of the trailing run of orphaned writes of
    the key (None: the key did not exist), found in the journal at ``restore_seq``."""

    write: Artifact
    namespace: tuple[str, ...]
    key: str
    expect: str | None
    restore_seq: int
    restore: str | None


def live_orphans(orphans: Iterable[Artifact], journal: Sequence[JournalEntry]) -> list[LiveOrphan]:
    """For each key whose latest write in the session's ``journal`` is orphaned, what to act on.

    Orphaned writes on one key in a row (the abandoned branch wrote it twice) are undone
    together: the value to restore is the one before the first of them. A key whose latest
    write the new branch justifies keeps it (an earlier orphaned write is superseded)."""
    by_seq = {a.seq: a for a in orphans}
    keys: dict[tuple[tuple[str, ...], str], list[JournalEntry]] = {}
    for e in sorted(journal, key=lambda e: e[0]):
        keys.setdefault((tuple(e[1]), e[2]), []).append(e)
    out = []
    for (ns, key), entries in keys.items():
        last = entries[-1]
        if last[0] not in by_seq:
            continue
        i = len(entries) - 1
        while i > 0 and entries[i - 1][0] in by_seq:
            i -= 1
        first = entries[i]
        out.append(LiveOrphan(by_seq[last[0]], ns, key, last[4], first[0], first[3]))
    return sorted(out, key=lambda o: o.write.seq)


def same_value(stored: Any, journal_json: str | None) -> bool:
    """Whether a store item's value (None: absent) is the value a journal entry recorded."""
    if journal_json is None:
        return stored is None
    if stored is None:
        return False
    return json.loads(json.dumps(stored, sort_keys=True, default=str)) == json.loads(journal_json)


def write_before(journal: Sequence[JournalEntry], namespace: tuple[str, ...], key: str, seq: int) -> int | None:
    """The seq of the session's latest write of the key before ``seq`` (None: none)."""
    best = None
    for e in journal:
        if tuple(e[1]) == tuple(namespace) and e[2] == key and e[0] < seq and (best is None or e[0] > best):
            best = e[0]
    return best
