"""The agents a recorder saw run: which compiled graph ran each session, and the latest one.

A forget replays a session with the agent that ran it; an erasure asks that agent's
checkpointer and memory store. Learned at a session's first run (``hooks``), never
forgotten while the process lives.
"""

from __future__ import annotations

from typing import Any


class AgentRegistry:
    """Session id -> the compiled agent that ran it, plus the last agent to run anywhere."""

    def __init__(self) -> None:
        self._by_session: dict[str, Any] = {}
        #: the agent of the latest session learned (the default when a session has none)
        self.last: Any = None

    def learn(self, session_id: str, agent: Any) -> None:
        self._by_session[session_id] = agent
        self.last = agent

    def get(self, session_id: str) -> Any:
        """The agent that ran ``session_id``, None when none is known."""
        return self._by_session.get(session_id)

    def for_session(self, session_id: str | None) -> Any:
        """The agent that ran ``session_id``, else the last agent to run (None: no agent ran)."""
        return (self._by_session.get(session_id) if session_id else None) or self.last

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._by_session

    def __getitem__(self, session_id: str) -> Any:
        return self._by_session[session_id]
