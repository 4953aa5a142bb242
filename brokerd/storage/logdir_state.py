"""What :class:`~brokerd.storage.logdir.LogDirectory`'s mixins may use of it.

The mixins (``logdir_topics``, ``logdir_partitions``, ``logdir_offline``) each work on
the directory's shared state under its lock. :class:`DirectoryState` types that state
once; a mixin that also calls a method of another part extends it with that method.
Typing only: no behaviour, no I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from brokerd.storage.log import LogConfig, PartitionLog
from brokerd.storage.types import TopicInfo


class DirectoryState(Protocol):
    """The state every part of the log directory shares."""

    path: str
    offline: dict[tuple[str, int], str]
    _lock: threading.RLock
    _topics: dict[str, TopicInfo]
    _logs: dict[tuple[str, int], PartitionLog]
    _clock: Callable[[], float]

    def config_for(self, info: TopicInfo) -> LogConfig: ...
