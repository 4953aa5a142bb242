"""Snapshots of idempotent producers' state, one file per partition directory.

Kafka keeps, per partition, each producer id's epoch and its last few batches' sequence
ranges, so that a batch retried after a lost answer is not appended twice; it snapshots
that state to ``.snapshot`` files and replays the log from the snapshot on start-up.
brokerd does the same with a small JSON file, ``producer-state.json``, written
atomically (temporary file, fsync, rename) by the core at each recovery checkpoint and at
shutdown; the core replays batch headers from the snapshot's ``end_offset`` on.

This module only reads and writes the file; what the state means is the core's business.
A missing, unreadable or malformed snapshot reads as ``None`` (the caller falls back to
replaying more of the log), never as an error that stops the broker.
"""

from __future__ import annotations

import json
import os
from typing import Any

from brokerd.storage.segment import fsync_dir

SNAPSHOT_NAME = "producer-state.json"
#: Snapshots are small (a few batches per producer id); refuse to parse a larger file.
MAX_SNAPSHOT_BYTES = 16 * 1024 * 1024
_FORMAT = 1


def write_snapshot(directory: str, end_offset: int, producers: dict[int, Any]) -> None:
    """Atomically replace the directory's snapshot. ``producers`` maps a producer id to
    ``{"epoch": e, "batches": [[first_seq, last_seq, base_offset, last_offset], ...]}``."""
    path = os.path.join(directory, SNAPSHOT_NAME)
    tmp = path + ".tmp"
    data = json.dumps(
        {"format": _FORMAT, "end_offset": end_offset, "producers": producers},
        separators=(",", ":"),
    ).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(directory)


def read_snapshot(directory: str) -> tuple[int, dict[int, Any]] | None:
    """``(end_offset, producers)`` from the directory's snapshot, or None if there is
    no usable one."""
    path = os.path.join(directory, SNAPSHOT_NAME)
    try:
        if os.path.getsize(path) > MAX_SNAPSHOT_BYTES:
            return None
        with open(path, "rb") as f:
            doc = json.loads(f.read())
        if doc.get("format") != _FORMAT or not isinstance(doc.get("end_offset"), int):
            return None
        producers: dict[int, Any] = {}
        for pid, entry in doc["producers"].items():
            epoch = entry["epoch"]
            batches = [tuple(int(x) for x in b) for b in entry["batches"]]
            if not isinstance(epoch, int) or any(len(b) != 4 for b in batches):
                return None
            producers[int(pid)] = {"epoch": epoch, "batches": batches}
        return doc["end_offset"], producers
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
