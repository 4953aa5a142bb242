"""Durable store of committed consumer-group offsets and of consumer groups' membership.

:class:`OffsetStore` keeps every group's committed offsets in **one** append-only journal
file (by convention ``<data-dir>/consumer-offsets.log``; the byte format is in
``stores/offsets_format.py``). Each commit is one length-prefixed, CRC-32 protected record
holding every ``(topic, partition)`` of that commit, written with ``os.write`` and
fsync'd before :meth:`OffsetStore.commit` returns, so an OffsetCommit can be answered as
soon as the call returns. Reads are served from an in-memory map kept in step with the
journal. On open the journal is replayed; a torn or corrupt tail (expected after a crash
mid-write) is truncated away, and the file is compacted (live values rewritten through a
temporary file, fsync, rename and directory fsync) when it has grown well beyond the live
set. Compaction also runs during commits for the same reason, so a long-running broker's
journal stays bounded.

A failed write is not fatal (``journal/faults.py``): one that the file could be cut back
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

Whoever needs every change as it becomes durable (the Kafka layer, which derives
``__consumer_offsets``'s records from it) follows the store (:meth:`OffsetStore.follow`):
it gets the live state once, then each write's changes from the writer's thread, in
journal order. A write whose fsync failed is not passed on, even if it did reach the
disk and comes back when the store reopens.

What this module does not do: no Twisted, no threads of its own, no group state machine
(that is ``brokerd.kafka.groups.coordinator``), no offset retention/expiry of abandoned groups, no
validation of whether a topic exists, and no producer ids (``stores/producer_ids.py``). Every
method blocks (commit and compaction fsync); callers on the reactor run
``commit``/``delete_topic`` in a worker thread. ``fetch``/``committed`` only take a short
in-memory lock and are safe on the reactor even while a commit is syncing in another
thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence

from brokerd.names import MAX_TOPIC_LENGTH
from brokerd.storage.journal.engine import Journal, JournalKind
from brokerd.storage.stores.offsets_format import (
    MAGIC,
    MAX_METADATA_LENGTH,
    OLD_MAGICS,
    CommitOp,
    Committed,
    ConsumerGroupUpdate,
    Decoded,
    GroupConfigUpdate,
    GroupDeletion,
    GroupUpdate,
    JournalOp,
    OffsetDeletion,
    OffsetEntry,
    StoredGroup,
    StoredMember,
    encode_delete_topic,
    encode_live,
    encode_ops,
    encode_text,
    iter_records,
    live_size,
)

__all__ = [
    "COMPACT_MIN_BYTES",
    "COMPACT_RATIO",
    # Re-exported: brokerd.kafka.groups.coordinator imports these three from here.
    "MAX_METADATA_LENGTH",
    "OFFSETS_FILE_NAME",
    "OFFSETS_STORE_NAME",
    "CommitOp",
    "Committed",
    "ConsumerGroupUpdate",
    "GroupConfigUpdate",
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

#: The offsets journal, as the journal engine knows it.
OFFSETS_JOURNAL = JournalKind(
    name=OFFSETS_STORE_NAME,
    noun="offsets journal",
    file_name=OFFSETS_FILE_NAME,
    magic=MAGIC,
    old_magics=OLD_MAGICS,
    stale_suffixes=(_LEGACY_TEMP_SUFFIX,),
)


class _OffsetsView:
    """Every group's committed offsets and stored membership, as replayed from the
    journal. Writers change it under ``lock`` (the store's map lock); so do readers."""

    def __init__(self, lock: threading.Lock) -> None:
        self.lock = lock
        self.groups: dict[str, dict[tuple[str, int], Committed]] = {}
        #: Latest stored membership per group (tombstoned groups are absent).
        self.members: dict[str, StoredGroup] = {}
        #: Encoded size of each group's membership record, for the compaction estimate.
        self.member_bytes: dict[str, int] = {}
        #: Latest state of each consumer-protocol group (opaque: the Kafka layer's).
        self.consumer_groups: dict[str, bytes] = {}
        #: Each group's dynamic configs (the GROUP config resource); they outlive the group.
        self.group_configs: dict[str, dict[str, str]] = {}

    # -- as the journal engine drives it ------------------------------------------------

    def replay(self, data: bytes, pos: int, magic: bytes) -> int:
        # Every format's records decode the same way; newer kinds only add to them.
        for decoded, end in iter_records(data, pos):
            self.apply(decoded, end - pos)
            pos = end
        return pos

    def live_bytes(self) -> int:
        with self.lock:
            # Over-estimates (framing at most 19 bytes, the group id once in UTF-8).
            consumer = sum(
                len(s) + 4 * len(g) + 32 for g, s in self.consumer_groups.items()
            ) + sum(
                4 * len(g) + 32 + sum(4 * (len(n) + len(v)) + 8 for n, v in c.items())
                for g, c in self.group_configs.items()
            )
            return live_size(self.groups, self.member_bytes) + consumer

    def snapshot(self) -> bytes:
        with self.lock:
            offsets = {g: dict(entries) for g, entries in self.groups.items()}
            members = dict(self.members)
            consumer_groups = dict(self.consumer_groups)
            group_configs = {g: dict(c) for g, c in self.group_configs.items()}
        return encode_live(offsets, members, consumer_groups, group_configs)

    # -- changes ------------------------------------------------------------------------

    def apply(self, decoded: Decoded, size: int = 0) -> None:
        """Apply one decoded record (caller holds the lock, or is the replay).

        :param size: the record's framed size (group records only).
        """
        if isinstance(decoded, GroupDeletion):
            self.groups.pop(decoded.group_id, None)
            self.members.pop(decoded.group_id, None)
            self.member_bytes.pop(decoded.group_id, None)
            self.consumer_groups.pop(decoded.group_id, None)
            return
        if isinstance(decoded, GroupConfigUpdate):
            if decoded.configs:
                self.group_configs[decoded.group_id] = dict(decoded.configs)
            else:
                self.group_configs.pop(decoded.group_id, None)
            return
        if isinstance(decoded, ConsumerGroupUpdate):
            if decoded.state is None:
                self.consumer_groups.pop(decoded.group_id, None)
            else:
                self.consumer_groups[decoded.group_id] = decoded.state
            return
        if isinstance(decoded, OffsetDeletion):
            offsets = self.groups.get(decoded.group_id)
            if offsets is not None:
                for key in decoded.partitions:
                    offsets.pop(key, None)
                if not offsets:
                    del self.groups[decoded.group_id]
            return
        if isinstance(decoded, GroupUpdate):
            if decoded.value is None:
                self.members.pop(decoded.group_id, None)
                self.member_bytes.pop(decoded.group_id, None)
            else:
                self.members[decoded.group_id] = decoded.value
                self.member_bytes[decoded.group_id] = size
            return
        group, payload = decoded
        if group is None:
            assert isinstance(payload, str)
            for offsets in self.groups.values():
                for key in [k for k in offsets if k[0] == payload]:
                    del offsets[key]
            for name in [g for g, offsets in self.groups.items() if not offsets]:
                del self.groups[name]
            return
        assert isinstance(payload, list)
        offsets = self.groups.setdefault(group, {})
        for topic, partition, value in payload:
            offsets[(topic, partition)] = value


class OffsetStore:
    """Committed consumer-group offsets: an fsync'd journal plus an in-memory map.

    Create with :meth:`open`. Thread-safety: one lock serialises writers (commit,
    delete_topic, compaction, close); a second, short lock guards the map, so readers on
    the reactor never wait for an fsync.
    """

    def __init__(self, journal: Journal[_OffsetsView], clock: Callable[[], float]) -> None:
        # Use open(); the constructor only stores what open() prepared.
        #: The journal file (its engine: sizes, compactions, faults).
        self.journal = journal
        self._view = journal.state
        self._lock = journal.state.lock
        self._clock = clock
        self._write_lock = threading.Lock()
        self._followers: list[Callable[[Sequence[Decoded]], None]] = []

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
        journal = Journal.open(
            path, OFFSETS_JOURNAL, _OffsetsView(threading.Lock()), clock=clock,
            compact_min_bytes=compact_min_bytes, compact_ratio=compact_ratio,
        )
        return cls(journal, clock)

    @property
    def path(self) -> str:
        return self.journal.path

    # -- reads (any thread) -------------------------------------------------------------

    def fetch(
        self, group_id: str, topic: str, partition: int
    ) -> tuple[int, int, str | None] | None:
        """The committed ``(offset, leader_epoch, metadata)``, or None if none is stored."""
        with self._lock:
            value = self._view.groups.get(group_id, {}).get((topic, partition))
        if value is None:
            return None
        return value.offset, value.leader_epoch, value.metadata

    def committed(self, group_id: str) -> dict[tuple[str, int], tuple[int, int, str | None]]:
        """Every committed offset of ``group_id``, keyed by ``(topic, partition)``."""
        with self._lock:
            offsets = dict(self._view.groups.get(group_id, {}))
        return {key: (v.offset, v.leader_epoch, v.metadata) for key, v in offsets.items()}

    def groups(self) -> list[str]:
        """Ids of the groups that have at least one committed offset."""
        with self._lock:
            return sorted(self._view.groups)

    def consumer_groups_state(self) -> dict[str, bytes]:
        """The latest stored state of every consumer-protocol group not tombstoned or
        deleted (as the Kafka layer encoded it)."""
        with self._lock:
            return dict(self._view.consumer_groups)

    def group_configs(self) -> dict[str, dict[str, str]]:
        """Every group's dynamic configs (groups without any are absent)."""
        with self._lock:
            return {g: dict(c) for g, c in self._view.group_configs.items()}

    def groups_metadata(self) -> dict[str, StoredGroup]:
        """The latest stored membership of every group that was not tombstoned or deleted
        (an Empty group's record has no members but keeps its generation)."""
        with self._lock:
            return dict(self._view.members)

    def follow(
        self,
        start: Callable[
            [dict[str, list[tuple[str, int, Committed]]], dict[str, StoredGroup]], None
        ],
        follower: Callable[[Sequence[Decoded]], None],
    ) -> None:
        """Hand ``start`` the live offsets and memberships now, then call ``follower``
        with the changes of every later write made durable (in the writer's thread, in
        journal order, once they are visible): no write falls between the two, nor is
        seen twice. Neither may raise or block."""
        with self._write_lock:
            with self._lock:
                offsets = {
                    g: [(t, p, v) for (t, p), v in sorted(rows.items())]
                    for g, rows in sorted(self._view.groups.items())
                }
                members = dict(self._view.members)
            start(offsets, members)
            self._followers.append(follower)

    # -- writes (one writer at a time; blocking) ----------------------------------------

    def commit(self, group_id: str, entries: Sequence[OffsetEntry]) -> None:
        """Durably store one OffsetCommit: appended as one record and fsync'd, then visible.

        :param entries: ``(topic, partition, offset, leader_epoch, metadata)`` tuples.
        :raises ValueError: a group id, topic or metadata over its limit, or a number out
            of its wire range (nothing is written).
        :raises StorageError: the write failed and nothing was stored; the next write
            tries again (a full disk may get space back). After a failed fsync it is a
            :class:`~brokerd.storage.journal.faults.StoreOffline`: the kernel may have
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
                stored = set(self._view.members)
                consumer_stored = set(self._view.consumer_groups)
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
                    consumer_stored.discard(change.group_id)
                elif isinstance(change, ConsumerGroupUpdate):
                    if change.state is None and change.group_id not in consumer_stored:
                        continue  # nothing stored to tombstone
                    if change.state is None:
                        consumer_stored.discard(change.group_id)
                    else:
                        consumer_stored.add(change.group_id)
                records.append(record)
                updates.append((change, len(record)))
            if not records:
                return
            self.journal.append(b"".join(records))
            with self._lock:
                for update, size in updates:
                    self._view.apply(update, size)
            for follower in self._followers:
                follower([update for update, _ in updates])
            self.journal.compact_if_due()

    def delete_topic(self, topic: str) -> None:
        """Durably forget every group's offsets for ``topic`` (the topic was deleted).

        :raises StorageError: as for :meth:`commit`.
        """
        raw = encode_text(topic)
        if len(raw) > MAX_TOPIC_LENGTH:
            raise ValueError(f"topic longer than {MAX_TOPIC_LENGTH} bytes")
        with self._write_lock:
            with self._lock:
                present = any(
                    k[0] == topic for offsets in self._view.groups.values() for k in offsets
                )
            if not present:
                return
            self.journal.append(encode_delete_topic(raw))
            with self._lock:
                self._view.apply((None, topic))
            for follower in self._followers:
                follower([(None, topic)])

    def close(self) -> None:
        """Close the journal. Every commit that returned is already durable."""
        with self._write_lock:
            self.journal.close()

    # -- faults and reopening -----------------------------------------------------------





    def retry_reopen(self, now: float | None = None) -> bool:
        """Reopen an offline store from disk if its retry is due (replay the journal, cut
        a torn tail, sync file and directory); True if it is back online. Blocking."""
        with self._write_lock:
            return self.journal.reopen_if_due(
                now, lambda: _OffsetsView(self._lock), self._adopt
            )

    def _adopt(self, view: _OffsetsView) -> None:
        with self._lock:
            self._view = view
