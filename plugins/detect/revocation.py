"""Automatic revocation: detector findings become revocation events.

Two ways a verdict arrives (``u.detect(detectors, mode=..., policy=...)``):

- ``mode="sync"``: detectors run on each tool return as it happens, inside
  the recording. With ``policy="auto"`` the flagged spans are removed before
  the model or the record ever see them (that observation *is* the
  counterfactual one: nothing to replay later).
- ``mode="async"`` (the common case: the verdict is late): ``scan(session)``
  runs detectors over the recorded observations after the agent processed
  them; each finding becomes ``RevocationEvent(target=<flagged span>,
  source=<observation artifact>, raised_by="detector")`` and, per policy,
  is forgotten at once (``auto``: B7, waiting for a run in progress to end),
  queued for an operator (``queue``: ``pending``/``apply_pending``) or only
  reported (``alert``). ``start(interval)`` scans in a background thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import ToolMessage

from unsee.middleware.records import OBSERVATION_TYPES, ArtifactType

from .base import Finding
from .hooks import run_detectors

log = logging.getLogger("unsee.detect")
Policy = Literal["auto", "queue", "alert"]
Mode = Literal["sync", "async"]


def redact(text: str, findings: Iterable[Finding]) -> str:
    """``text`` without the flagged spans (merged findings do not overlap)."""
    out, pos = [], 0
    for f in sorted(findings, key=lambda f: f.start):
        out.append(text[pos:f.start])
        pos = max(pos, f.end)
    out.append(text[pos:])
    return "".join(out)


@dataclass
class Verdict:
    session_id: str
    artifact_id: str
    finding: Finding
    event: Any
    status: Literal["applied", "queued", "alerted", "failed"]
    report: Any = None
    error: str | None = None


@dataclass
class DetectionService:
    u: Any
    detectors: list
    mode: Mode = "async"
    policy: Policy = "auto"
    min_score: float = 0.5
    strategy: str = "B7"
    verdicts: list[Verdict] = field(default_factory=list)
    _scanned: dict[str, set[str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    # -- sync: an interceptor -------------------------------------------------
    def model_call(self, request, handler):
        return handler(request)

    async def amodel_call(self, request, handler):
        return await handler(request)

    def _screen(self, result):
        if self.mode != "sync" or not isinstance(result, ToolMessage) or not isinstance(result.content, str):
            return result
        found = run_detectors(self.detectors, result.content, min_score=self.min_score)
        if not found:
            return result
        for f in found:
            self.verdicts.append(Verdict("", result.tool_call_id, f, None,
                                         "applied" if self.policy == "auto" else "alerted"))
        if self.policy != "auto":
            return result
        return result.model_copy(update={"content": redact(result.content, found)})

    def tool_call(self, request, handler):
        return self._screen(handler(request))

    async def atool_call(self, request, handler):
        return self._screen(await handler(request))

    # -- async: late verdicts ---------------------------------------------------
    def scan(self, session: str, *, wait: bool = True) -> list[Verdict]:
        """Run the detectors over observations not scanned yet; act per policy."""
        from unsee.plugins.replay.events import RevocationEvent

        g = self.u.graph(session)
        new: list[tuple[str, Finding]] = []
        with self._lock:
            seen = self._scanned.setdefault(session, set())
            for a in g:
                if a.type not in OBSERVATION_TYPES or a.type is ArtifactType.USER_INPUT or a.id in seen:
                    continue
                seen.add(a.id)
                text = g.content(a.id) or ""
                for f in run_detectors(self.detectors, text, a.id, min_score=self.min_score):
                    new.append((a.id, f))
        out = []
        for aid, f in new:
            event = RevocationEvent(target=f.text, source=aid, reason=f"{f.detector}: {f.reason}",
                                    raised_by="detector")
            v = Verdict(session, aid, f, event, {"auto": "applied", "queue": "queued", "alert": "alerted"}[self.policy])
            if self.policy == "auto":
                self._apply(v, wait)
            out.append(v)
            self.verdicts.append(v)
        return out

    def _apply(self, v: Verdict, wait: bool = True) -> None:
        try:
            v.report = self.u.forget(v.session_id, v.event, self.strategy, wait=wait)
            v.status = "applied"
        except Exception as exc:  # reported on the verdict, never lost
            log.warning("automatic revocation failed: %s", exc)
            v.status, v.error = "failed", f"{type(exc).__name__}: {exc}"

    def pending(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == "queued"]

    def apply_pending(self) -> list[Verdict]:
        done = []
        for v in self.pending():
            self._apply(v)
            done.append(v)
        return done

    def start(self, interval: float = 1.0) -> None:
        """Scan every session in a background thread until ``stop()``."""
        def loop():
            while not self._stop.wait(interval):
                for s in self.u.sessions():
                    if "~cf-" in s.session_id:
                        continue  # replay scratch threads
                    try:
                        self.scan(s.session_id)
                    except Exception:
                        log.exception("detector scan of %s failed", s.session_id)

        self._stop.clear()
        self._thread = threading.Thread(target=loop, name="unsee-detect", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
