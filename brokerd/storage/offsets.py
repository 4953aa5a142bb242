"""Durable store of committed consumer-group offsets, and the producer-id allocator.

:class:`OffsetStore` keeps every group's committed offsets in **one** append-only journal
file (by convention ``<data-dir>/consumer-offsets.log``). Each commit is one
length-prefixed, CRC-32 protected record holding every ``(topic, partition)`` of that
commit, written with ``os.write`` and fsync'd before :meth:`OffsetStore.commit` returns,
so an OffsetCommit can be answered as soon as the call returns. Reads are served from an
in-memory map kept in step with the journal. On open the journal is replayed; a torn or
corrupt tail (expected after a crash mid-write) is truncated away, and the file is
compacted (live values rewritten through a temp file, fsync, rename and directory fsync)
when it has grown well beyond the live set. Compaction also runs during commits for the
same reason, so a long-running broker's journal stays bounded.

Group ids are arbitrary client strings (Kafka puts no rule on them), so they never become
file names: they only ever appear inside journal records, capped at
:data:`brokerd.names.MAX_GROUP_ID_LENGTH` UTF-8 bytes.

:class:`ProducerIdAllocator` hands out Kafka producer ids (InitProducerId) that are never
reused across restarts: it persists a high-water mark in blocks of
:data:`PRODUCER_ID_BLOCK` ids, so at most one fsync per block.

The same journal also holds each consumer group's membership as of its last Stable
generation (:class:`StoredGroup`, Kafka keeps it in ``__consumer_offsets`` too), or a
tombstone once the group went Empty, so the coordinator can restore live groups after a
restart. Compaction keeps only the latest record per group and drops tombstoned groups.

Format history: ``BKOFFS01`` journals (commits and topic deletions only) are still read;
opening one rewrites it at once as ``BKOFFS02``, so a brokerd that predates group records
refuses the file outright instead of truncating everything after the first group record
as a torn tail.

What this module does not do: no Twisted, no threads of its own, no group state machine
(that is ``brokerd.kafka.groups``), no offset retention/expiry of abandoned groups, and no
validation of whether a topic exists. Every method blocks (commit and compaction fsync);
callers on the reactor run ``commit``/``delete_topic``/``next_id`` in a worker thread.
``fetch``/``committed`` only take a short in-memory lock and are safe on the reactor even
while a commit is syncing in another thread.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence

import attrs

from brokerd.errors import StorageError
from brokerd.names import MAX_GROUP_ID_LENGTH, MAX_TOPIC_LENGTH

#: File names used when :meth:`OffsetStore.open` / :class:`ProducerIdAllocator` are given
#: the data directory instead of a file path. Neither can look like a ``<topic>-<int>``
#: partition directory.
OFFSETS_FILE_NAME = "consumer-offsets.log"
PRODUCER_IDS_FILE_NAME = "producer-ids"

#: Kafka's ``offset.metadata.max.bytes``: longer commit metadata is refused
#: (OFFSET_METADATA_TOO_LARGE) by the coordinator before it reaches the store.
MAX_METADATA_LENGTH = 4096

#: Compact when the journal is at least this big ...
COMPACT_MIN_BYTES = 1 << 20
#: ... and this many times the size the live values would take on their own. With auto-commit
#: every 5 s rewriting the same keys, the journal would otherwise grow without bound.
COMPACT_RATIO = 4

#: A record claiming to be longer than this is garbage, not a commit: stop replay there
#: rather than trust a length that a torn or overwritten header produced.
MAX_RECORD_BYTES = 64 << 20

#: Producer ids are reserved durably in blocks of this many: one fsync per block, and at
#: most one block's worth of ids skipped after a restart.
PRODUCER_ID_BLOCK = 1000

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# Journal layout: 8-byte file magic (format name + version), then records
#   u32 body_length, u32 crc32(body), body
# Commit body:  u8 1, u16 group_len, group, u32 count,
#               count x (u16 topic_len, topic, i32 partition, i64 offset, i32 leader_epoch,
#                        i64 commit_timestamp_ms, i32 metadata_len (-1 = null), metadata)
# Delete-topic body: u8 2, u16 topic_len, topic
# Group body:   u8 3, u16 group_len, group, str protocol_type, i32 generation,
#               str protocol_name, str leader, u32 count,
#               count x (str member_id, nstr group_instance_id, str client_id,
#                        str client_host, i32 session_timeout_ms, i32 rebalance_timeout_ms,
#                        bytes metadata, bytes assignment)
#               where str = u32 len + UTF-8, nstr = i32 len (-1 = null) + UTF-8,
#               bytes = u32 len + raw
# Group tombstone body: u8 4, u16 group_len, group
_MAGIC = b"BKOFFS02"
#: Journals written before group records existed; read, then rewritten as _MAGIC.
_OLD_MAGIC = b"BKOFFS01"
_RECORD_HEADER = struct.Struct(">II")
_COMMIT, _DELETE_TOPIC, _GROUP, _GROUP_TOMBSTONE = 1, 2, 3, 4
_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_MEMBER_TIMEOUTS = struct.Struct(">ii")
_ENTRY_FIXED = struct.Struct(">iqiqi")  # partition, offset, leader_epoch, timestamp, meta_len
_PID_FILE = struct.Struct(">8sqI")  # magic, high-water mark, crc32 of the first 16 bytes
_PID_MAGIC = b"BKPIDS01"

OffsetEntry = tuple[str, int, int, int, str | None]
"""``(topic, partition, offset, leader_epoch, metadata)`` as passed to :meth:`commit`."""


@attrs.frozen
class Committed:
    """One committed offset as stored."""

    offset: int
    leader_epoch: int
    metadata: str | None
    timestamp_ms: int


@attrs.frozen
class StoredMember:
    """One member of a stored group, as JoinGroup/SyncGroup left it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    #: The member's metadata for the group's chosen protocol (what the leader saw).
    metadata: bytes
    #: What the leader's SyncGroup assigned to this member.
    assignment: bytes


