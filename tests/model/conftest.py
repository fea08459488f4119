"""Fixtures of the replay-runtime tests.

The CPU model is loaded once per test session, by ``cpu_runtime`` in
tests/conftest.py (shared with the forget and eval tests).
"""

from __future__ import annotations

import pytest


@pytest.fixture()
def runtime(cpu_runtime):
    """A fresh cache on the shared CPU weights."""
    return cpu_runtime.spawn()


@pytest.fixture()
def chat_model(cpu_runtime):
    from unsee.plugins.model import LocalChatModel

    return LocalChatModel(runtime=cpu_runtime, max_tokens=24)
