"""Partitions that had no idempotent-producer state at a clean close.

At start every partition's producer state is restored from its snapshot plus a replay of
the batch headers after it; a partition without a snapshot (no producer ever wrote to it
with a producer id, the common case) replays every batch header of its active segment:
one read per batch, per partition, on every start. This file lets a start after a clean
close skip that: the close lists, in Kafka's checkpoint format
(``checkpoints.py``), each partition whose producer table was empty and the end
offset the table covered. The next start trusts an entry only if the previous shutdown was
clean and the partition's log still ends exactly there (the same bytes, so a replay would
find no producer either), and removes the file (durably) before serving, so an entry is
never used by a later start.

What it does not do: hold producer state (a partition with producers has its snapshot,
``log/producer_state.py``), or decide when it is written (``brokerd/core/services.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable

from brokerd.storage.checkpoints import encode_checkpoint, parse_checkpoint
from brokerd.storage.fileio import atomic_write, fsync_dir, read_file

__all__ = ["EMPTY_PRODUCERS_FILE", "take_empty_ends", "write_empty_ends"]

log = logging.getLogger("brokerd.storage")

EMPTY_PRODUCERS_FILE = "producer-state-empty-checkpoint"


def write_empty_ends(directory: str, entries: Iterable[tuple[str, int, int]]) -> bool:
    """Replace the file by ``(topic, partition, end offset)`` entries (atomically; written
    even when empty, so no older list survives). False (logged) if it could not be: that
    only costs the next start its replays."""
    path = os.path.join(directory, EMPTY_PRODUCERS_FILE)
    try:
        atomic_write(path, encode_checkpoint(entries))
    except OSError as exc:
        log.warning("cannot write %s: %s; the next start replays producer state", path, exc)
        return False
    return True


def take_empty_ends(directory: str, *, trust: bool) -> dict[tuple[str, int], int]:
    """The entries of the file (none unless ``trust``: the previous shutdown was clean),
    removing the file durably. A file that cannot be read or parsed only costs the
    replay it would have saved: it is logged and removed."""
    path = os.path.join(directory, EMPTY_PRODUCERS_FILE)
    ends: dict[tuple[str, int], int] = {}
    try:
        raw = read_file(path)
    except OSError as exc:
        log.warning("cannot read %s: %s; replaying producer state", path, exc)
        raw = b""
    if raw is None:
        return ends
    if trust:
        try:
            ends = parse_checkpoint(raw)
        except ValueError as exc:
            log.warning("ignoring %s (%s); replaying producer state", path, exc)
    # Removed before serving, so a later start (whose log may have grown and been cut
    # back) never sees these entries; if it cannot be, none is used now either.
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        fsync_dir(directory)
    except OSError as exc:
        log.warning("cannot remove %s: %s; replaying producer state", path, exc)
        return {}
    return ends
