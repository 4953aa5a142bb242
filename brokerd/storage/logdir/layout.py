"""The data directory's file names and limits, shared by the log directory's parts.

Pure names and small file helpers: no state, no Twisted.
"""

from __future__ import annotations

import os
import re

from brokerd.errors import StorageError
from brokerd.names import validate_topic_name
from brokerd.storage.fileio import atomic_write, read_file

__all__ = [
    "CHECKPOINT_FILE",
    "CLEAN_SHUTDOWN_FILE",
    "LOCK_FILE",
    "MAX_PARTITIONS",
    "REGISTRY_FILE",
    "is_fresh",
    "parse_partition_dir",
    "partition_dir_name",
    "read_small",
    "write_file",
]

REGISTRY_FILE = "topics.json"
CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".clean_shutdown"
LOCK_FILE = ".lock"
#: Partitions per topic accepted by create (auto-create uses the default count).
MAX_PARTITIONS = 10000
_PARTITION_DIR_RE = re.compile(r"(.+)-(\d+)\Z")


def partition_dir_name(topic: str, partition: int) -> str:
    """``<topic>-<partition>``; the topic must already be validated."""
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """Split a partition directory name at its LAST '-' (topics may contain '-')."""
    match = _PARTITION_DIR_RE.match(name)
    if match is None:
        return None
    topic = match.group(1)
    try:
        validate_topic_name(topic)
    except Exception:
        return None
    return topic, int(match.group(2))


def write_file(directory: str, name: str, data: bytes) -> None:
    """Replace ``directory/name`` by ``data`` so that a crash leaves old or new, never half."""
    final = os.path.join(directory, name)
    try:
        atomic_write(final, data)
    except OSError as exc:
        raise StorageError(f"cannot write {final}: {exc}") from exc


def is_fresh(path: str) -> bool:
    """True if ``path`` holds no registry, no checkpoint and no partition directory."""
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.name in (REGISTRY_FILE, CHECKPOINT_FILE):
                return False
            if parse_partition_dir(entry.name) is not None:
                return False
    return True


def read_small(path: str) -> bytes | None:
    """A small file's bytes, or None if it does not exist."""
    try:
        return read_file(path)
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc}") from exc
