"""The pure part of a data subject's erasure: what is selected, what is deleted, and the
keyed fingerprints its recorded content is audited by. No I/O here (``subject.py`` is the
adapter); tests call these functions directly.

A *selection* names a subject's threads (LangGraph thread ids = unsee session ids), the
memory-store namespaces that hold their data (tuples of strings; every item under the
prefix goes) and optional target strings (a customer id, an e-mail address) to audit for.

The *fingerprints* are how the erasure audits for "everything recorded about the subject"
without keeping the text: before the vault's texts of the subject's sessions are deleted,
each text is cut into word pairs (two neighbouring words of letters and digits, lower
case, at most 3 bytes of separators between them: ``"card 4417-2231 on"`` gives
``"card 4417"``, ``"4417 2231"``, ``"2231 on"``), and each pair the other sessions'
texts do not also hold (the system prompt, a shared ticket, boilerplate: not this
subject's) is kept only as a keyed hash. The audit cuts every stored file and value into
pairs the same way and counts those whose keyed hash is a fingerprint. Separators,
escapes of one to three bytes (JSON quoting, msgpack framing) and letter case do not hide
a pair; UTF-16 text, compressed pages (PostgreSQL's pglz) and text split into single
words do (the target strings are searched in every form ``forms.py`` knows).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from unsee.middleware.errors import InvalidArgument, UnseeError

#: a word: letters and digits (ASCII), 2+ characters; separators between two words of a pair
_WORD = re.compile(rb"[A-Za-z0-9]{2,}")
_MAX_GAP = 3
#: the keyed hashes of word pairs are this long (bytes); 8 bytes make a collision negligible
_DIGEST = 8


class SubjectNotFound(UnseeError, LookupError):
    """A thread of a subject erasure is unknown: no recording, no checkpoint, no journal names it."""

    def __init__(self, threads: Sequence[str]):
        super().__init__(f"unknown thread(s) {', '.join(map(repr, threads))}: no recorded session, no "
                         "checkpoint and no unfinished subject erasure names them; nothing was changed")
        self.threads = list(threads)


@dataclass(frozen=True)
class Selection:
    """What a subject erasure is about (validated: :func:`selection`)."""

    threads: tuple[str, ...]
    namespaces: tuple[tuple[str, ...], ...]
    targets: tuple[str, ...]
    subject: str | None = None

    def erasure_id(self, keyed_hash) -> str:
        """A stable id naming the journal and the receipt: the same selection again (a rerun
        after a crash) finds its journal; the id is a keyed hash, so it names no subject."""
        text = "\x1f".join(["subject", self.subject or "", *sorted(self.threads),
                            *sorted("\x1e".join(ns) for ns in self.namespaces)])
        return "subject-" + keyed_hash(text).rsplit(":", 1)[-1][:24]


def parse_namespace(text: Any) -> tuple[str, ...]:
    """A namespace path as the CLI takes it: ``"users/dana"`` -> ``("users", "dana")``."""
    if not isinstance(text, str) or not text.strip("/ "):
        raise InvalidArgument(f"a namespace is a path like users/dana, got {text!r}")
    parts = tuple(text.strip("/").split("/"))
    if any(not p.strip() for p in parts):
        raise InvalidArgument(f"namespace {text!r} has an empty part (users//dana?)")
    return parts


def _namespace(ns: Any) -> tuple[str, ...]:
    if isinstance(ns, list):
        ns = tuple(ns)
    if not isinstance(ns, tuple) or not ns or not all(isinstance(p, str) and p.strip() for p in ns):
        raise InvalidArgument(f"a namespace is a non-empty tuple of non-empty strings such as ('users', 'dana'), "
                              f"got {ns!r}" + (" (a path string is the CLI's form: parse_namespace)"
                                               if isinstance(ns, str) else ""))
    return ns


def selection(threads: Any = (), namespaces: Any = (), targets: Any = (), subject: Any = None) -> Selection:
    """Validate a subject erasure's arguments (``InvalidArgument`` before anything is touched)."""
    for name, value in (("threads", threads), ("namespaces", namespaces), ("targets", targets)):
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise InvalidArgument(f"{name} must be a list, got {type(value).__name__} {value!r}")
    threads, namespaces, targets = list(threads), list(namespaces), list(targets)
    for t in threads:
        if not isinstance(t, str) or not t.strip():
            raise InvalidArgument(f"a thread id is a non-empty string, got {t!r}")
        if "~cf-" in t or "~er-" in t:
            raise InvalidArgument(f"{t!r} is a replay's scratch or an erasure's staging thread: name its session")
    nss = [_namespace(ns) for ns in namespaces]
    for t in targets:
        if not isinstance(t, str) or not t.strip():
            raise InvalidArgument(f"a target is a non-empty string, got {t!r}")
    if subject is not None and (not isinstance(subject, str) or not subject.strip()):
        raise InvalidArgument(f"subject must be a non-empty name or None, got {subject!r}")
    if not threads and not nss:
        raise InvalidArgument("nothing selected: name at least one thread or one namespace of the subject")
    return Selection(tuple(dict.fromkeys(threads)), tuple(dict.fromkeys(nss)), tuple(dict.fromkeys(targets)),
                     subject)


