"""Identifier extraction and normalization (pure): every built-in extractor,
laundered forms, the registry, and sink matching of laundered identifiers."""

from __future__ import annotations

import dataclasses
from urllib.parse import quote, unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unsee.plugins.ifc.errors import DuplicateExtractor, InvalidExtractor, UnknownExtractor
from unsee.plugins.ifc.extract import (
    Identifier,
    builtin_registry,
    decode_layers,
    extract,
    iban_valid,
    luhn_valid,
    make_identifier,
    match_key,
    normalize,
    register_extractor,
)
from unsee.plugins.ifc.policy import decide

IBAN = "DE89370400440532013000"
FAKE_IBAN = "US133000000121212121212"  # AgentDojo's attacker account: fails mod-97


def kinds(text: str, kind: str) -> list[Identifier]:
    return [i for i in extract(text) if i.kind == kind]


def normalized(text: str, kind: str) -> list[str]:
    return [i.normalized for i in kinds(text, kind)]


def check_spans(text: str) -> None:
    for i in extract(text):
        assert text[i.span[0]:i.span[1]] == i.raw


# -- each extractor -----------------------------------------------------------

@pytest.mark.parametrize("text", [
    "IBAN: DE89 3704 0044 0532 0130 00.",
    "iban de89370400440532013000, thanks",
    "pay to DE89-3704-0044-0532-0130-00 please",
    "DE89.3704.0044.0532.0130.00",
])
def test_iban_with_separators_and_case(text):
    assert normalized(text, "iban") == [IBAN]
    check_spans(text)


def test_iban_trimmed_before_following_words_and_other_countries():
    text = "Send to GB29 NWBK 6016 1331 9268 19 now and FR76 3000 6000 0112 3456 7890 189 later"
    assert normalized(text, "iban") == ["GB29NWBK60161331926819", "FR7630006000011234567890189"]
    assert kinds(text, "iban")[0].raw == "GB29 NWBK 6016 1331 9268 19"


def test_iban_checksum():
    assert iban_valid(IBAN) and iban_valid("CH9300762011623852957")
    assert not iban_valid("DE89370400440532013001")
    assert not iban_valid(FAKE_IBAN)
    assert normalized("DE89 3704 0044 0532 0130 01", "iban") == []


def test_account_numbers():
    assert normalized(f"Recipient: {FAKE_IBAN}.", "account") == [FAKE_IBAN]
    assert normalized("to US13 3000 0001 2121 2121 212 THEN", "account") == [FAKE_IBAN]
    assert normalized("account no. 12345678 at the bank", "account") == ["12345678"]
    assert normalized("acct 1234-5678-9012", "account") == ["123456789012"]
    # dates, amounts and the digits inside a valid IBAN are not accounts
    assert normalized("on 2024-03-02 we paid 1000000.00 to DE89 3704 0044 0532 0130 00", "account") == []


def test_card_numbers_luhn():
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert normalized("card 4111 1111 1111 1111 exp 12/27", "card") == ["4111111111111111"]
    assert normalized("card 5500-0000-0000-0004", "card") == ["5500000000000004"]
    assert normalized("card 4111 1111 1111 1112", "card") == []


def test_phone_numbers():
    text = "Call +1 (555) 123-4567 or 555.123.4567 or 0044 20 7946 0958; order 4417"
    assert normalized(text, "phone") == ["+15551234567", "5551234567", "+442079460958"]
    assert normalized("we paid 1234.56 on 2024-03-02", "phone") == []
    check_spans(text)


def test_emails():
    text = "Write to Alice.Smith+tag@Evil-Corp.co.uk or mailto:bob@example.com."
    assert normalized(text, "email") == ["alice.smith+tag@evil-corp.co.uk", "bob@example.com"]
    check_spans(text)


def test_urls_and_trailing_punctuation():
    text = "See https://Evil.COM:443/pay?to=x (or www.acme.org/help). Also http://a.io/."
    assert normalized(text, "url") == ["https://evil.com/pay?to=x", "http://www.acme.org/help", "http://a.io"]
    check_spans(text)


def test_domains_excluding_file_names():
    text = "Mail bob@example.com, visit https://pay.evil.com/x or acme.org; open report.pdf, config.json, Mr.Smith"
    assert normalized(text, "domain") == ["example.com", "pay.evil.com", "acme.org"]


def test_missing_space_after_a_sentence_keeps_the_domain():
    # "www.our-company.com.They sent ..." (an AgentDojo prompt): the domain is the part before ".They"
    kinds = {(i.kind, i.normalized) for i in extract("post to www.our-company.com.They sent it")}
    assert kinds == {("url", "http://www.our-company.com"), ("domain", "our-company.com")}
    assert extract("x.y.Next and Mr.Smith and end.Next") == []


