"""IFC plugin: information-flow control for identifier sinks (pure core).

- :mod:`.extract` — identifiers in text (IBAN, account, card, phone, e-mail,
  URL, domain, BTC, ETH) and their normalization; pluggable extractors
  (:func:`register_extractor`); percent-decoding in :mod:`.decode`.
- :mod:`.labels` — ``trusted`` / ``untrusted`` / ``revoked`` / ``endorsed`` labels of every
  artifact of a provenance graph (:func:`label_graph`).
- :mod:`.policy` — sinks (:class:`SinkSpec`), :func:`decide` and
  :func:`identifiers_by_label`.
- :mod:`.index` — :class:`SessionDecisions`: ``evaluate``'s decisions on a
  session's growing graph, from an identifier index and label tables
  (:class:`~.labels.LabelTable`) kept up to date as artifacts arrive.
- :mod:`.decision` — the :class:`Decision` and :class:`Evidence` records.
- errors in :mod:`.errors`.

The middleware adapter (turning a ``block`` into an error tool message, ``ask``
into a LangGraph interrupt, decisions into span events) sits on top of these
pure functions.
"""

from __future__ import annotations

from .decision import Decision, Evidence
from .errors import (
    DuplicateExtractor,
    IFCError,
    InvalidExtractor,
    InvalidMode,
    InvalidSinkSpec,
    PolicyViolation,
    UnknownExtractor,
)
from .extract import (
    ExtractorRegistry,
    Identifier,
    builtin_registry,
    default_registry,
    extract,
    make_identifier,
    match_key,
    normalize,
    register_extractor,
    unregister_extractor,
)
from .index import SessionDecisions
from .labels import ENDORSED, REVOKED, TRUSTED, UNTRUSTED, LabelTable, label_graph, own_labels, source_matches
from .policy import (
    MODES,
    SinkSpec,
    declared_sinks,
    decide,
    endorsed_identifiers,
    evaluate,
    identifier_sinks,
    identifiers_by_label,
    parse_sinks,
)

__all__ = [
    "ENDORSED", "MODES", "REVOKED", "TRUSTED", "UNTRUSTED",
    "Decision", "DuplicateExtractor", "Evidence", "ExtractorRegistry", "IFCError", "Identifier",
    "InvalidExtractor", "InvalidMode", "InvalidSinkSpec", "LabelTable", "PolicyViolation", "SessionDecisions",
    "SinkSpec", "UnknownExtractor",
    "builtin_registry", "decide", "declared_sinks", "default_registry", "endorsed_identifiers", "evaluate", "extract",
    "identifier_sinks", "identifiers_by_label", "label_graph", "make_identifier", "match_key",
    "normalize", "own_labels", "parse_sinks", "register_extractor", "source_matches",
    "unregister_extractor",
]