@attrs.frozen
class StoredGroup:
    """A consumer group's membership as of its last Stable generation."""

    protocol_type: str
    generation: int
    protocol_name: str
    leader_id: str
    members: tuple[StoredMember, ...]


def _enc(text: str) -> bytes:
    # surrogatepass: any str the wire decoder produced (even with lone surrogates) round-trips.
    return text.encode("utf-8", "surrogatepass")


def _dec(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def _fsync_dir(path: str) -> None:
    """Make a create/rename/unlink in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync(fd: int) -> None:
    # fdatasync also flushes the size change of an append, which is all a reader needs.
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # pragma: no cover - macOS
        os.fsync(fd)


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` may write less than asked (signals, full disk): loop until done."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _frame(body: bytes) -> bytes:
    return _RECORD_HEADER.pack(len(body), zlib.crc32(body)) + body


def _encode_commit(group: bytes, entries: Sequence[tuple[bytes, int, Committed]]) -> bytes:
    parts = [_U8.pack(_COMMIT), _U16.pack(len(group)), group, _U32.pack(len(entries))]
    for topic, partition, value in entries:
        meta = None if value.metadata is None else _enc(value.metadata)
        parts.append(_U16.pack(len(topic)))
        parts.append(topic)
        parts.append(
            _ENTRY_FIXED.pack(
                partition,
                value.offset,
                value.leader_epoch,
                value.timestamp_ms,
                -1 if meta is None else len(meta),
            )
        )
        if meta is not None:
            parts.append(meta)
    return _frame(b"".join(parts))


def _encode_delete_topic(topic: bytes) -> bytes:
    return _frame(_U8.pack(_DELETE_TOPIC) + _U16.pack(len(topic)) + topic)


def _blob(data: bytes) -> bytes:
    return _U32.pack(len(data)) + data


def _encode_group(group: bytes, value: StoredGroup | None) -> bytes:
    """A group record, or the group's tombstone when ``value`` is None."""
    if value is None:
        return _frame(_U8.pack(_GROUP_TOMBSTONE) + _U16.pack(len(group)) + group)
    parts = [
        _U8.pack(_GROUP),
        _U16.pack(len(group)),
        group,
        _blob(_enc(value.protocol_type)),
        _I32.pack(value.generation),
        _blob(_enc(value.protocol_name)),
        _blob(_enc(value.leader_id)),
        _U32.pack(len(value.members)),
    ]
    for m in value.members:
        parts.append(_blob(_enc(m.member_id)))
        if m.group_instance_id is None:
            parts.append(_I32.pack(-1))
        else:
            instance = _enc(m.group_instance_id)
            parts.append(_I32.pack(len(instance)) + instance)
        parts.append(_blob(_enc(m.client_id)))
        parts.append(_blob(_enc(m.client_host)))
        parts.append(_MEMBER_TIMEOUTS.pack(m.session_timeout_ms, m.rebalance_timeout_ms))
        parts.append(_blob(m.metadata))
        parts.append(_blob(m.assignment))
    return _frame(b"".join(parts))


class _Reader:
    """Bounds-checked cursor over one record body; any overrun raises ValueError."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self._pos + n > len(self._data):
            raise ValueError("record body overrun")
        chunk = self._data[self._pos : self._pos + n]
        self._pos += n
        return chunk

    def unpack(self, fmt: struct.Struct) -> tuple[int, ...]:
        return fmt.unpack(self.take(fmt.size))

    def done(self) -> bool:
        return self._pos == len(self._data)

    def blob(self) -> bytes:
        (length,) = self.unpack(_U32)
        return self.take(length)

    def text(self) -> str:
        return _dec(self.blob())


@attrs.frozen
class _GroupUpdate:
    """A decoded group record (``value`` None: the group's tombstone)."""

    group_id: str
    value: StoredGroup | None


_Decoded = tuple[str, list[tuple[str, int, Committed]]] | tuple[None, str] | _GroupUpdate


def _decode_group(reader: _Reader, tombstone: bool) -> _GroupUpdate:
    (group_len,) = reader.unpack(_U16)
    group = _dec(reader.take(group_len))
    if tombstone:
        if not reader.done():
            raise ValueError("trailing bytes")
        return _GroupUpdate(group, None)
    protocol_type = reader.text()
    (generation,) = reader.unpack(_I32)
    protocol_name = reader.text()
    leader = reader.text()
    (count,) = reader.unpack(_U32)
    members: list[StoredMember] = []
    for _ in range(count):
        member_id = reader.text()
        (instance_len,) = reader.unpack(_I32)
        instance = None if instance_len < 0 else _dec(reader.take(instance_len))
        client_id = reader.text()
        client_host = reader.text()
        session_ms, rebalance_ms = reader.unpack(_MEMBER_TIMEOUTS)
        metadata = reader.blob()
        assignment = reader.blob()
        members.append(
            StoredMember(
                member_id,
                instance,
                client_id,
                client_host,
                session_ms,
                rebalance_ms,
                metadata,
                assignment,
            )
        )
    if not reader.done():
        raise ValueError("trailing bytes")
    return _GroupUpdate(
        group, StoredGroup(protocol_type, generation, protocol_name, leader, tuple(members))
    )


def _decode_body(body: bytes) -> _Decoded:
    """Decode a record body: ``(group, entries)`` for a commit, ``(None, topic)`` for a
    topic deletion, a :class:`_GroupUpdate` for a group record or tombstone. Raises
    ValueError (or UnicodeDecodeError) on a malformed body."""
    reader = _Reader(body)
    (kind,) = reader.unpack(_U8)
    if kind in (_GROUP, _GROUP_TOMBSTONE):
        return _decode_group(reader, kind == _GROUP_TOMBSTONE)
    if kind == _DELETE_TOPIC:
        (topic_len,) = reader.unpack(_U16)
        topic = _dec(reader.take(topic_len))
        if not reader.done():
            raise ValueError("trailing bytes")
        return None, topic
    if kind != _COMMIT:
        raise ValueError(f"unknown record kind {kind}")
    (group_len,) = reader.unpack(_U16)
    group = _dec(reader.take(group_len))
    (count,) = reader.unpack(_U32)
    entries: list[tuple[str, int, Committed]] = []
    for _ in range(count):
        (topic_len,) = reader.unpack(_U16)
        topic = _dec(reader.take(topic_len))
        partition, offset, epoch, timestamp, meta_len = reader.unpack(_ENTRY_FIXED)
        metadata = None if meta_len < 0 else _dec(reader.take(meta_len))
        entries.append((topic, partition, Committed(offset, epoch, metadata, timestamp)))
    if not reader.done():
        raise ValueError("trailing bytes")
    return group, entries


def _entry_size(topic: str, value: Committed) -> int:
    meta = 0 if value.metadata is None else len(_enc(value.metadata))
    return _U16.size + len(_enc(topic)) + _ENTRY_FIXED.size + meta


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
        self._failed: BaseException | None = None
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
            with contextlib.suppress(FileNotFoundError):
                os.unlink(cls._temp_path(path))
            flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
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
                _write_all(fd, _MAGIC)
                os.fsync(fd)
                _fsync_dir(directory)
                store._size = len(_MAGIC)
            else:
                store._replay()
            store._compact_at = store._next_compact_at(store._live_bytes())
            if store._size >= store._compact_at or store._old_format:
                store._maybe_compact(force=store._old_format)
                if store._failed is not None:
                    raise store._failed
        except OSError as exc:
            os.close(fd)
            raise StorageError(f"cannot recover offsets journal {path}: {exc}") from exc
        except BaseException:
            os.close(fd)
            raise
        return store

    @staticmethod
    def _temp_path(path: str) -> str:
        return path + ".compact-tmp"

    def _replay(self) -> None:
        chunks: list[bytes] = []
        os.lseek(self._fd, 0, os.SEEK_SET)
        while chunk := os.read(self._fd, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)
        if len(data) < len(_MAGIC):
            if not (_MAGIC.startswith(data) or _OLD_MAGIC.startswith(data)):
                raise StorageError(f"{self.path} is not a brokerd offsets journal")
            # Torn while being created: nothing was ever committed to it.
            os.ftruncate(self._fd, 0)
            _write_all(self._fd, _MAGIC)
            os.fsync(self._fd)
            self.truncated_bytes = len(data)
            self._size = len(_MAGIC)
            return
        magic = data[: len(_MAGIC)]
        if magic not in (_MAGIC, _OLD_MAGIC):
            raise StorageError(f"{self.path} is not a brokerd offsets journal")
        self._old_format = magic == _OLD_MAGIC
        pos = len(_MAGIC)
        while pos + _RECORD_HEADER.size <= len(data):
            length, crc = _RECORD_HEADER.unpack_from(data, pos)
            end = pos + _RECORD_HEADER.size + length
            if length > MAX_RECORD_BYTES or end > len(data):
                break
            body = data[pos + _RECORD_HEADER.size : end]
            if zlib.crc32(body) != crc:
                break
            try:
                decoded = _decode_body(body)
            except (ValueError, struct.error):
                break
            self._apply(decoded, _RECORD_HEADER.size + length)
            pos = end
        if pos != len(data):
            # Everything after the last whole, valid record is a write that never
            # completed (its commit was never acknowledged): cut it off for good, so that
            # new records do not land behind garbage.
            self.truncated_bytes = len(data) - pos
            os.ftruncate(self._fd, pos)
            os.fsync(self._fd)
        self._size = pos

    def _apply(self, decoded: _Decoded, size: int = 0) -> None:
        """Apply one decoded record to the map (caller holds the map lock or is open()).

        :param size: the record's framed size (group records only).
        """
        if isinstance(decoded, _GroupUpdate):
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
        """The latest stored membership of every group that was not tombstoned."""
        with self._lock:
            return dict(self._members)

    # -- writes (one writer at a time; blocking) ----------------------------------------

    def commit(self, group_id: str, entries: Sequence[OffsetEntry]) -> None:
        """Durably store one OffsetCommit: appended as one record and fsync'd, then visible.

        :param entries: ``(topic, partition, offset, leader_epoch, metadata)`` tuples.
        :raises ValueError: a group id, topic or metadata over its limit, or a number out
            of its wire range (nothing is written).
        :raises StorageError: the write or fsync failed; the store then refuses all
            further writes (after a failed fsync the kernel may have dropped the data).
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
        now_ms = int(self._clock() * 1000)
        encoded: list[bytes] = []
        updates: list[tuple[_Decoded, int]] = []
        for group_id, entries in commits:
            group = _enc(group_id)
            if len(group) > MAX_GROUP_ID_LENGTH:
                raise ValueError(f"group id longer than {MAX_GROUP_ID_LENGTH} bytes")
            if not entries:
                continue
            rows: list[tuple[bytes, int, Committed]] = []
            values: list[tuple[str, int, Committed]] = []
            for topic, partition, offset, leader_epoch, metadata in entries:
                self._check_entry(topic, partition, offset, leader_epoch, metadata)
                value = Committed(offset, leader_epoch, metadata, now_ms)
                rows.append((_enc(topic), partition, value))
                values.append((topic, partition, value))
            encoded.append(_encode_commit(group, rows))
            updates.append(((group_id, values), 0))
        group_records: list[tuple[bytes, _GroupUpdate]] = []
        for group_id, meta in groups:
            raw = _enc(group_id)
            if len(raw) > MAX_GROUP_ID_LENGTH:
                raise ValueError(f"group id longer than {MAX_GROUP_ID_LENGTH} bytes")
            if meta is not None:
                self._check_group(meta)
            group_records.append((_encode_group(raw, meta), _GroupUpdate(group_id, meta)))
        with self._write_lock:
            # Decided under the write lock: only writers change which groups are stored.
            with self._lock:
                stored = set(self._members)
            for record, change in group_records:
                if change.value is None and change.group_id not in stored:
                    continue
                if change.value is None:
                    stored.discard(change.group_id)
                else:
                    stored.add(change.group_id)
                encoded.append(record)
                updates.append((change, len(record)))
            if not encoded:
                return
            self._append(b"".join(encoded))
            with self._lock:
                for update, size in updates:
                    self._apply(update, size)
            if self._size >= self._compact_at:
                self._maybe_compact()

    def delete_topic(self, topic: str) -> None:
        """Durably forget every group's offsets for ``topic`` (the topic was deleted).

        :raises StorageError: as for :meth:`commit`.
        """
        raw = _enc(topic)
        if len(raw) > MAX_TOPIC_LENGTH:
            raise ValueError(f"topic longer than {MAX_TOPIC_LENGTH} bytes")
        with self._write_lock:
            with self._lock:
                present = any(k[0] == topic for offsets in self._groups.values() for k in offsets)
            if not present:
                return
            self._append(_encode_delete_topic(raw))
            with self._lock:
                self._apply((None, topic))

    def close(self) -> None:
        """Close the journal. Every commit that returned is already durable."""
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            os.close(self._fd)

    @staticmethod
    def _check_group(value: StoredGroup) -> None:
        if not _INT32_MIN <= value.generation <= _INT32_MAX:
            raise ValueError(f"generation {value.generation} out of range")
        for m in value.members:
            for timeout in (m.session_timeout_ms, m.rebalance_timeout_ms):
                if not _INT32_MIN <= timeout <= _INT32_MAX:
                    raise ValueError(f"timeout {timeout} out of range")
        # Lengths are u32 on disk; anything a Kafka request can carry fits, and
        # MAX_RECORD_BYTES bounds the record as a whole.
        if len(_encode_group(b"", value)) > MAX_RECORD_BYTES:
            raise ValueError("group metadata too large")

    @staticmethod
    def _check_entry(
        topic: str, partition: int, offset: int, leader_epoch: int, metadata: str | None
    ) -> None:
        if not topic or len(_enc(topic)) > MAX_TOPIC_LENGTH:
            raise ValueError(f"topic must be 1-{MAX_TOPIC_LENGTH} bytes")
        if not 0 <= partition <= _INT32_MAX:
            raise ValueError(f"partition {partition} out of range")
        if not _INT64_MIN <= offset <= _INT64_MAX:
            raise ValueError(f"offset {offset} out of range")
        if not _INT32_MIN <= leader_epoch <= _INT32_MAX:
            raise ValueError(f"leader epoch {leader_epoch} out of range")
        if metadata is not None and len(_enc(metadata)) > MAX_METADATA_LENGTH:
            raise ValueError(f"metadata longer than {MAX_METADATA_LENGTH} bytes")

    def _append(self, data: bytes) -> None:
        """Write and sync ``data`` at the end of the journal (caller holds the write lock)."""
        if self._closed:
            raise StorageError("offsets store is closed")
        if self._failed is not None:
            raise StorageError(f"offsets store failed earlier: {self._failed}")
        try:
            _write_all(self._fd, data)
            _sync(self._fd)
        except OSError as exc:
            self._failed = exc
            # Best effort: cut a partial record off so that nothing follows garbage. Replay
            # would drop it anyway, and no further append is allowed after this.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            raise StorageError(f"offsets journal write failed: {exc}") from exc
        self._size += len(data)

    # -- compaction ---------------------------------------------------------------------

    def _live_bytes(self) -> int:
        with self._lock:
            total = len(_MAGIC)
            for group, offsets in self._groups.items():
                total += _RECORD_HEADER.size + _U8.size + _U16.size + len(_enc(group))
                total += _U32.size
                total += sum(_entry_size(t, v) for (t, _), v in offsets.items())
            total += sum(self._member_bytes.values())
        return total

    def _next_compact_at(self, live_bytes: int) -> int:
        return max(self._compact_min_bytes, self._compact_ratio * live_bytes)

    def _maybe_compact(self, *, force: bool = False) -> None:
        """Rewrite the journal as one record per group if it is mostly dead records
        (``force``: regardless, e.g. to replace an old-format file header).

        Caller holds the write lock. A failure before the rename leaves the old journal in
        place and is only remembered (the commit that triggered it is already durable);
        a failure after the rename makes the store refuse writes, as a failed fsync does.
        """
        live = self._live_bytes()
        if not force and self._size < self._next_compact_at(live):
            # The live set itself grew: check again once the file grows by the ratio.
            self._compact_at = self._next_compact_at(live)
            return
        with self._lock:
            snapshot = {g: dict(offsets) for g, offsets in self._groups.items()}
            members = dict(self._members)
        records = [
            _encode_commit(_enc(group), [(_enc(t), p, v) for (t, p), v in sorted(offsets.items())])
            for group, offsets in sorted(snapshot.items())
        ]
        records += [_encode_group(_enc(g), value) for g, value in sorted(members.items())]
        data = _MAGIC + b"".join(records)
        temp = self._temp_path(self.path)
        directory = os.path.dirname(self.path)
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            # Opened before the rename, so the handle follows the new file's inode.
            new_fd = os.open(temp, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            self.last_compaction_error = exc
            # Do not retry on every commit: wait until the file grows by the ratio again.
            self._compact_at = self._size * self._compact_ratio
            if force and self._old_format:
                # Appending new record kinds behind the old header would let an older
                # brokerd truncate them (and every commit after them) as a torn tail.
                self._failed = exc
            return
        try:
            os.replace(temp, self.path)
            _fsync_dir(directory)
        except OSError as exc:
            os.close(new_fd)
            # After a failed rename or directory fsync we cannot tell which file a crash
            # would leave behind, so appending to either could lose acknowledged commits.
            self._failed = exc
            self.last_compaction_error = exc
            return
        os.close(self._fd)
        self._fd = new_fd
        self._size = len(data)
        self._compact_at = self._next_compact_at(len(data))
        self.compactions += 1
        self.last_compaction_error = None
        self._old_format = False


class ProducerIdAllocator:
    """Durable counter for Kafka producer ids (InitProducerId): never reuses an id.

    The file holds a high-water mark: every id below it may have been handed out. On
    start-up allocation resumes at the mark, so up to one block of ids is skipped after a
    restart, never repeated. :meth:`next_id` blocks on a rename + fsync once per
    :data:`PRODUCER_ID_BLOCK` ids; run it in a worker thread. Thread-safe.
    """

    def __init__(self, path: str, *, block_size: int = PRODUCER_ID_BLOCK) -> None:
        """
        :param path: the counter file, or the data directory (then
            :data:`PRODUCER_IDS_FILE_NAME` inside it is used).
        :raises StorageError: the file exists but is damaged (refusing is safer than
            restarting at 0 and reusing ids).
        """
        if os.path.isdir(path):
            path = os.path.join(path, PRODUCER_IDS_FILE_NAME)
        if block_size < 1:
            raise ValueError("block_size must be positive")
        self.path = os.path.abspath(path)
        self._block = block_size
        self._lock = threading.Lock()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path + ".tmp")
        self._limit = self._load()
        self._next = self._limit

    def _load(self) -> int:
        try:
            with open(self.path, "rb") as f:
                raw = f.read(_PID_FILE.size + 1)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise StorageError(f"cannot read {self.path}: {exc}") from exc
        if len(raw) != _PID_FILE.size:
            raise StorageError(f"{self.path} is damaged (size {len(raw)})")
        magic, mark, crc = _PID_FILE.unpack(raw)
        if magic != _PID_MAGIC or crc != zlib.crc32(raw[:16]) or mark < 0:
            raise StorageError(f"{self.path} is damaged")
        return int(mark)

    def _persist(self, mark: int) -> None:
        head = struct.pack(">8sq", _PID_MAGIC, mark)
        data = head + struct.pack(">I", zlib.crc32(head))
        temp = self.path + ".tmp"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, self.path)
            _fsync_dir(os.path.dirname(self.path))
        except OSError as exc:
            raise StorageError(f"cannot persist producer id mark: {exc}") from exc

    def next_id(self) -> int:
        """A producer id never returned before, in this run or an earlier one.

        :raises StorageError: the new high-water mark could not be made durable (no id is
            handed out beyond a durable mark), or the int64 id space is exhausted.
        """
        with self._lock:
            if self._next >= self._limit:
                mark = self._next + self._block
                if mark > _INT64_MAX:
                    raise StorageError("producer id space exhausted")
                self._persist(mark)
                self._limit = mark
            pid = self._next
            self._next += 1
            return pid

    def close(self) -> None:
        """Nothing to release: every handed-out id is already covered by a durable mark."""
