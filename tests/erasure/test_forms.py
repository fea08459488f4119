"""The on-disk forms of a target and the one-copy-once counting rule."""

from __future__ import annotations

import random
import re

import pytest

from unsee.middleware.errors import InvalidArgument
from unsee.plugins.erasure.forms import (
    Form,
    FormCounter,
    count_forms,
    holds_target,
    normalise,
    target_forms,
    total,
)


def names(target: str) -> list[str]:
    return [f.name for f in target_forms(target)]


@pytest.mark.parametrize(
    "target, expected",
    [
        ("4417-2231", ["utf-8", "utf-16-le", "utf-16-be", "no-separators", "pglz"]),
        ("44172231", ["utf-8", "utf-16-le", "utf-16-be", "no-separators", "pglz"]),
        ("abc", ["utf-8", "utf-16-le", "utf-16-be", "casefold"]),
        ("12-34", ["utf-8", "utf-16-le", "utf-16-be"]),  # 4 chars without separators: too short
        ("CONTROL-5150-B", ["utf-8", "utf-16-le", "utf-16-be", "casefold", "no-separators", "pglz"]),
        ('say "hi"', ["utf-8", "json-escaped", "utf-16-le", "utf-16-be", "casefold", "no-separators", "pglz"]),
        ("Zoë", ["utf-8", "json-escaped", "utf-16-le", "utf-16-be", "casefold"]),  # ensure_ascii=False == raw
        ("Zoë Z", ["utf-8", "json-escaped", "utf-16-le", "utf-16-be", "casefold"]),  # 4 chars without separators
        (
            'Zoë "x"',
            ["utf-8", "json-escaped", "json-unicode", "utf-16-le", "utf-16-be", "casefold", "no-separators", "pglz"],
        ),
    ],
)
def test_forms_of_a_target(target, expected):
    assert names(target) == expected


@pytest.mark.parametrize(
    "target, name, data",
    [
        ("4417-2231", "utf-8", b"card 4417-2231 ok"),
        ("4417-2231", "utf-16-le", b"ab" + "4417-2231".encode("utf-16-le") + b"cd"),
        ("4417-2231", "utf-16-be", b"ab" + "4417-2231".encode("utf-16-be") + b"cd"),
        ("4417-2231", "no-separators", b"card 44172231"),
        ("4417-2231", "no-separators", b"card 4417 2231"),
        ("4417-2231", "no-separators", b"card 4417 - 2231"),
        ("44172231", "no-separators", b"card 4417.2231"),
        ("CONTROL-5150-B", "pglz", b"..CONTR\x00OL-5150-\x00B.."),
        ("CONTROL-5150-B", "casefold", b"control-5150-b"),
        ("CONTROL-5150-B", "no-separators", b"Control5150B"),
        ('say "hi"', "json-escaped", b'{"m": "say \\"hi\\""}'),
        ("Zoë", "json-escaped", b'{"n": "Zo\\u00eb"}'),
        ("Zoë", "casefold", "ZOË".encode()),
        ("Straße", "casefold", b"STRASSE"),
    ],
)
def test_each_form_finds_its_copy_once(target, name, data):
    counts = count_forms(data, target_forms(target))
    assert counts[name] == 1
    assert sum(counts.values()) == 1


@pytest.mark.parametrize("bad", ["", "   ", "\n\t", None, 42, b"4417"])
def test_bad_target_is_a_typed_error(bad):
    with pytest.raises(InvalidArgument):
        target_forms(bad)
    with pytest.raises(InvalidArgument):
        holds_target("some text", bad)


def test_forms_are_deduplicated():
    keys = [f.key() for f in target_forms("ABCDEFGH")]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize(
    "data, copies",
    [
        (b"", 0),
        (b"4417-2231", 1),
        (b"4417-2231 4417-2231", 2),
        (b"4417-22314417-2231", 2),
        (b"44172231 and 4417-2231", 2),
        ("4417-2231".encode("utf-16-le") + b"4417-2231", 2),
        (b"4417-223", 0),
        (b"4417-\x002231", 1),  # pglz-style gap
        (b"4417 -  2231", 0),  # four separators in a row: not taken for the card number
    ],
)
def test_total_counts_copies_not_form_matches(data, copies):
    assert total(data, target_forms("4417-2231")) == copies


