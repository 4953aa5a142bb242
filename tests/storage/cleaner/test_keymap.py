"""The cleaner's key -> latest offset map: fixed-size digests and a memory budget."""

from __future__ import annotations

import pytest

from brokerd.storage.cleaner.keymap import DIGEST_BYTES, ENTRY_BYTES, OffsetMap, key_digest


def test_a_key_digest_is_fixed_size_and_tells_keys_apart() -> None:
    assert len(key_digest(b"")) == len(key_digest(b"k" * 10_000)) == DIGEST_BYTES
    assert key_digest(b"a") == key_digest(b"a")
    assert key_digest(b"a") != key_digest(b"b")


def test_the_map_keeps_the_latest_offset_per_key() -> None:
    keys = OffsetMap(ENTRY_BYTES * 4)
    assert keys.latest(key_digest(b"a")) == -1
    assert keys.put(key_digest(b"a"), 3)
    assert keys.put(key_digest(b"a"), 9)
    assert keys.latest(key_digest(b"a")) == 9
    assert len(keys) == 1
    keys.clear()
    assert (len(keys), keys.latest(key_digest(b"a"))) == (0, -1)


def test_a_full_map_refuses_new_keys_but_updates_known_ones() -> None:
    keys = OffsetMap(ENTRY_BYTES * 2 + ENTRY_BYTES // 2)
    assert keys.capacity == 2
    assert keys.put(key_digest(b"a"), 1) and keys.put(key_digest(b"b"), 2)
    assert not keys.put(key_digest(b"c"), 3)
    assert keys.latest(key_digest(b"c")) == -1
    assert keys.put(key_digest(b"a"), 4)
    assert keys.latest(key_digest(b"a")) == 4


def test_a_budget_below_one_entry_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        OffsetMap(ENTRY_BYTES - 1)
