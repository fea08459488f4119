"""Routes in unsee's own files: the records (provenance + vault), the call ledger,
exported spans.

- records: a committed forget already replaced the session's artifacts, spans
  and vault content with the counterfactual ones; erasure drops the scratch
  sessions, removes the target from whatever text of the session still holds
  it (memory-store journal rows, commit journal payloads, span attributes when
  spans carried payload), and scrubs WAL and free pages.
- ledger: calls whose arguments, result or error hold the target keep their
  fact (id, tool, status, times) and lose their text (a keyed hash instead).
- exports: spans that left the machine. Files written locally (Jaeger JSON)
  are audited; what went to an OTLP receiver is listed as unreachable, with
  whether payload text could have gone with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .forms import remove_forms
from .owners import owner_of
from .routes import Route, RouteAudit, Scope, SubjectScope, scrub_note, sqlite_route_files
from .sqlite_scrub import scrub

SCRATCH_MARK = "~cf-"
EXPORT_LOG = "exports.jsonl"


class RecordsRoute(Route):
    name = "unsee.records"
    holds = "provenance records, spans and the content vault; the store and commit journals"
    method = "replaced by the counterfactual at commit; leftover texts cleaned; WAL truncated, free pages vacuumed"

    def __init__(self, records: Any):
        self.records = records

    def files(self, scope: Scope | None = None) -> list[Path]:
        return sqlite_route_files(self.records.files())

    def audit(self, scope: Scope) -> RouteAudit:
        out = self._audit()
        sessions = [scope.session, *self.records.sessions_like(scope.session + SCRATCH_MARK)]
        out.value_copies = sum(1 for s in sessions for *_, text in self.records.erasure.session_texts(s)
                               if scope.holds(text))
        if self.records.files():
            out.add_files(self.files(), scope)  # other sessions' rows: attributed by owners.py
        else:  # a database server: no bytes to read; other sessions' texts are listed as theirs
            for s in self.records.sessions_like(""):
                if owner_of(s) != scope.session:
                    out.add_other(owner_of(s), "unsee's tables (stored texts)",
                                  sum(1 for *_, text in self.records.erasure.session_texts(s) if scope.holds(text)))
        return out

    def erase(self, scope: Scope) -> list[str]:
        notes = []
        scratch = self.records.sessions_like(scope.session + SCRATCH_MARK)
        for s in scratch:
            self.records.rewrites.drop_session(s)
        if scratch:
            notes.append(f"{len(scratch)} scratch sessions' records dropped")
        n = self.records.erasure.rewrite_texts(scope.session,
                                               lambda t: remove_forms(t, scope.target) if scope.holds(t) else None)
        if n:
            notes.append(f"{n} stored texts of the session cleaned")
        if self.records.files():
            with self.records.exclusive() as (db, vault):
                notes += [scrub_note(scrub(c.raw)) for c in (db, vault)]
        else:  # a database server (PostgreSQL): its tables are rewritten, its WAL is out of reach
            notes += self.records.erasure.compact()
        return notes

    def erase_subject(self, subject: SubjectScope) -> list[str]:
        """The subject's sessions' provenance, spans, commit journal and vault texts dropped, and
        every memory-store journal row of its namespaces (any session's); WAL + free pages."""
        found, rows = self.records.erasure.erase_sessions(subject.sessions, subject.namespaces)
        notes = [f"{found} recorded sessions dropped (provenance, spans, vault)",
                 f"{rows} memory-store journal rows of the namespaces dropped"]
        if self.records.files():
            with self.records.exclusive() as (db, vault):
                notes += [scrub_note(scrub(c.raw)) for c in (db, vault)]
        else:
            notes += self.records.erasure.compact()
        return notes

    def unreachable(self) -> list[str]:
        if self.records.files():
            return []
        return ["PostgreSQL WAL segments, WAL archives, backups and replicas of unsee's tables "
                "(rows deleted and tables rewritten; what the server copied elsewhere before is not)"]


class LedgerRoute(Route):
    name = "unsee.ledger"
    holds = "the call ledger: arguments, results and errors of real tool executions"
    method = "text of calls holding the target replaced by keyed hashes (the fact of the call kept); vacuumed"

    def __init__(self, ledger: Any, hasher: Any):
        self.ledger = ledger
        self.hasher = hasher

    def files(self, scope: Scope | None = None) -> list[Path]:
        # (a ledger on a database server has no file of ours: its rows are audited as values)
        return sqlite_route_files([self.ledger.path]) if self.ledger.path is not None else []

    def _holds(self, scope: Scope):
        return lambda rec: any(scope.holds(t) for t in (rec.args_json, rec.result_json or "", rec.error or ""))

    def audit(self, scope: Scope) -> RouteAudit:
        out = self._audit()
        # the scope's calls count; another session's are that session's (their bytes in the
        # ledger file are attributed to it by owners.py; erase() still redacts them: below)
        holds = self._holds(scope)
        records = [rec for rec in self.ledger.calls() if holds(rec)]
        plans = [session for _, session, text in self.ledger.plans() if scope.holds(text)]
        out.value_copies = (sum(1 for rec in records if owner_of(rec.session) == scope.session)
                            + sum(1 for session in plans if owner_of(session) == scope.session))
        if self.ledger.path is not None:
            out.add_files(self.files(), scope)
        else:  # a database server: no bytes to read; other sessions' calls are listed as theirs
            for owner in [owner_of(rec.session) for rec in records] + [owner_of(session) for session in plans]:
                if owner != scope.session:
                    out.add_other(owner, "the call ledger (stored texts)", 1)
        return out

    def _vacuum_notes(self) -> list[str]:
        complete = self.ledger.vacuum()
        if self.ledger.path is None:  # PostgreSQL: the table rewritten
            return ["unsee.calls: rows rewritten, VACUUM FULL"]
        return ["ledger.sqlite: WAL truncated, free pages vacuumed" if complete
                else "ledger.sqlite: WAL not fully truncated (another connection holds a read lock)"]

    def erase_subject(self, subject: SubjectScope) -> list[str]:
        """The subject's calls lose their text (arguments, results, errors -> keyed hashes); the
        fact of each call stays, so a real side effect is still never fired twice."""
        ids = self.ledger.redact(lambda rec: subject.owns(rec.session), self.hasher.hash)
        plans = self.ledger.drop_plans(subject.owns)  # (their sessions are gone: nothing left to reconcile)
        return ([f"{len(ids)} call records redacted (facts kept as keyed hashes)"]
                + ([f"{plans} reconciliation plans dropped"] if plans else []) + self._vacuum_notes())

    def erase(self, scope: Scope) -> list[str]:
        # Every session, not only this one: a call of another session that holds the target
        # is a copy of it too (the ledger keeps the fact, never needs the text).
        ids = self.ledger.redact(self._holds(scope), self.hasher.hash)
        # a reconciliation plan holds calls' arguments too (another forget's, of another target)
        mark = f"[erased {self.hasher.hash(scope.target)}]"
        plans = self.ledger.redact_plans(scope.holds, lambda value: _replaced(value, scope.target, mark))
        return ([f"{len(ids)} call records redacted"] if ids else []) + (
            [f"{len(plans)} reconciliation plans scrubbed"] if plans else []) + self._vacuum_notes()

    def unreachable(self) -> list[str]:
        if self.ledger.path is not None:
            return []
        return ["PostgreSQL WAL segments, WAL archives, backups and replicas of the call ledger "
                "(unsee.calls: texts redacted and the table rewritten; what the server copied elsewhere "
                "before is not)"]


class ExportsRoute(Route):
    name = "exports"
    holds = "spans exported over OTLP or written as Jaeger JSON"
    method = "not erased by unsee: Jaeger JSON files audited, OTLP receivers listed as unreachable"

    def __init__(self, home: Path, content_in_spans: bool):
        self.log = Path(home) / EXPORT_LOG
        self.content_in_spans = content_in_spans

    def _exports(self, session: str | None = None) -> list[dict]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]
        return [r for r in rows if session is None or r.get("session") == session]

    def files(self, scope: Scope | None = None) -> list[Path]:
        return [self.log]

    def audit(self, scope: Scope) -> RouteAudit:
        out = self._audit()
        local = {Path(r["to"]) for r in self._exports(scope.session) if r.get("kind") == "jaeger-json"}
        out.add_files(sorted(p for p in local if p.is_file()), scope)
        return out

    def erase(self, scope: Scope) -> list[str]:
        return []

    def erase_subject(self, subject: SubjectScope) -> list[str]:
        """The subject's exports: Jaeger JSON files written for its sessions deleted, its lines
        of the export log dropped (what went to an OTLP receiver stays listed as unreachable in
        the receipt: the audit before the erasure named it)."""
        rows = self._exports()
        mine = [r for r in rows if subject.owns(str(r.get("session", "")))]
        gone = 0
        for r in mine:
            if r.get("kind") == "jaeger-json" and Path(r["to"]).is_file():
                Path(r["to"]).unlink()
                gone += 1
        if mine:
            keep = [r for r in rows if r not in mine]
            tmp = self.log.with_suffix(".tmp")
            tmp.write_text("".join(json.dumps(r) + "\n" for r in keep))
            tmp.replace(self.log)
        return [f"{gone} exported trace files deleted; {len(mine)} export log lines dropped"]

    def unreachable(self) -> list[str]:
        out = []
        for r in self._exports():
            if r.get("kind") != "otlp":
                continue  # files written here are audited, not unreachable
            payload = "payload text may have gone with them" if r.get("payload") else "no payload text on them"
            out.append(f"{r['spans']} spans of session {r['session']} sent to {r['to']} ({r['kind']}) "
                       f"at {r['at']}: {payload}")
        return out