def test_raw_copy_is_credited_to_the_raw_form_not_casefold_or_pglz():
    counts = count_forms(b"xx CONTROL-5150-B yy", target_forms("CONTROL-5150-B"))
    assert counts["utf-8"] == 1 and counts["casefold"] == counts["pglz"] == 0


def test_a_copy_two_forms_match_from_different_offsets_is_one_copy():
    # Inside UTF-16-LE text the BE pattern matches one byte earlier: the earlier start is credited, once.
    counts = count_forms("x4417-2231y".encode("utf-16-le"), target_forms("4417-2231"))
    assert sum(counts.values()) == 1


def test_short_targets_get_no_pglz_form():
    assert "pglz" not in names("ABCDEFG")
    assert total(b"A\x00BCDEFG", target_forms("ABCDEFG")) == 0


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 13, 64, 1000])
def test_chunked_counting_equals_one_blob(chunk):
    rng = random.Random(chunk)
    forms = target_forms("CONTROL-5150-B")
    pieces = [b"CONTROL-5150-B", b"control5150b", b"CONTR\x00OL-5150-\x00B", "CONTROL-5150-B".encode("utf-16-be")]
    data = b"".join(rng.randbytes(rng.randrange(0, 40)) + rng.choice(pieces) for _ in range(60))
    counter = FormCounter(forms)
    for i in range(0, len(data), chunk):
        counter.feed(data[i : i + chunk])
    assert counter.close() == count_forms(data, forms)
    assert total(data, forms) >= 60


@pytest.mark.parametrize(
    "form",
    [
        ("empty", b""),
        ("str-regex", re.compile("abc")),
        ("unbounded", re.compile(b"a+")),
        ("empty-match", re.compile(b"a?")),
        ("text", "abc"),
    ],
)
def test_bad_forms_are_refused(form):
    with pytest.raises(InvalidArgument):
        Form(*form)


@pytest.mark.parametrize(
    "text, expected",
    [("4417-2231", "44172231"), ("Card No. 4417 2231", "cardno44172231"), ("A_b/C", "abc"), ("Straße", "strasse")],
)
def test_normalise(text, expected):
    assert normalise(text) == expected


@pytest.mark.parametrize(
    "text, target, held",
    [
        ("card 4417-2231", "4417-2231", True),
        ("card 4417 2231", "4417-2231", True),
        ("card 44172231", "4417-2231", True),
        ("CARD 4417.2231", "4417-2231", True),
        ("card 4417-2232", "4417-2231", False),
        ("bob was here", "Bob", False),  # short: raw substring only
        ("Bob was here", "Bob", True),
        ("a-b-c", "abc", False),  # normalised target under 6 characters
        ("", "4417-2231", False),
    ],
)
def test_holds_target(text, target, held):
    assert holds_target(text, target) is held


def test_holds_target_refuses_non_text():
    with pytest.raises(InvalidArgument):
        holds_target(b"4417-2231", "4417-2231")


@pytest.mark.parametrize("target", ["Dana Whitfield", "card 4417-2231", "IBAN DE44 5001"])
def test_folded_forms_match_exactly_where_the_case_regexes_do(target):
    """ASCII targets' casefold / no-separators forms run on lowercased bytes (fast); the counts
    per form equal those of the per-character case regexes on the original bytes."""
    forms = target_forms(target)
    assert any(f.folded is not None for f in forms)
    plain = tuple(Form(f.name, f.pattern) for f in forms)  # the same forms without the shortcut
    rng = random.Random(7)
    alphabet = target.encode() + target.upper().encode() + b" -._/\t\n\x00\xc3\xa9Zz"
    for _ in range(200):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 400)))
        data += rng.choice([target, target.upper(), target.lower().replace(" ", "  -"), ""]).encode()
        assert count_forms(data, forms) == count_forms(data, plain), data
    for chunk in (1, 7, 64):
        blob = (b"x" * 50 + target.swapcase().encode()) * 30
        counter = FormCounter(forms)
        for i in range(0, len(blob), chunk):
            counter.feed(blob[i:i + chunk])
        assert counter.close() == count_forms(blob, plain)


def test_non_ascii_targets_keep_the_case_regexes():
    assert all(f.folded is None for f in target_forms("Straße 12"))
