"""The facade's keywords for two ideas that shared the word ``mode``: ``u.ifc(on_violation=...)``
(what happens to a call that breaks the policy) and ``u.detect(timing=...)`` (when detectors
run); ``mode=`` stays a deprecated alias of each, and both given, contradicting, is a typed
error that changes nothing."""

from __future__ import annotations

import warnings

import pytest

from unsee import Unsee
from unsee.keywords import renamed_keyword
from unsee.middleware.errors import InvalidArgument


# -- the rule (pure) -------------------------------------------------------------------------
def test_the_new_name_or_the_default_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert renamed_keyword("timing", None, "mode", None, "async") == "async"
        assert renamed_keyword("timing", "sync", "mode", None, "async") == "sync"


def test_the_alias_is_taken_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match=r"mode= is deprecated here: use timing='sync'"):
        assert renamed_keyword("timing", None, "mode", "sync", "async") == "sync"
    with pytest.warns(DeprecationWarning):  # both, agreeing: the alias was still used
        assert renamed_keyword("timing", "sync", "mode", "sync", "async") == "sync"


def test_a_contradiction_is_a_typed_error():
    with pytest.raises(InvalidArgument, match=r"timing='sync' and mode='async' contradict"):
        renamed_keyword("timing", "sync", "mode", "async", "async")


# -- the facade ------------------------------------------------------------------------------
@pytest.fixture
def u(tmp_path):
    u = Unsee(home=tmp_path / "h")
    yield u
    u.close()


def _globals(u):
    return list(u.recorder.interceptors._global)


def test_ifc_on_violation(u):
    assert u.ifc(["send_money.recipient"], on_violation="audit").mode == "audit"


def test_ifc_default_blocks(u):
    assert u.ifc(["send_money.recipient"]).mode == "block"


def test_ifc_mode_is_a_deprecated_alias(u):
    with pytest.warns(DeprecationWarning, match="on_violation="):
        assert u.ifc(["send_money.recipient"], mode="ask").mode == "ask"


def test_ifc_contradiction_changes_nothing(u):
    with pytest.raises(InvalidArgument, match="on_violation='block' and mode='audit'"):
        u.ifc(["send_money.recipient"], on_violation="block", mode="audit")
    assert u.ifc_interceptor is None and _globals(u) == []


def test_detect_timing(u):
    assert u.detect(timing="sync").mode == "sync"
    assert u.detect().mode == "async"


def test_detect_mode_is_a_deprecated_alias(u):
    with pytest.warns(DeprecationWarning, match="timing="):
        assert u.detect(mode="sync", policy="alert").mode == "sync"


def test_detect_contradiction_changes_nothing(u):
    with pytest.raises(InvalidArgument, match="timing='sync' and mode='async'"):
        u.detect(timing="sync", mode="async")
    assert _globals(u) == []


def test_a_bad_value_under_the_new_name_is_still_refused(u):
    from unsee.plugins.ifc import IFCError

    with pytest.raises(IFCError):
        u.ifc(["send_money.recipient"], on_violation="warn")
    with pytest.raises(ValueError):
        u.detect(timing="later")
    assert u.ifc_interceptor is None and _globals(u) == []
