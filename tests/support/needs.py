"""``needs(marker)``: a fixture that starts a service or loads the local model says so once.

A fixture function decorated with ``@needs("model")`` (under ``@pytest.fixture``) marks every
test that uses it, directly or through other fixtures, with ``model`` at collection time
(tests/conftest.py: ``mark_what_fixtures_need``). A test that loads the model or starts Docker
through a fixture can then never run in a tier that leaves that dependency out
(``-m "not model"``) only because somebody forgot to mark it by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

F = TypeVar("F", bound=Callable)

ATTRIBUTE = "unsee_test_needs"


def needs(*markers: str) -> Callable[[F], F]:
    def note(fn: F) -> F:
        setattr(fn, ATTRIBUTE, (*getattr(fn, ATTRIBUTE, ()), *markers))
        return fn

    return note


def needed_by(fixture_functions: Iterable[Callable]) -> set[str]:
    """The markers the given fixture functions need (``needs``), together."""
    return {m for fn in fixture_functions for m in getattr(fn, ATTRIBUTE, ())}
