"""Compatibility alias: the evaluation harness moved to :mod:`unsee.eval`.

The harness (``unsee eval`` / ``unsee bench``) drives the ``Unsee`` facade, so
it now lives above it, in ``unsee.eval``; the scripted chat model moved to the
model plugin (``unsee.plugins.model``). This face is kept so existing
``from unsee.plugins.eval import ScriptedChatModel, Policy, call_id`` imports
keep working; it exports only those three names, from ``unsee.plugins.model``
(imported on first use). New code imports them from ``unsee.plugins.model``.
"""

from __future__ import annotations

from unsee.plugins import lazy_exports

#: name -> the face it comes from (absolute: another plugin's face)
_EXPORTS = {
    "ScriptedChatModel": "unsee.plugins.model",
    "Policy": "unsee.plugins.model",
    "call_id": "unsee.plugins.model",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
