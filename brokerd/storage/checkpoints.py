"""Kafka's offset checkpoint files: ``recovery-point-offset-checkpoint`` (what is flushed),
``cleaner-offset-checkpoint`` (where each compacted partition is dirty from, written by
:mod:`brokerd.storage.cleaner.compactor`) and ``log-start-offset-checkpoint`` (log start offsets
moved by DeleteRecords).

All three have one format::

    0                        version
    2                        number of entries
    orders 0 1500            topic, partition, offset
    orders 3 42

:func:`encode_checkpoint` and :func:`parse_checkpoint` are that format; the rest of this
module is the log-start file. As Kafka does, only partitions whose log start offset lies
inside their first segment are listed: elsewhere the first segment's base offset already
is the log start offset.
The file is replaced atomically (``fileio.atomic_write``) before a DeleteRecords is
answered, so a moved start offset survives a restart and a crash.

What this module does not do: decide when the files are written or apply what they hold
(``logdir/log_directory.py`` and ``PartitionLog.restore_log_start`` do). A file that does not parse
raises :class:`StorageError`: ignoring it would bring deleted records back.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from brokerd.errors import InvalidTopic, StorageError
from brokerd.names import validate_topic_name
from brokerd.storage.fileio import atomic_write, read_file

__all__ = [
    "LOG_START_CHECKPOINT_FILE",
    "encode_checkpoint",
    "parse_checkpoint",
    "read_start_offsets",
    "write_start_offsets",
]

LOG_START_CHECKPOINT_FILE = "log-start-offset-checkpoint"
_VERSION = 0

#: Offsets by (topic, partition).
Checkpoint = dict[tuple[str, int], int]


def encode_checkpoint(entries: Iterable[tuple[str, int, int]]) -> bytes:
    """A checkpoint file's bytes for ``(topic, partition, offset)`` entries."""
    rows = sorted(entries)
    lines = [str(_VERSION), str(len(rows))]
    lines.extend(f"{topic} {partition} {offset}" for topic, partition, offset in rows)
    return ("\n".join(lines) + "\n").encode("ascii")


def parse_checkpoint(raw: bytes) -> Checkpoint:
    """The entries of a checkpoint file. Raises :class:`ValueError` when it is not one."""
    try:
        return _parse(raw)
    except InvalidTopic as exc:
        raise ValueError(str(exc)) from exc


def _parse(raw: bytes) -> Checkpoint:
    lines = raw.decode("ascii").splitlines()
    if len(lines) < 2 or int(lines[0]) != _VERSION:
        raise ValueError(f"unknown version {lines[0] if lines else ''!r}")
    count = int(lines[1])
    if count != len(lines) - 2:
        raise ValueError(f"{count} entries declared, {len(lines) - 2} present")
    offsets: Checkpoint = {}
    for line in lines[2:]:
        topic, partition, offset = line.split(" ")
        validate_topic_name(topic)
        if int(partition) < 0 or int(offset) < 0:
            raise ValueError(f"negative value in {line!r}")
        offsets[(topic, int(partition))] = int(offset)
    return offsets


def read_start_offsets(directory: str) -> Checkpoint:
    """The checkpoint in ``directory``; empty when there is none."""
    path = os.path.join(directory, LOG_START_CHECKPOINT_FILE)
    try:
        raw = read_file(path)
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc}") from exc
    if raw is None:
        return {}
    try:
        return parse_checkpoint(raw)
    except Exception as exc:
        raise StorageError(
            f"corrupt {path} ({exc}); records deleted by DeleteRecords would come back, "
            "so the directory is not opened"
        ) from exc


def write_start_offsets(directory: str, entries: Iterable[tuple[str, int, int]]) -> None:
    """Replace the checkpoint in ``directory`` durably (old or new after a crash)."""
    path = os.path.join(directory, LOG_START_CHECKPOINT_FILE)
    try:
        atomic_write(path, encode_checkpoint(entries))
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc}") from exc
