"""What a reconciliation keeps of what a compensator or tool returned: never the target (pure).

A reconcile may run long after the forget's erasure, when the target's text is gone and only its
keyed hash is known (``ReconcilePlan.target_hash``) with its length. A compensator acts on the
world, and the world may answer with the target in it (a mail service returning the recalled
body): what the ledger keeps of that answer, and what the outcome shows, is searched for the
target window by window (each window of the target's length whose keyed hash is the target's)
and each one found is replaced by the hash mark, as the forget's report shows it.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["mask_text", "mask_value"]


def mask_text(text: str, target_hash: str, length: int, keyed_hash: Callable[[str], str]) -> str:
    """``text`` with every occurrence of the target (the ``length`` characters whose
    ``keyed_hash`` is ``target_hash``) replaced by ``[erased <target_hash>]``."""
    if length <= 0 or len(text) < length:
        return text
    out, i, last = [], 0, 0
    while i + length <= len(text):
        if keyed_hash(text[i:i + length]) == target_hash:
            out.append(text[last:i])
            out.append(f"[erased {target_hash}]")
            i += length
            last = i
        else:
            i += 1
    out.append(text[last:])
    return "".join(out)


def mask_value(value: Any, target_hash: str, length: int, keyed_hash: Callable[[str], str]) -> Any:
    """A JSON-able value with :func:`mask_text` applied to every string in it (keys included);
    any other value as its text (``str``), masked."""
    def mask(v: Any) -> Any:
        if isinstance(v, str):
            return mask_text(v, target_hash, length, keyed_hash)
        if isinstance(v, dict):
            return {mask(k): mask(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [mask(x) for x in v]
        if v is None or isinstance(v, (bool, int, float)):
            return v
        return mask(str(v))

    return mask(value)
