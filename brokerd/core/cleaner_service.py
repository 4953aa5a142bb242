# -*- test-case-name: tests.core.test_cleaner_service -*-
"""The log cleaner service: compacts partitions whose config has ``compact``.

A child of the broker's service tree with its own threads (never the read or write
pools). Each thread loops: pick the *filthiest* due partition (highest dirty ratio, as
Kafka's ``LogCleanerManager`` does; due per :meth:`Cleanable.due`), run one pass
(:func:`brokerd.storage.cleaner.compactor.clean_log`) with its share of the key-map memory and
of the I/O budget, persist the new checkpoint (``cleaner-offset-checkpoint`` in the
data directory), and sleep ``backoff_seconds`` when nothing is due. Two threads never
clean the same partition.

Appends are never blocked by a pass: a cleaned segment is swapped in under the log's
swap lock, which only retention, DeleteRecords and close take
(``PartitionLog.replace_segment``).

A checkpoint belongs to the partition log it was taken on: a topic deleted and created
again under its name gets a new log, which is cleaned from its start (and the stale entry
is not written again), as Kafka drops a deleted partition's cleaner checkpoint.

At stop the threads are told to stop (a pass stops between batches and removes its
``.cleaned`` file; swaps already done are complete and valid) and the service's stop
Deferred fires once they have exited, before the log directory closes (the broker stops
its children last added first, and this one is added after the log directory).

Counters (``records_read`` ... ``last_error``) are plain attributes, updated by the
cleaner threads, for metrics. Logging goes through the stdlib logger
``brokerd.storage.cleaner.compactor`` (it is called from the cleaner threads, not the reactor).

What it does not do: decide what a pass keeps (storage/cleaner/compactor.py) or parse configs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import attrs
from twisted.application import service
from twisted.internet import defer

from brokerd.core.interfaces import ThreadReactor
from brokerd.errors import BrokerError
from brokerd.storage.cleaner.compactor import (
    Throttle,
    clean_log,
    cleanable_state,
    read_checkpoint,
    write_checkpoint,
)
from brokerd.storage.cleaner.keymap import OffsetMap
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.logdir.log_directory import LogDirectory

__all__ = ["CleanerService", "CleanerSettings"]

_log = logging.getLogger("brokerd.storage.cleaner.compactor")

#: Kafka's ``log.cleaner.dedupe.buffer.size`` default (128 MiB, shared by the threads).
DEFAULT_DEDUPE_BUFFER_BYTES = 128 * 1024 * 1024
#: Kafka's ``log.cleaner.backoff.ms``.
DEFAULT_BACKOFF_SECONDS = 15.0


@attrs.frozen
class CleanerSettings:
    """The broker-wide cleaner settings (``--cleaner-*`` options)."""

    threads: int = 1
    #: Bytes read plus written per second, over all threads (None: unlimited).
    io_bytes_per_second: float | None = None
    dedupe_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES
    backoff_seconds: float = DEFAULT_BACKOFF_SECONDS


class CleanerService(service.Service):
    """Background log compaction; see the module docstring."""

    name = "log-cleaner"

    def __init__(
        self,
        logdir: LogDirectory,
        settings: CleanerSettings,
        *,
        reactor: ThreadReactor,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if settings.threads < 1:
            raise ValueError("the cleaner needs at least one thread")
        self._logdir = logdir
        self.settings = settings
        self._reactor = reactor
        self._wall_clock = wall_clock
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._busy: set[tuple[str, int]] = set()
        self._checkpoints = read_checkpoint(logdir.path)
        # Which log each checkpoint was taken on (the ones read: the logs open now).
        live = logdir.logs()
        self._owners = {k: live[k] for k in self._checkpoints if k in live}
        self._threads: list[threading.Thread] = []
        self._stopped: defer.Deferred[None] | None = None
        self._running_threads = 0
        self.passes = 0
        self.records_read = 0
        self.records_kept = 0
        self.records_removed = 0
        self.bytes_read = 0
        self.bytes_written = 0
        self.errors = 0
        self.last_error: str | None = None
        #: Wall-clock time the last pass completed (None: none yet).
        self.last_pass_time: float | None = None

    # -- lifecycle --------------------------------------------------------------------

    def startService(self) -> None:
        service.Service.startService(self)
        self._stop.clear()
        exited: defer.Deferred[None] = defer.Deferred()
        self._stopped = exited
        self._running_threads = self.settings.threads
        for i in range(self.settings.threads):
            thread = threading.Thread(
                target=self._run, args=(exited,), name=f"log-cleaner-{i}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def stopService(self) -> defer.Deferred[None]:
        """Tell the threads to stop; fires once the last one has exited."""
        service.Service.stopService(self)
        self._stop.set()
        self._wake.set()
        exited, self._stopped = self._stopped, None
        self._threads = []
        return exited if exited is not None else defer.succeed(None)

    def wake(self) -> None:
        """Look for work now rather than after the backoff (tests, config changes)."""
        self._wake.set()

    def _run(self, exited: defer.Deferred[None]) -> None:
        try:
            threads = self.settings.threads
            key_map = OffsetMap(max(self.settings.dedupe_buffer_bytes // threads, 1024))
            rate = self.settings.io_bytes_per_second
            share = rate / threads if rate is not None else None
            while not self._stop.is_set():
                if not self.clean_one(key_map, share):
                    self._wake.wait(self.settings.backoff_seconds)
                    self._wake.clear()
        except BaseException:  # pragma: no cover - a bug: keep the broker up, say so
            _log.exception("log cleaner thread died")
        finally:
            with self._lock:
                self._running_threads -= 1
                last = self._running_threads == 0
            if last:
                self._reactor.callFromThread(exited.callback, None)

    # -- one pass ---------------------------------------------------------------------

    def _pick(self, now_ms: float) -> tuple[tuple[str, int], PartitionLog] | None:
        best: tuple[float, tuple[str, int], PartitionLog] | None = None
        for key, log in self._logdir.logs().items():
            if not log.config.compact or log.failed or key in self._busy:
                continue
            state = cleanable_state(log, self._checkpoint(key, log), now_ms)
            if state.due(log, now_ms) and (best is None or state.dirty_ratio > best[0]):
                best = (state.dirty_ratio, key, log)
        return None if best is None else (best[1], best[2])

    def clean_one(self, key_map: OffsetMap | None = None, io_rate: float | None = None) -> bool:
        """Clean the filthiest due partition (blocking, in the calling thread); False if
        none was due. Errors are counted and logged, never raised."""
        now_ms = self._wall_clock() * 1000.0
        with self._lock:
            picked = self._pick(now_ms)
            if picked is None:
                return False
            key, log = picked
            self._busy.add(key)
        key_map = key_map or OffsetMap(self.settings.dedupe_buffer_bytes)
        throttle = Throttle(io_rate, sleep=self._stop.wait)
        try:
            result = clean_log(
                log,
                self._checkpoint(key, log),
                now_ms=now_ms,
                key_map=key_map,
                throttle=throttle,
                should_stop=self._stop.is_set,
            )
            if result is not None:
                self.passes += 1
                self.last_pass_time = self._wall_clock()
                self.records_read += result.records_read
                self.records_kept += result.records_kept
                self.records_removed += result.records_removed
                self.bytes_read += result.bytes_read
                self.bytes_written += result.bytes_written
                self._save_checkpoint(key, log, result.end)
                _log.info(
                    "cleaned %s-%d up to offset %d: %d of %d records removed",
                    key[0],
                    key[1],
                    result.end,
                    result.records_removed,
                    result.records_read,
                )
            return result is not None
        except BrokerError as exc:
            self.errors += 1
            self.last_error = f"{key[0]}-{key[1]}: {exc}"
            _log.error("log cleaner: %s", self.last_error)
            return False
        finally:
            with self._lock:
                self._busy.discard(key)

    def _checkpoint(self, key: tuple[str, int], log: PartitionLog) -> int | None:
        """``key``'s checkpoint if it was taken on ``log`` (not on a deleted namesake)."""
        return self._checkpoints.get(key) if self._owners.get(key) is log else None

    def _save_checkpoint(self, key: tuple[str, int], log: PartitionLog, end: int) -> None:
        with self._lock:
            self._checkpoints[key] = end
            self._owners[key] = log
            live = self._logdir.logs()
            points = {
                k: v
                for k, v in self._checkpoints.items()
                if k in live and self._owners.get(k) is live[k]
            }
            self._owners = {k: self._owners[k] for k in points}
            self._checkpoints = points
            write_checkpoint(self._logdir.path, points)