def log_export(home: Path, session: str, kind: str, to: str, spans: int, payload: bool) -> None:
    """Note an export in the home (the receipt lists what left the machine)."""
    import time

    line = json.dumps({"session": session, "kind": kind, "to": to, "spans": spans, "payload": payload,
                       "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    with open(Path(home) / EXPORT_LOG, "a") as f:
        f.write(line + "\n")


# The factories (``routes_builtin.BUILTIN_ROUTES`` lists them, in erasure order)
def records_route(ctx, agent):
    """unsee's records and vault (always there)."""
    return RecordsRoute(ctx.records)


def _replaced(value: Any, target: str, mark: str) -> Any:
    """A decoded JSON value with ``target`` replaced by ``mark`` in every text (keys included)."""
    if isinstance(value, str):
        return value.replace(target, mark)
    if isinstance(value, dict):
        return {_replaced(k, target, mark): _replaced(v, target, mark) for k, v in value.items()}
    if isinstance(value, list):
        return [_replaced(v, target, mark) for v in value]
    return value


def ledger_route(ctx, agent):
    """The call ledger (None: no tool went through it)."""
    ledger = ctx.ledger()
    return LedgerRoute(ledger, ctx.hasher) if ledger is not None else None


def exports_route(ctx, agent):
    """Spans that left the machine (always there: the audit reads the home's export log)."""
    return ExportsRoute(ctx.home, ctx.content_in_spans)