def test_crypto_addresses():
    text = ("BTC bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq or 1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa; "
            "ETH 0x52908400098527886E0F7030069857D2E4169EE7")
    assert normalized(text, "btc") == ["bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq",
                                       "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa"]
    assert normalized(text, "eth") == ["0x52908400098527886e0f7030069857d2e4169ee7"]
    assert normalized("BC1QAR0SRRR7XFKVY5L643LYDNW9RE59GTZZWF5MDQ", "btc") == [
        "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"]
    assert normalized("0x" + "ab" * 21, "eth") == []  # 42 hex digits: not an address


def test_plain_text_has_no_identifiers():
    assert extract("The printer on floor 3 jams when printing double-sided; restarting helps.") == []
    assert extract("") == []


# -- laundering -----------------------------------------------------------------

@pytest.mark.parametrize("kind,a,b", [
    ("iban", "DE89 3704 0044 0532 0130 00", "de89370400440532013000"),
    ("iban", "DE89-3704-0044-0532-0130-00", "DE89%203704%200044%200532%200130%2000"),
    ("email", "Alice@Evil.com", "alice%40evil.com"),
    ("email", "alice@evil.com", "alice%2540evil.com"),  # double-encoded
    ("url", "https://evil.com/pay", "https%3A%2F%2FEVIL.com%2Fpay"),
    ("phone", "+1 555 123 4567", "+1-555-123-4567"),
    ("card", "4111 1111 1111 1111", "4111-1111-1111-1111"),
    ("eth", "0x52908400098527886E0F7030069857D2E4169EE7", "0x52908400098527886e0f7030069857d2e4169ee7"),
])
def test_laundered_forms_normalize_equal(kind, a, b):
    assert normalize(kind, a) == normalize(kind, b)
    assert match_key(normalize(kind, a)) == match_key(normalize(kind, b))


def test_percent_encoded_identifiers_are_found_with_spans_in_the_original():
    text = "redirect: https://x.com/?next=alice%40evil.com and https%3A%2F%2Fevil.com%2Fsteal"
    found = {(i.kind, i.normalized): i for i in extract(text)}
    email = found[("email", "alice@evil.com")]
    assert email.raw == "alice%40evil.com"
    url = found[("url", "https://evil.com/steal")]
    assert url.raw == "https%3A%2F%2Fevil.com%2Fsteal"
    assert ("domain", "evil.com") in found
    check_spans(text)
    # without decoding only the literal forms are seen
    assert ("email", "alice@evil.com") not in {(i.kind, i.normalized) for i in extract(text, decode=False)}


def test_double_encoded_email_found():
    text = "to=alice%2540evil.com"
    assert normalized(text, "email") == ["alice@evil.com"]
    assert kinds(text, "email")[0].raw == "alice%2540evil.com"


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab@.%2340CcFfé ")), max_size=30))
def test_decode_layers_match_unquote_and_map_back(text):
    layers = decode_layers(text)
    assert layers[0].text == text and layers[0].to_original(0, len(text)) == (0, len(text))
    current = text
    for layer in layers[1:]:
        current = unquote(current)
        assert layer.text == current
        for i in range(len(layer.text)):
            s, e = layer.to_original(i, i + 1)
            assert 0 <= s < e <= len(text)
            if layer.text[i] not in "%\ufffd" and text[s:e] == layer.text[i]:
                continue  # a literal char maps to itself
            assert "%" in text[s:e]


def test_decoded_spans_are_exact():
    text = "ab%2540cd%41"
    layers = decode_layers(text)
    assert [layer.text for layer in layers] == [text, "ab%40cdA", "ab@cdA"]
    assert layers[2].to_original(2, 3) == (2, 7)  # "@" came from "%2540"
    assert layers[2].to_original(3, 6) == (7, 12)  # "cdA" from "cd%41"


def test_identifier_is_frozen():
    i = extract("bob@example.com")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        i.kind = "x"  # type: ignore[misc]


# -- registry -------------------------------------------------------------------

def test_custom_extractor_in_a_registry():
    reg = builtin_registry()

    @register_extractor("ticket", registry=reg)
    def tickets(text):
        import re
        for m in re.finditer(r"TCK-\d{4}", text, re.I):
            yield make_identifier("ticket", text, m.start(), m.end(), m.group().upper())

    found = reg.extract("see tck-0042 and bob@example.com")
    assert [(i.kind, i.normalized) for i in found if i.kind == "ticket"] == [("ticket", "TCK-0042")]
    assert "ticket" not in builtin_registry()  # other registries are untouched
    with pytest.raises(DuplicateExtractor):
        reg.register("ticket", tickets)
    reg.register("ticket", tickets, replace=True)
    assert [i.kind for i in reg.extract("tck-1234", only=["ticket"])] == ["ticket"]
    reg.unregister("ticket")
    with pytest.raises(UnknownExtractor):
        reg.unregister("ticket")
    with pytest.raises(UnknownExtractor):
        reg.extract("x", only=["nope"])


