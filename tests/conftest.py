"""Suite-wide fixtures and marker handling.

``gpu`` tests skip without CUDA; ``docker`` and ``model`` tests run wherever
the machine allows (``make test`` provides both on a CI machine).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("UNSEE_LOG_LEVEL", "WARNING")


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _cuda():
        return
    skip = pytest.mark.skip(reason="needs CUDA (gpu tests run on a GPU machine via scripts/gpu-check.sh)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
