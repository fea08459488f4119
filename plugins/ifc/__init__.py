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
pure functions: :class:`IFCInterceptor` and :class:`SessionGraphs` in
:mod:`.adapter`; each decision's ``run_guardrail`` span is laid out by
:mod:`.trace`.

Public names are imported lazily (on first use); other plugins and the facade
use only these names.
"""

from __future__ import annotations

from unsee.plugins import lazy_exports

_EXPORTS = {
    "IFCInterceptor": ".adapter",
    "GuardrailSpans": ".adapter",
    "SessionGraphs": ".adapter",
    "Decision": ".decision",
    "Evidence": ".decision",
    "DuplicateExtractor": ".errors",
    "IFCError": ".errors",
    "InvalidExtractor": ".errors",
    "InvalidMode": ".errors",
    "InvalidSinkSpec": ".errors",
    "PolicyViolation": ".errors",
    "UnknownExtractor": ".errors",
    "ExtractorRegistry": ".extract",
    "Identifier": ".extract",
    "builtin_registry": ".extract",
    "default_registry": ".extract",
    "extract": ".extract",
    "make_identifier": ".extract",
    "match_key": ".extract",
    "normalize": ".extract",
    "register_extractor": ".extract",
    "unregister_extractor": ".extract",
    "SessionDecisions": ".index",
    "ENDORSED": ".labels",
    "REVOKED": ".labels",
    "TRUSTED": ".labels",
    "UNTRUSTED": ".labels",
    "LabelTable": ".labels",
    "label_graph": ".labels",
    "own_labels": ".labels",
    "source_matches": ".labels",
    "MODES": ".policy",
    "SinkSpec": ".policy",
    "declared_sinks": ".policy",
    "decide": ".policy",
    "endorsed_identifiers": ".policy",
    "evaluate": ".policy",
    "identifier_sinks": ".policy",
    "identifiers_by_label": ".policy",
    "parse_sinks": ".policy",
    "IFCInterceptor": ".adapter",
    "SessionGraphs": ".adapter",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
