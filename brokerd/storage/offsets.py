"""Durable store of committed consumer-group offsets and of consumer groups' membership.

:class:`OffsetStore` keeps every group's committed offsets in **one** append-only journal
file (by convention ``<data-dir>/consumer-offsets.log``; the byte format is in
``offsets_journal.py``). Each commit is one length-prefixed, CRC-32 protected record
holding every ``(topic, partition)`` of that commit, written with ``os.write`` and
fsync'd before :meth:`OffsetStore.commit` returns, so an OffsetCommit can be answered as
soon as the call returns. Reads are served from an in-memory map kept in step with the
journal. On open the journal is replayed; a torn or corrupt tail (expected after a crash
mid-write) is truncated away, and the file is compacted (live values rewritten through a
temporary file, fsync, rename and directory fsync) when it has grown well beyond the live
set. Compaction also runs during commits for the same reason, so a long-running broker's
journal stays bounded.

A failed write is not fatal (``store_faults.py``): one that the file could be cut back
from (a full disk) fails only its own commit, and the next commit tries again; a failed
fsync takes the store offline until :meth:`OffsetStore.retry_reopen` (polled by the
broker) has replayed the journal from disk. Reads keep being served meanwhile.

Group ids are arbitrary client strings (Kafka puts no rule on them), so they never become
file names: they only ever appear inside journal records, capped at
:data:`brokerd.names.MAX_GROUP_ID_LENGTH` UTF-8 bytes.

The same journal also holds each consumer group's membership as of its last Stable
generation (:class:`StoredGroup`, Kafka keeps it in ``__consumer_offsets`` too), or a
record with no members once the group went Empty (so its generation keeps counting), so
the coordinator can restore groups after a restart. Compaction keeps only the latest
record per group and drops tombstoned groups. DeleteGroups and OffsetDelete write
deletion records (:meth:`OffsetStore.write_batch`), fsync'd like commits.

Format history: ``BKOFFS01`` journals (commits and topic deletions only) and ``BKOFFS02``
journals (plus group records) are still read; opening one rewrites it at once as
``BKOFFS03`` (plus group and offset deletions), so a brokerd that predates a record kind
refuses the file outright instead of truncating everything after the first such record
as a torn tail.

What this module does not do: no Twisted, no threads of its own, no group state machine
(that is ``brokerd.kafka.groups.coordinator``), no offset retention/expiry of abandoned groups, no
validation of whether a topic exists, and no producer ids (``producer_ids.py``). Every
method blocks (commit and compaction fsync); callers on the reactor run
``commit``/``delete_topic`` in a worker thread. ``fetch``/``committed`` only take a short
in-memory lock and are safe on the reactor even while a commit is syncing in another
thread.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from brokerd.errors import StorageError
from brokerd.names import MAX_TOPIC_LENGTH
from brokerd.storage.fileio import (
    FILE_MODE,
    TEMP_SUFFIX,
    ReplaceFailed,
    fsync_dir,
    rewrite_for_append,
    write_all,
)
from brokerd.storage.offsets_journal import (
    MAGIC,
    MAX_METADATA_LENGTH,
    OLD_MAGICS,
    CommitOp,
    Committed,
    Decoded,
    GroupDeletion,
    GroupUpdate,
    JournalOp,
    OffsetDeletion,
    OffsetEntry,
    StoredGroup,
    StoredMember,
    encode_delete_topic,
    encode_journal,
    encode_ops,
    encode_text,
    iter_records,
    live_size,
)
from brokerd.storage.store_faults import StoreFaults, append_records, reopen_if_due, settle

__all__ = [
    "COMPACT_MIN_BYTES",
    "COMPACT_RATIO",
    # Re-exported: brokerd.kafka.groups.coordinator imports these three from here.
    "MAX_METADATA_LENGTH",
    "OFFSETS_FILE_NAME",
    "OFFSETS_STORE_NAME",
    "CommitOp",
    "Committed",
    "GroupDeletion",
    "GroupUpdate",
    "JournalOp",
    "OffsetDeletion",
    "OffsetEntry",
    "OffsetStore",
    "StoredGroup",
    "StoredMember",
]

#: File name used when :meth:`OffsetStore.open` is given the data directory instead of a
#: file path. It cannot look like a ``<topic>-<int>`` partition directory.
OFFSETS_FILE_NAME = "consumer-offsets.log"

#: Compact when the journal is at least this big ...
COMPACT_MIN_BYTES = 1 << 20
#: ... and this many times the size the live values would take on their own. With auto-commit
#: every 5 s rewriting the same keys, the journal would otherwise grow without bound.
COMPACT_RATIO = 4

#: What the store is called in its log lines and in ``/readyz``.
OFFSETS_STORE_NAME = "consumer offsets store"

#: Suffix of the compaction temporary file of brokerd versions before ``fileio.py``; one
#: left by a crash is removed on open like the current one.
_LEGACY_TEMP_SUFFIX = ".compact-tmp"


class OffsetStore:
    """Committed consumer-group offsets: an fsync'd journal plus an in-memory map.

    Create with :meth:`open`. Thread-safety: one lock serialises writers (commit,
    delete_topic, compaction, close); a second, short lock guards the map, so readers on
    the reactor never wait for an fsync.
    """

    def __init__(
        self,
        path: str,
        fd: int,
        *,
        clock: Callable[[], float],
        compact_min_bytes: int,
        compact_ratio: int,
    ) -> None:
        # Use open(); the constructor only stores what open() prepared.
        self.path = path
        self._fd = fd
        self._clock = clock
        self._compact_min_bytes = compact_min_bytes
        self._compact_ratio = compact_ratio
        self._groups: dict[str, dict[tuple[str, int], Committed]] = {}
        #: Latest stored membership per group (tombstoned groups are absent).
        self._members: dict[str, StoredGroup] = {}
        #: Encoded size of each group's membership record, for the compaction estimate.
        self._member_bytes: dict[str, int] = {}
        #: The journal on disk still has the old magic and must be rewritten.
        self._old_format = False
        self._size = 0
        self._compact_at = 0
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._faults = StoreFaults(OFFSETS_STORE_NAME, path, clock)
        self._closed = False
        #: Bytes of torn/corrupt tail dropped by the last open (0 on a clean journal).
        self.truncated_bytes = 0
        #: Number of compactions performed since open (including one at open).
        self.compactions = 0
        #: The last compaction failure, if any (compaction failures are not fatal).
        self.last_compaction_error: BaseException | None = None

    # -- opening and replay -------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str,
        *,
        clock: Callable[[], float] = time.time,
        compact_min_bytes: int = COMPACT_MIN_BYTES,
        compact_ratio: int = COMPACT_RATIO,
    ) -> OffsetStore:
        """Open (creating if needed) the journal at ``path`` and replay it.

        :param path: the journal file, or the data directory (then
            :data:`OFFSETS_FILE_NAME` inside it is used).
        :param clock: seconds since the epoch, for commit timestamps.
        :raises StorageError: the file exists but is not an offsets journal, or I/O failed.
        """
        if os.path.isdir(path):
            path = os.path.join(path, OFFSETS_FILE_NAME)
        path = os.path.abspath(path)
        directory = os.path.dirname(path)
        try:
            # A temp file left by a compaction that crashed before its rename: the journal
            # it would have replaced is still complete, so the temp file is just dropped.
            for suffix in (TEMP_SUFFIX, _LEGACY_TEMP_SUFFIX):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path + suffix)
            flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
                created = True
            except FileExistsError:
                fd = os.open(path, flags)
                created = False
        except OSError as exc:
            raise StorageError(f"cannot open offsets journal {path}: {exc}") from exc
        store = cls(
            path,
            fd,
            clock=clock,
            compact_min_bytes=compact_min_bytes,
            compact_ratio=compact_ratio,
        )
        try:
            if created:
                write_all(fd, MAGIC)
                os.fsync(fd)
                fsync_dir(directory)
                store._size = len(MAGIC)
            else:
                store._replay()
            store._compact_at = store._next_compact_at(store._live_bytes())
            if store._size >= store._compact_at or store._old_format:
                store._maybe_compact(force=store._old_format)
        except ReplaceFailed as exc:
            os.close(fd)
            raise StorageError(f"cannot compact offsets journal {path}: {exc}") from exc
        except OSError as exc:
            os.close(fd)
            raise StorageError(f"cannot recover offsets journal {path}: {exc}") from exc
        except BaseException:
            os.close(fd)
            raise
        return store

    def _replay(self) -> None:
        chunks: list[bytes] = []
        os.lseek(self._fd, 0, os.SEEK_SET)
        while chunk := os.read(self._fd, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)
        if len(data) < len(MAGIC):
            if not any(m.startswith(data) for m in (MAGIC, *OLD_MAGICS)):
                raise StorageError(f"{self.path} is not a brokerd offsets journal")
            # Torn while being created: nothing was ever committed to it.
            os.ftruncate(self._fd, 0)
            write_all(self._fd, MAGIC)
            os.fsync(self._fd)
            self.truncated_bytes = len(data)
            self._size = len(MAGIC)
            return
        magic = data[: len(MAGIC)]
        if magic != MAGIC and magic not in OLD_MAGICS:
            raise StorageError(f"{self.path} is not a brokerd offsets journal")
        self._old_format = magic in OLD_MAGICS
        pos = len(MAGIC)
        for decoded, end in iter_records(data, pos):
            self._apply(decoded, end - pos)
            pos = end
        if pos != len(data):
            # Everything after the last whole, valid record is a write that never
            # completed (its commit was never acknowledged): cut it off for good, so that
            # new records do not land behind garbage.
            self.truncated_bytes = len(data) - pos
            os.ftruncate(self._fd, pos)
            os.fsync(self._fd)
        self._size = pos

    def _apply(self, decoded: Decoded, size: int = 0) -> None:
        """Apply one decoded record to the map (caller holds the map lock or is open()).

        :param size: the record's framed size (group records only).
        """
        if isinstance(decoded, GroupDeletion):
            self._groups.pop(decoded.group_id, None)
            self._members.pop(decoded.group_id, None)
            self._member_bytes.pop(decoded.group_id, None)
            return
        if isinstance(decoded, OffsetDeletion):
            offsets = self._groups.get(decoded.group_id)
            if offsets is not None:
                for key in decoded.partitions:
                    offsets.pop(key, None)
                if not offsets:
                    del self._groups[decoded.group_id]
            return
        if isinstance(decoded, GroupUpdate):
            if decoded.value is None:
                self._members.pop(decoded.group_id, None)
                self._member_bytes.pop(decoded.group_id, None)
            else:
                self._members[decoded.group_id] = decoded.value
                self._member_bytes[decoded.group_id] = size
            return
        group, payload = decoded
        if group is None:
            assert isinstance(payload, str)
            for offsets in self._groups.values():
                for key in [k for k in offsets if k[0] == payload]:
                    del offsets[key]
            for name in [g for g, offsets in self._groups.items() if not offsets]:
                del self._groups[name]
            return
        assert isinstance(payload, list)
        offsets = self._groups.setdefault(group, {})
        for topic, partition, value in payload:
            offsets[(topic, partition)] = value

    # -- reads (any thread) -------------------------------------------------------------

    def fetch(
        self, group_id: str, topic: str, partition: int
    ) -> tuple[int, int, str | None] | None:
        """The committed ``(offset, leader_epoch, metadata)``, or None if none is stored."""
        with self._lock:
            value = self._groups.get(group_id, {}).get((topic, partition))
        if value is None:
            return None
        return value.offset, value.leader_epoch, value.metadata

    def committed(self, group_id: str) -> dict[tuple[str, int], tuple[int, int, str | None]]:
        """Every committed offset of ``group_id``, keyed by ``(topic, partition)``."""
        with self._lock:
            offsets = dict(self._groups.get(group_id, {}))
        return {key: (v.offset, v.leader_epoch, v.metadata) for key, v in offsets.items()}

    def groups(self) -> list[str]:
        """Ids of the groups that have at least one committed offset."""
        with self._lock:
            return sorted(self._groups)

    def groups_metadata(self) -> dict[str, StoredGroup]:
        """The latest stored membership of every group that was not tombstoned or deleted
        (an Empty group's record has no members but keeps its generation)."""
        with self._lock:
            return dict(self._members)

    # -- writes (one writer at a time; blocking) ----------------------------------------

    def commit(self, group_id: str, entries: Sequence[OffsetEntry]) -> None:
        """Durably store one OffsetCommit: appended as one record and fsync'd, then visible.

        :param entries: ``(topic, partition, offset, leader_epoch, metadata)`` tuples.
        :raises ValueError: a group id, topic or metadata over its limit, or a number out
            of its wire range (nothing is written).
        :raises StorageError: the write failed and nothing was stored; the next write
            tries again (a full disk may get space back). After a failed fsync it is a
            :class:`~brokerd.storage.store_faults.StoreOffline`: the kernel may have
            dropped the data, so the store refuses writes until :meth:`retry_reopen`
            has reopened it from disk.
        """
        self.commit_many([(group_id, entries)])

    def store_group(self, group_id: str, value: StoredGroup) -> None:
        """Durably record ``group_id``'s membership (replacing any earlier record).

        :raises ValueError: a field over its wire range (nothing is written).
        :raises StorageError: as for :meth:`commit`.
        """
        self.commit_many([], groups=[(group_id, value)])

    def delete_group(self, group_id: str) -> None:
        """Durably forget ``group_id``'s membership (it went Empty); its offsets stay."""
        self.commit_many([], groups=[(group_id, None)])

    def commit_many(
        self,
        commits: Iterable[tuple[str, Sequence[OffsetEntry]]],
        *,
        groups: Iterable[tuple[str, StoredGroup | None]] = (),
    ) -> None:
        """Several groups' commits in one write and one fsync (group commit).

        Each ``(group_id, entries)`` is its own record, so each is atomic on its own.
        ``groups`` are membership records (None: tombstone), written after the commits in
        the given order. Same errors as :meth:`commit`; on an error none of them is applied.
        A tombstone for a group with no stored membership writes nothing.
        """
        ops: list[JournalOp] = [CommitOp(g, tuple(entries)) for g, entries in commits]
        ops += [GroupUpdate(g, value) for g, value in groups]
        self.write_batch(ops)

    def write_batch(self, ops: Sequence[JournalOp]) -> None:
        """Write ``ops`` (commits, membership records, group and offset deletions) in
        this order, in one write and one fsync; then they are visible, in order.

        Same errors as :meth:`commit`; on an error none of them is applied. A tombstone
        for a group with no stored membership writes nothing.
        """
        encoded = encode_ops(ops, int(self._clock() * 1000))
        with self._write_lock:
            # Decided under the write lock: only writers change which groups are stored.
            with self._lock:
                stored = set(self._members)
            records: list[bytes] = []
            updates: list[tuple[Decoded, int]] = []
            for record, change in encoded:
                if isinstance(change, GroupUpdate):
                    if change.value is None and change.group_id not in stored:
                        continue
                    if change.value is None:
                        stored.discard(change.group_id)
                    else:
                        stored.add(change.group_id)
                elif isinstance(change, GroupDeletion):
                    stored.discard(change.group_id)
                records.append(record)
                updates.append((change, len(record)))
            if not records:
                return
            self._append(b"".join(records))
            with self._lock:
                for update, size in updates:
                    self._apply(update, size)
            if self._size >= self._compact_at:
                try:
                    self._maybe_compact()
                except ReplaceFailed as exc:
                    # These records are durable in either file; the store goes offline
                    # and its reopen settles which file is the journal.
                    self._faults.lost_trust(f"compaction's rename failed: {exc}")

    def delete_topic(self, topic: str) -> None:
        """Durably forget every group's offsets for ``topic`` (the topic was deleted).

        :raises StorageError: as for :meth:`commit`.
        """
        raw = encode_text(topic)
        if len(raw) > MAX_TOPIC_LENGTH:
            raise ValueError(f"topic longer than {MAX_TOPIC_LENGTH} bytes")
        with self._write_lock:
            with self._lock:
                present = any(k[0] == topic for offsets in self._groups.values() for k in offsets)
            if not present:
                return
            self._append(encode_delete_topic(raw))
            with self._lock:
                self._apply((None, topic))

    def close(self) -> None:
        """Close the journal. Every commit that returned is already durable."""
        with self._write_lock:
            self._faults.close()
            if self._closed:
                return
            self._closed = True
            os.close(self._fd)

    def _append(self, data: bytes) -> None:
        """Write and sync ``data`` at the end of the journal (caller holds the write lock).
        A failure raises StorageError: transient (the store stays online, the next write
        tries again) or, after a failed sync, StoreOffline (see ``store_faults.py``)."""
        self._faults.check_writable()
        append_records(self._fd, data, self._size, self._faults)
        self._size += len(data)

    # -- faults and reopening -----------------------------------------------------------

    @property
    def name(self) -> str:
        return OFFSETS_STORE_NAME

    @property
    def offline_reason(self) -> str | None:
        """Why the store refuses writes until it is reopened, or None."""
        return self._faults.offline_reason

    @property
    def faults(self) -> StoreFaults:
        return self._faults

    @property
    def write_errors(self) -> int:
        """Writes that failed or were refused since open (reopens keep counting)."""
        return self._faults.errors

    def retry_reopen(self, now: float | None = None) -> bool:
        """Reopen an offline store from disk if its retry is due (replay the journal, cut
        a torn tail, sync file and directory); True if it is back online. Blocking."""
        with self._write_lock:
            return reopen_if_due(self._faults, now, self._open_again, self._adopt)

    def _open_again(self) -> OffsetStore:
        fresh = OffsetStore.open(
            self.path,
            clock=self._clock,
            compact_min_bytes=self._compact_min_bytes,
            compact_ratio=self._compact_ratio,
        )
        try:
            settle(fresh._fd, self.path)
        except OSError:
            fresh.close()
            raise
        return fresh

    def _adopt(self, fresh: OffsetStore) -> None:
        """Take over what a reopen replayed (caller holds the write lock)."""
        old_fd = self._fd
        with self._lock:
            self._groups = fresh._groups
            self._members = fresh._members
            self._member_bytes = fresh._member_bytes
            self._fd = fresh._fd
        self._size = fresh._size
        self._compact_at = fresh._compact_at
        self._old_format = False
        self.truncated_bytes = fresh.truncated_bytes
        self.compactions += fresh.compactions
        with contextlib.suppress(OSError):
            os.close(old_fd)

    # -- compaction ---------------------------------------------------------------------

    def _live_bytes(self) -> int:
        with self._lock:
            return live_size(self._groups, self._member_bytes)

    def _next_compact_at(self, live_bytes: int) -> int:
        return max(self._compact_min_bytes, self._compact_ratio * live_bytes)

    def _maybe_compact(self, *, force: bool = False) -> None:
        """Rewrite the journal as one record per group if it is mostly dead records
        (``force``: regardless, e.g. to replace an old-format file header).

        Caller holds the write lock. A failure before the rename leaves the old journal in
        place and is only remembered (the commit that triggered it is already durable);
        a failure at the rename raises :class:`ReplaceFailed` (the caller takes the store
        offline, as a failed fsync does).
        """
        live = self._live_bytes()
        if not force and self._size < self._next_compact_at(live):
            # The live set itself grew: check again once the file grows by the ratio.
            self._compact_at = self._next_compact_at(live)
            return
        with self._lock:
            snapshot = {g: dict(offsets) for g, offsets in self._groups.items()}
            members = dict(self._members)
        data = encode_journal(snapshot, members)
        try:
            new_fd = rewrite_for_append(self.path, data)
        except ReplaceFailed as exc:
            # We cannot tell which file a crash would leave behind, so appending to either
            # could lose acknowledged commits.
            self.last_compaction_error = exc.cause
            raise
        except OSError as exc:
            self._compaction_failed(exc, force=force)
            return
        os.close(self._fd)
        self._fd = new_fd
        self._size = len(data)
        self._compact_at = self._next_compact_at(len(data))
        self.compactions += 1
        self.last_compaction_error = None
        self._old_format = False

    def _compaction_failed(self, exc: OSError, *, force: bool) -> None:
        """A compaction failed before its rename: the old journal is intact and in use."""
        self.last_compaction_error = exc
        # Do not retry on every commit: wait until the file grows by the ratio again.
        self._compact_at = self._size * self._compact_ratio
        if force and self._old_format:
            # Appending new record kinds behind the old header would let an older
            # brokerd truncate them (and every commit after them) as a torn tail.
            raise exc
