"""Peer detectors: other projects' injection screens behind unsee's detector interface, so
``unsee eval detectors`` measures them on the same corpora, in the same table.

``toolwall-guard`` (PyPI ``toolwall-guard``, module ``toolwall``; install the
``peers-detect`` extra, ``pip install 'unsee[peers-detect]'``, which pins 0.4.0)
screens a tool's response with regular expressions over its attack corpus,
Unicode checks (tag characters, zero-width, bidi), markdown exfiltration sinks,
and a DeBERTa judge that it would fetch from the Hugging Face hub on first
use. :class:`ToolwallRules` runs its *rules only* (``CompositeDetector(
use_judge=False)``): nothing is downloaded, and the judge's figures are not
these. ``--detector toolwall-guard`` names it, as does the ``module:attr`` form
``unsee.eval.peers:toolwall_rules``.

toolwall blocks a whole tool response when its score reaches the policy's
threshold (``Policy.response_ipi_threshold``, 0.6 by default): its verdict is
therefore one finding over the whole output, scored with toolwall's score;
``--min-score`` is the threshold the evaluation applies to it (0.5 by default).
"""

from __future__ import annotations

from typing import Any

from unsee.middleware.errors import UnseeError
from unsee.plugins.detect import Finding

__all__ = ["PeerNotInstalled", "ToolwallRules", "toolwall_rules"]

#: the install hint a missing peer's error gives
_INSTALL = "pip install 'unsee[peers-detect]' (or: pip install toolwall-guard==0.4.0)"


class PeerNotInstalled(UnseeError, ImportError, ValueError):
    """A peer detector's package is not installed; the message says how to install it.
    (A ValueError too, so ``unsee eval detectors`` reports it as a one-line usage error.)"""


class ToolwallRules:
    """toolwall-guard's rule layers (patterns, Unicode, markdown exfiltration), judge off.

    Raises :class:`PeerNotInstalled` when ``toolwall`` cannot be imported."""

    def __init__(self, *, markdown_allowlist: tuple[str, ...] = ()) -> None:
        try:
            from importlib.metadata import PackageNotFoundError, version

            from toolwall.detect import CompositeDetector
        except ImportError as exc:
            raise PeerNotInstalled(f"toolwall-guard is not installed ({exc}); {_INSTALL}") from None
        try:
            ver = version("toolwall-guard")
        except PackageNotFoundError:  # (importable from a checkout, not installed as a distribution)
            ver = "?"
        # use_judge=False: the judge would download a DeBERTa model from the hub on its first call
        self._detector: Any = CompositeDetector(markdown_allowlist=markdown_allowlist, use_judge=False)
        self.name = f"toolwall-guard {ver} (rules)"

    def detect(self, text: str, artifact_id: str | None = None) -> list[Finding]:
        score, hits = self._detector.score(text)
        if not hits:
            return []
        kinds = ", ".join(dict.fromkeys(str(h.get("kind")) for h in hits))
        return [Finding(0, len(text), text, min(1.0, max(0.0, float(score))), f"toolwall: {kinds}", self.name,
                        artifact_id)]


#: the ``module:attr`` name a command line gives (``--detector unsee.eval.peers:toolwall_rules``)
toolwall_rules = ToolwallRules
