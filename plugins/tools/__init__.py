"""Tools plugin: LangChain tools over the sandbox and the call ledger.

The glue between the recording core (which only reads a tool's declared
effect) and the sandbox (environments, the call ledger):

- :mod:`.effects` — :func:`unsee_tool`, :func:`declare_effect`,
  :func:`sandbox_command_tool`: tools that declare their effect
  (``read`` / ``write`` / ``external``) and route calls through a
  :class:`~unsee.sandbox.Ledger` (``state``, a graph-state update, is a
  declaration only: the ledger routes none).
- :mod:`.environments` — :class:`SessionEnvironments`, one sandbox
  environment per session, snapshotted at checkpoints, shadowed for replays;
  :mod:`.catalog` — where their snapshots are recorded (a JSON file under the
  home, or rows of a shared PostgreSQL store); :mod:`.snapshot_store` — the
  local backend's snapshots kept in that store; :mod:`.errors` —
  :class:`SnapshotElsewhere`.

:func:`effect_of` (declared, else inferred: MCP annotations, a ``Command``
return, a middleware that adds the tool), :func:`effect_basis` (which, and
why), :data:`EFFECT_KEY` and :data:`STATE` are the recording core's
(:mod:`unsee.middleware.tools`), re-exported here for convenience.

Public names are imported lazily (on first use), so importing the face loads
neither LangChain nor the sandbox; other plugins and the facade use only these
names.
"""

from __future__ import annotations

from unsee.plugins import lazy_exports

_EXPORTS = {
    "EFFECT_KEY": "unsee.middleware.tools",
    "STATE": "unsee.middleware.tools",
    "effect_basis": "unsee.middleware.tools",
    "effect_of": "unsee.middleware.tools",
    "EFFECTS": "unsee.sandbox",
    "Effect": "unsee.sandbox",
    "COMPENSATE_KEY": "unsee.middleware.tools",
    "IDEMPOTENT_KEY": "unsee.middleware.tools",
    "idempotent": "unsee.middleware.tools",
    "Compensator": ".compensation",
    "compensator": ".compensation",
    "compensator_of": ".compensation",
    "ledger_bypassed": ".effects",
    "current_session_id": ".effects",
    "declare_effect": ".effects",
    "sandbox_command_tool": ".effects",
    "unsee_tool": ".effects",
    "SessionEnvironments": ".environments",
    "session_repository": ".environments",
    "SnapshotElsewhere": ".errors",
    "Catalog": ".catalog",
    "CatalogState": ".catalog",
    "JsonCatalog": ".catalog",
    "StoreCatalog": ".catalog",
    "home_label": ".catalog",
    "StoreSnapshotStore": ".snapshot_store",
    "is_store_ref": ".snapshot_store",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
