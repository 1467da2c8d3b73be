"""Dataset references: parse/format round trips and every syntax error."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsv_platform.core.errors import ReferenceSyntaxError
from dsv_platform.core.publication.refs import DatasetRef, parse_ref

HEX = "0123456789abcdef" * 4

names = st.from_regex(r"[a-z0-9_][a-z0-9_.-]{0,20}", fullmatch=True)
versions = st.from_regex(r"[A-Za-z0-9_.-]{1,12}", fullmatch=True)
hashes = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
aliases = st.from_regex(r"[A-Za-z][A-Za-z0-9_.-]{0,15}", fullmatch=True).filter(lambda a: a != "sha256")
refs = st.one_of(
    st.builds(DatasetRef, names, versions),
    st.builds(DatasetRef, names, versions, manifest_hash=hashes),
    st.builds(DatasetRef, names, versions, alias=aliases),
)


@given(refs)
def test_ref_format_then_parse_round_trips(ref: DatasetRef) -> None:
    assert parse_ref(str(ref)) == ref
    assert DatasetRef.parse(str(ref)) == ref


@given(refs)
def test_ref_parse_then_format_round_trips(ref: DatasetRef) -> None:
    text = str(ref)
    assert str(parse_ref(text)) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("fraud_training_set:v6", DatasetRef("fraud_training_set", "v6")),
        (f"fraud_training_set:v6@sha256:{HEX}", DatasetRef("fraud_training_set", "v6", manifest_hash=HEX)),
        ("fraud_training_set:v6@production", DatasetRef("fraud_training_set", "v6", alias="production")),
        ("a.b-c_1:V1.2-rc_3@Prod.2", DatasetRef("a.b-c_1", "V1.2-rc_3", alias="Prod.2")),
        ("0:0", DatasetRef("0", "0")),
    ],
)
def test_ref_parse_examples(text: str, expected: DatasetRef) -> None:
    ref = parse_ref(text)
    assert ref == expected
    assert str(ref) == text
    assert ref.is_pinned == (expected.manifest_hash is not None)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty reference"),
        ("fraud", "no ':'"),
        (":v6", "empty name"),
        ("Fraud:v6", "name 'Fraud'"),
        ("-fraud:v6", "name '-fraud'"),
        ("fr@ud:v6", "name 'fr@ud'"),
        ("fraud:", "empty version"),
        ("fraud:@prod", "empty version"),
        ("fraud:v6:7", "version 'v6:7'"),
        ("fraud:v/6", "version 'v/6'"),
        ("fraud:v6@", "nothing after '@'"),
        ("fraud:v6@sha256:", "0 hex digits"),
        (f"fraud:v6@sha256:{HEX[:63]}", "63 hex digits"),
        (f"fraud:v6@sha256:{HEX}0", "65 hex digits"),
        (f"fraud:v6@sha256:{HEX.upper()}", "uppercase"),
        (f"fraud:v6@sha256:{HEX[:63]}g", "non-hex characters 'g'"),
        ("fraud:v6@sha256", "needs ':'"),
        ("fraud:v6@md5:abc", "unsupported digest 'md5'"),
        ("fraud:v6@1prod", "alias '1prod'"),
        ("fraud:v6@prod@x", "alias 'prod@x'"),
        ("fraud:v6@pr od", "white space"),
        (" fraud:v6", "white space"),
        ("fraud:v6\n", "white space"),
    ],
)
def test_ref_parse_rejects_bad_syntax_naming_string_and_problem(text: str, problem: str) -> None:
    with pytest.raises(ReferenceSyntaxError) as info:
        parse_ref(text)
    message = str(info.value)
    assert repr(text) in message
    assert problem in message


def test_ref_parse_rejects_non_strings() -> None:
    with pytest.raises(ReferenceSyntaxError, match="bytes"):
        parse_ref(b"fraud:v6")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"name": "", "version": "v1"}, "empty name"),
        ({"name": "a", "version": "v 1"}, "version 'v 1'"),
        ({"name": "a", "version": "v1", "manifest_hash": HEX, "alias": "prod"}, "not both"),
        ({"name": "a", "version": "v1", "manifest_hash": "sha256:" + HEX}, "non-hex"),
        ({"name": "a", "version": "v1", "alias": "-x"}, "alias '-x'"),
    ],
)
def test_ref_constructor_validates_fields(kwargs: dict[str, str], problem: str) -> None:
    with pytest.raises(ReferenceSyntaxError, match=problem):
        DatasetRef(**kwargs)


def test_ref_is_frozen_and_hashable() -> None:
    ref = parse_ref("a:v1@prod")
    assert {ref: 1}[parse_ref("a:v1@prod")] == 1
    with pytest.raises(AttributeError):
        ref.name = "b"  # type: ignore[misc]