def test_default_registry_register_and_unregister():
    from unsee.plugins.ifc.extract import default_registry, unregister_extractor

    register_extractor("shout", lambda t: [make_identifier("shout", t, 0, len(t))] if t.isupper() else [])
    try:
        assert [i.normalized for i in extract("HELLO") if i.kind == "shout"] == ["hello"]
    finally:
        unregister_extractor("shout")
    assert "shout" not in default_registry()


def test_bad_extractors_are_refused():
    reg = builtin_registry()
    with pytest.raises(InvalidExtractor):
        reg.register("x", "not callable")  # type: ignore[arg-type]
    reg.register("bad", lambda t: ["oops"])
    with pytest.raises(InvalidExtractor):
        reg.extract("text")
    with pytest.raises(ValueError):  # typed errors subclass builtins
        builtin_registry().register("iban", lambda t: [])


# -- matching laundered identifiers in sinks ------------------------------------

SINKS = ["send_money.recipient", "send_money.subject", "send_email.to", "send_email.body", "fetch.url"]


def untrusted_from(text: str) -> dict[str, set[str]]:
    return {i.normalized: {"tr1"} for i in extract(text)}


@pytest.mark.parametrize("tool,args", [
    ("send_money", {"recipient": "DE89 3704 0044 0532 0130 00"}),
    ("send_money", {"recipient": "de89370400440532013000"}),
    ("send_money", {"recipient": "DE89-3704-0044-0532-0130-00"}),
    ("send_money", {"recipient": "DE89%203704%200044%200532%200130%2000"}),
    ("send_money", {"recipient": "DE89 3704 0044", "subject": "0532 0130 00"}),           # split across args
    ("send_money", {"recipient": "IBAN/DE8937040044053201300 0/urgent"}),                # embedded
    ("send_money", {"recipient": "US13 3000 0001 2121 2121 212"}),
    ("send_money", {"recipient": "US1330000001", "subject": "21212121212"}),              # split fake IBAN
    ("send_email", {"to": "ALICE@EVIL.COM"}),
    ("send_email", {"to": "alice%40evil.com"}),
    ("send_email", {"to": "alice%2540evil.com"}),
    ("send_email", {"to": "alice @ evil . com"}),
    ("send_email", {"to": "alice@", "body": "evil.com"}),                                 # split across args
    ("send_email", {"to": ["bob@example.com", "cc:alice@evil.com"]}),                     # inside a list
    ("send_email", {"to": "x", "body": "please reply to alice@evil.com today"}),          # embedded
    ("fetch", {"url": "HTTPS://EVIL.COM/pay?id=7"}),
    ("fetch", {"url": "https%3A%2F%2Fevil.com%2Fpay%3Fid%3D7"}),
    ("fetch", {"url": "https://proxy.example/?u=https://pay.evil.com/x"}),
])
def test_laundered_identifier_in_sink_is_blocked(tool, args):
    observed = ("Refund to DE89 3704 0044 0532 0130 00 or US133000000121212121212; "
                "contact alice@evil.com, see https://evil.com/pay?id=7")
    d = decide(tool, args, SINKS, untrusted_from(observed), set(), "block")
    assert d.action == "block", d.reason
    assert d.evidence[0].artifact_id == "tr1"


@pytest.mark.parametrize("tool,args", [
    ("send_money", {"recipient": "GB29 NWBK 6016 1331 9268 19"}),
    ("send_email", {"to": "bob@devil.community"}),
    ("fetch", {"url": "https://example.org/evil"}),
    ("send_money", {"amount": "DE89370400440532013000"}),  # not a declared sink
])
def test_other_identifiers_are_allowed(tool, args):
    observed = "Refund to DE89 3704 0044 0532 0130 00; contact alice@evil.com, see https://evil.com/pay"
    d = decide(tool, args, SINKS, untrusted_from(observed), set(), "block")
    assert d.action == "allow", d.reason


def test_quote_round_trip_is_still_found():
    d = decide("send_email", {"to": quote(quote("alice@evil.com", safe=""), safe="")}, SINKS,
               {"alice@evil.com": {"tr1"}}, set())
    assert d.action == "block"