def subject_sessions(threads: Sequence[str], recorded: Iterable[str]) -> list[str]:
    """The recorded sessions of the subject: each thread and its scratch/staging sessions."""
    marks = tuple(t + m for t in threads for m in ("~cf-", "~er-"))
    rec = list(recorded)
    return [*threads, *sorted(s for s in rec if s.startswith(marks))]


def in_namespaces(namespace: Sequence[str], selected: Iterable[Sequence[str]]) -> bool:
    """Whether ``namespace`` is one of ``selected`` or under one (a prefix selects its children)."""
    ns = tuple(namespace)
    return any(ns[:len(s)] == tuple(s) for s in selected)


# -- fingerprints -------------------------------------------------------------------------
#: a word pair that is one of unsee's artifact ids (``in-21e9840cdc48``): a recorded text that
#: refers to another record (a run's input naming the user inputs it gave) holds ids, which every
#: record about the session (a forget's page) holds too; ids are structure, never content
_ARTIFACT_ID = re.compile(rb"^[a-z]{1,8} [0-9a-f]{12}$")


def pairs(data: bytes | str) -> Counter:
    """Word pairs of ``data`` (lower case, ``b"w1 w2"``) and how often each occurs."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    out: Counter = Counter()
    prev = None
    for m in _WORD.finditer(data):
        if prev is not None and m.start() - prev.end() <= _MAX_GAP:
            out[prev.group().lower() + b" " + m.group().lower()] += 1
        prev = m
    return out


@dataclass(frozen=True)
class Fingerprinter:
    """Keyed hashes of word pairs. ``key`` is derived from the home's hash key, so a
    fingerprint cannot be tested against guessed text without it."""

    key: bytes

    @classmethod
    def from_hasher(cls, hasher) -> "Fingerprinter":
        return cls(hasher.hash("unsee subject fingerprint key").encode())

    def digest(self, pair: bytes) -> str:
        return hashlib.blake2b(pair, key=self.key[:64], digest_size=_DIGEST).hexdigest()

    def fingerprints(self, subject_texts: Iterable[str], other_texts: Iterable[str]) -> list[str]:
        """The subject's fingerprints: pairs of its texts that no other session's text holds."""
        mine: set[bytes] = set()
        for t in subject_texts:
            mine.update(p for p in pairs(t) if not _ARTIFACT_ID.match(p))
        for t in other_texts:
            if not mine:
                break
            mine.difference_update(pairs(t))
        return sorted({self.digest(p) for p in mine})

    def hits(self, data: bytes | str, fingerprints: set[str] | frozenset[str]) -> int:
        """How many word pairs of ``data`` are fingerprints (each occurrence counts)."""
        if not fingerprints:
            return 0
        return sum(n for p, n in pairs(data).items() if self.digest(p) in fingerprints)


# -- the plan -----------------------------------------------------------------------------
@dataclass
class SubjectPlan:
    """What the erasure will do, route by route (for the journal and the receipt's notes)."""

    erasure_id: str
    threads: list[str]
    sessions: list[str]
    namespaces: list[tuple[str, ...]]
    routes: list[str]
    done: list[str] = field(default_factory=list)

    @property
    def todo(self) -> list[str]:
        return [r for r in self.routes if r not in self.done]


def plan(sel: Selection, erasure_id: str, recorded_sessions: Iterable[str], routes: Sequence[str],
         done: Iterable[str] = ()) -> SubjectPlan:
    """The plan of a selection: its sessions (with scratch ones), the routes still to erase
    (those a journal of an interrupted run has not marked done), in erasure order."""
    done = [r for r in done if r in routes]
    return SubjectPlan(erasure_id, list(sel.threads), subject_sessions(sel.threads, recorded_sessions),
                       list(sel.namespaces), list(routes), done)


def unknown_threads(threads: Sequence[str], known: set[str]) -> list[str]:
    return [t for t in threads if t not in known]
