"""Erasure plugin: erase a forgotten target from every route the runtime wrote,
prove it with a byte-level audit, and sign a receipt.

One module a job: the forms a target takes on disk (``forms``), byte scanning
(``scan``), SQLite's WAL and free pages (``sqlite_scrub``), the LangGraph
history rewrite (``history``), per-thread encryption keys for crypto-shredding
(``keys``), routes (``routes``: the ``Route`` contract and the users'
registry, ``register_route``; the built-in routes in ``routes_langgraph``,
``routes_records``, ``routes_sandbox``, in the erasure order of the table
``routes_builtin.BUILTIN_ROUTES``; ``testing.RouteConformance``, the suite every
route's tests run, is imported by tests only), the journal
that makes a rerun finish an interrupted erasure (``journal``), the operator's
retention policy over a thread's history (``retention``), the rollback
surface of a deployment (``surface``: the three questions of "LangGraph
Compaction Deletes the View, Not the Record"), signed receipts (``receipt``)
and the operator (``eraser``). What it needs from its surroundings is
``ports.ErasureContext`` (never the facade).

Public names are imported lazily; other plugins and the facade use only these.
"""

from __future__ import annotations

from unsee.plugins import lazy_exports

_EXPORTS = {
    "Eraser": ".eraser",
    "ErasureResult": ".eraser",
    "AuditReport": ".eraser",
    "verify": ".eraser",
    "ErasureContext": ".ports",
    "Route": ".routes",
    "RouteAudit": ".routes",
    "Scope": ".routes",
    "register_route": ".routes",
    "unregister_route": ".routes",
    "registered_route": ".routes",
    "RouteFactory": ".routes",
    "BUILTIN_ROUTES": ".routes_builtin",
    "route_factories": ".routes_builtin",
    "log_export": ".routes_records",
    "Receipt": ".receipt",
    "ReconciledItem": ".receipt",
    "ReconciliationFacts": ".receipt",
    "amend_receipt": ".receipt",
    "receipt_path": ".receipt",
    "RouteReceipt": ".receipt",
    "read_receipt": ".receipt",
    "verify_signature": ".receipt",
    "SigningKey": ".receipt",
    "public_pem": ".receipt",
    "stored_receipt": ".receipt",
    "trusted_key": ".receipt",
    "ReceiptKeyInvalid": ".errors",
    "KeyStore": ".keys",
    "KeyDestroyed": ".keys",
    "EncryptingSaver": ".keys",
    "encrypted_serde": ".keys",
    "encrypting": ".keys",
    "HistoryNotRewritable": ".history",
    "RetentionPolicy": ".retention",
    "RetentionRecord": ".retention",
    "RetentionRefused": ".retention",
    "UnknownRetentionPolicy": ".retention",
    "apply_retention": ".retention",
    "SubjectEraser": ".subject",
    "SubjectErasureResult": ".subject",
    "SubjectNotFound": ".subject_plan",
    "parse_namespace": ".subject_plan",
    "delete_namespace": ".namespaces",
    "NamespaceDeletion": ".namespaces",
    "NotForgotten": ".errors",
    "ErasureInterrupted": ".errors",
    "ReceiptInvalid": ".errors",
    "SurfaceReport": ".surface",
    "target_forms": ".forms",
    "erasure_blockers": ".preflight",
    "value_text": ".history",
    "holds_target": ".forms",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
