"""Scaffolding the test suites share: agents, scenarios, fakes and checks.

Imported by its full name (``from tests.support.erasure_agents import build``):
pytest puts the repository root on ``sys.path`` (``pythonpath`` in pyproject.toml),
so a helper has one module name whichever test directory imports it.
"""
