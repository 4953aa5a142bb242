"""The log cleaner's key -> latest offset map, with a memory budget.

Like Kafka's ``SkimpyOffsetMap``, a key is stored as a fixed-size digest (BLAKE2b, 16
bytes) rather than as itself, so an entry costs about the same whatever the key's size,
and the number of entries a budget allows is known before a pass starts. A collision of
two keys' digests (odds about 2**-64 for a billion keys) would make the cleaner treat
them as one key, as it would in Kafka.

What it does not do: read the log or decide what to keep (``cleaner/compactor.py``). Pure, no I/O.
"""

from __future__ import annotations

import hashlib

__all__ = ["DIGEST_BYTES", "ENTRY_BYTES", "OffsetMap", "key_digest"]

#: Bytes of a key's digest.
DIGEST_BYTES = 16
#: What one entry costs in CPython, measured rather than guessed: the 16-byte ``bytes``
#: digest (49 bytes), the offset ``int`` (28-32), and the dict's slot and index share at
#: its load factor (about 40). Rounded up so the budget is an upper bound.
ENTRY_BYTES = 128


def key_digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=DIGEST_BYTES).digest()


class OffsetMap:
    """Digest of a key -> the largest offset seen for it, at most ``capacity`` keys."""

    def __init__(self, memory_bytes: int) -> None:
        if memory_bytes < ENTRY_BYTES:
            raise ValueError(f"a key map needs at least {ENTRY_BYTES} bytes")
        self.capacity = memory_bytes // ENTRY_BYTES
        self._offsets: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._offsets)

    def put(self, digest: bytes, offset: int) -> bool:
        """Record ``offset`` as the latest of ``digest``'s key; False (nothing changed)
        if that needs a new entry and the map is full."""
        offsets = self._offsets
        if digest not in offsets and len(offsets) >= self.capacity:
            return False
        offsets[digest] = offset
        return True

    def latest(self, digest: bytes) -> int:
        """The latest offset recorded for the key, -1 if none."""
        return self._offsets.get(digest, -1)

    def clear(self) -> None:
        self._offsets.clear()
