"""wtcommon/hashing.py: the two stored JSON forms, byte for byte, and the hashes over them (issue 37).

Stored keys (run keys, eval keys, cache and checkpoint keys) depend on these exact bytes, so the forms are
pinned here against the literal strings the callers hashed before they shared one module."""

from __future__ import annotations

import hashlib
import json

from hypothesis import given, strategies as st

from wtcommon.hashing import canonical_json, digest, rows_digest, sha256_file, text_hash

OBJ = {"b": [1, 2.5, None], "a": {"y": "x", "x": True}}


def test_the_canonical_form_is_compact_and_sorted() -> None:
    assert canonical_json(OBJ) == '{"a":{"x":true,"y":"x"},"b":[1,2.5,null]}'


def test_the_spaced_form_keeps_jsons_default_separators() -> None:
    assert canonical_json(OBJ, spaced=True) == '{"a": {"x": true, "y": "x"}, "b": [1, 2.5, null]}'


def test_digest_is_truncated_sha256_of_the_named_form() -> None:
    compact = hashlib.sha256(b'{"a":{"x":true,"y":"x"},"b":[1,2.5,null]}').hexdigest()
    spaced = hashlib.sha256(b'{"a": {"x": true, "y": "x"}, "b": [1, 2.5, null]}').hexdigest()
    assert digest(OBJ) == compact[:16]
    assert digest(OBJ, 64, spaced=True) == spaced
    assert digest(OBJ, 6) == compact[:6] and text_hash("abc", 64) == hashlib.sha256(b"abc").hexdigest()


def test_what_json_cannot_hold_is_hashed_as_its_str(tmp_path) -> None:
    assert canonical_json({"p": tmp_path}) == json.dumps({"p": str(tmp_path)}, separators=(",", ":"))


def test_rows_digest_is_order_sensitive_and_matches_a_line_per_row(tmp_path) -> None:
    rows = [{"q": "1+1", "a": 2}, {"q": "2+2", "a": 4}]
    lines = b"".join(canonical_json(r).encode() + b"\n" for r in rows)
    assert rows_digest(rows) == hashlib.sha256(lines).hexdigest() != rows_digest(rows[::-1])
    (tmp_path / "f").write_bytes(lines)
    assert sha256_file(tmp_path / "f") == rows_digest(rows)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
                           max_leaves=10)


@given(json_values)
def test_key_order_never_changes_a_digest(obj) -> None:
    if isinstance(obj, dict):
        reordered = dict(reversed(list(obj.items())))
        assert digest(obj) == digest(reordered) and digest(obj, spaced=True) == digest(reordered, spaced=True)
    assert json.loads(canonical_json(obj)) == json.loads(canonical_json(obj, spaced=True)) == obj
