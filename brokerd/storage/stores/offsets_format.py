"""Byte format of the consumer-offsets journal: record encoding, decoding and validation.

Journal layout: an 8-byte file magic (format name and version), then records, each
``u32 body_length, u32 crc32(body), body`` (big-endian; CRC-32 as in :func:`zlib.crc32`).
Record bodies, by their first byte:

- 1, commit: ``u16 group_len, group, u32 count``, then ``count`` times ``u16 topic_len,
  topic, i32 partition, i64 offset, i32 leader_epoch, i64 commit_timestamp_ms,
  i32 metadata_len (-1 = null), metadata``;
- 2, topic deletion: ``u16 topic_len, topic``;
- 3, group membership: ``u16 group_len, group, str protocol_type, i32 generation,
  str protocol_name, str leader, u32 count``, then ``count`` times ``str member_id,
  nstr group_instance_id, str client_id, str client_host, i32 session_timeout_ms,
  i32 rebalance_timeout_ms, bytes metadata, bytes assignment``;
- 4, group tombstone: ``u16 group_len, group``;
- 5, group deletion (DeleteGroups): ``u16 group_len, group``: forget the group's
  membership record and every committed offset of it;
- 6, offset deletion (OffsetDelete): ``u16 group_len, group, u32 count``, then ``count``
  times ``u16 topic_len, topic, i32 partition``;
- 7, consumer-protocol group state (KIP-848): ``u16 group_len, group, bytes state``, the
  state encoded by the Kafka layer (opaque here, like a classic member's assignment);
- 8, consumer-protocol group tombstone: ``u16 group_len, group``;
- 9, a group's dynamic configs (the GROUP config resource): ``u16 group_len, group,
  u32 count``, then ``count`` times ``str name, str value`` (count 0: none left);

where ``str`` is ``u32 length`` + UTF-8, ``nstr`` is ``i32 length`` (-1 = null) + UTF-8,
and ``bytes`` is ``u32 length`` + raw bytes. Text is encoded with ``surrogatepass`` so
that any ``str`` the wire decoders produced round-trips.

A group record with no members keeps an Empty group's protocol type and generation, so
the generation keeps counting across a restart, as Kafka's does.

Format history: ``BKOFFS01`` (commit and topic-deletion records), ``BKOFFS02`` (plus kinds
3 and 4) and ``BKOFFS03`` (plus kinds 5 and 6) are still read; the store rewrites them as
``BKOFFS04`` (plus kinds 7 to 9) at once, so an older brokerd refuses the file instead of
truncating it at the first record kind it does not know.

What this module does: the value types stored, the encoders, a bounds-checked decoder that
refuses anything malformed, a scan of a journal's bytes that stops at the first torn or
corrupt record, and the range checks that keep a value from being written that the format
cannot carry. What it does not do: any I/O, locking, or deciding when to compact
(``stores/offsets.py``). No Twisted.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence

import attrs

from brokerd.names import MAX_GROUP_ID_LENGTH, MAX_TOPIC_LENGTH
from brokerd.storage.journal.records import RECORD_HEADER, BodyReader, frame, iter_frames

__all__ = [
    "MAGIC",
    "MAX_METADATA_LENGTH",
    "MAX_RECORD_BYTES",
    "OLD_MAGIC",
    "OLD_MAGICS",
    "CommitOp",
    "Committed",
    "ConsumerGroupUpdate",
    "Decoded",
    "GroupConfigUpdate",
    "GroupDeletion",
    "GroupUpdate",
    "JournalOp",
    "OffsetDeletion",
    "OffsetEntry",
    "StoredGroup",
    "StoredMember",
    "check_entry",
    "check_group",
    "decode_body",
    "encode_commit",
    "encode_delete_group",
    "encode_delete_offsets",
    "encode_delete_topic",
    "encode_group",
    "encode_live",
    "encode_ops",
    "encode_text",
    "iter_records",
    "live_size",
]

#: Magic of the current format.
MAGIC = b"BKOFFS04"
#: Journals written before group records existed; read, then rewritten as MAGIC.
OLD_MAGIC = b"BKOFFS01"
#: Every older format still read (then rewritten as MAGIC): before group records, before
#: group and offset deletions, and before consumer-protocol group records.
OLD_MAGICS = (OLD_MAGIC, b"BKOFFS02", b"BKOFFS03")

#: Kafka's ``offset.metadata.max.bytes``: longer commit metadata is refused
#: (OFFSET_METADATA_TOO_LARGE) by the coordinator before it reaches the store.
MAX_METADATA_LENGTH = 4096

#: A record claiming to be longer than this is garbage, not a commit: stop replay there
#: rather than trust a length that a torn or overwritten header produced.
MAX_RECORD_BYTES = 64 << 20

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_COMMIT, _DELETE_TOPIC, _GROUP, _GROUP_TOMBSTONE = 1, 2, 3, 4
_DELETE_GROUP, _DELETE_OFFSETS = 5, 6
_CONSUMER_GROUP, _CONSUMER_GROUP_TOMBSTONE, _GROUP_CONFIGS = 7, 8, 9
_PARTITION = struct.Struct(">i")
_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_MEMBER_TIMEOUTS = struct.Struct(">ii")
_ENTRY_FIXED = struct.Struct(">iqiqi")  # partition, offset, leader_epoch, timestamp, meta_len

OffsetEntry = tuple[str, int, int, int, str | None]
"""``(topic, partition, offset, leader_epoch, metadata)`` as passed to ``OffsetStore.commit``."""


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


def encode_text(text: str) -> bytes:
    """UTF-8 with ``surrogatepass``: any str the wire decoder produced (even with lone
    surrogates) round-trips."""
    return text.encode("utf-8", "surrogatepass")


def _dec(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def _frame(body: bytes) -> bytes:
    # Encoders check the record size themselves (check_group, the range checks).
    return frame(body, len(body), "offsets")


def encode_commit(group: bytes, entries: Sequence[tuple[bytes, int, Committed]]) -> bytes:
    parts = [_U8.pack(_COMMIT), _U16.pack(len(group)), group, _U32.pack(len(entries))]
    for topic, partition, value in entries:
        meta = None if value.metadata is None else encode_text(value.metadata)
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


def encode_delete_topic(topic: bytes) -> bytes:
    return _frame(_U8.pack(_DELETE_TOPIC) + _U16.pack(len(topic)) + topic)


def encode_delete_group(group: bytes) -> bytes:
    return _frame(_U8.pack(_DELETE_GROUP) + _U16.pack(len(group)) + group)


def encode_delete_offsets(group: bytes, partitions: Sequence[tuple[bytes, int]]) -> bytes:
    parts = [_U8.pack(_DELETE_OFFSETS), _U16.pack(len(group)), group, _U32.pack(len(partitions))]
    for topic, partition in partitions:
        parts += [_U16.pack(len(topic)), topic, _PARTITION.pack(partition)]
    return _frame(b"".join(parts))


def _blob(data: bytes) -> bytes:
    return _U32.pack(len(data)) + data


def encode_group(group: bytes, value: StoredGroup | None) -> bytes:
    """A group record, or the group's tombstone when ``value`` is None."""
    if value is None:
        return _frame(_U8.pack(_GROUP_TOMBSTONE) + _U16.pack(len(group)) + group)
    parts = [
        _U8.pack(_GROUP),
        _U16.pack(len(group)),
        group,
        _blob(encode_text(value.protocol_type)),
        _I32.pack(value.generation),
        _blob(encode_text(value.protocol_name)),
        _blob(encode_text(value.leader_id)),
        _U32.pack(len(value.members)),
    ]
    for m in value.members:
        parts.append(_blob(encode_text(m.member_id)))
        if m.group_instance_id is None:
            parts.append(_I32.pack(-1))
        else:
            instance = encode_text(m.group_instance_id)
            parts.append(_I32.pack(len(instance)) + instance)
        parts.append(_blob(encode_text(m.client_id)))
        parts.append(_blob(encode_text(m.client_host)))
        parts.append(_MEMBER_TIMEOUTS.pack(m.session_timeout_ms, m.rebalance_timeout_ms))
        parts.append(_blob(m.metadata))
        parts.append(_blob(m.assignment))
    return _frame(b"".join(parts))


def encode_consumer_group(group: bytes, state: bytes | None) -> bytes:
    """A consumer-protocol group's state record, or its tombstone when ``state`` is None."""
    if state is None:
        return _frame(_U8.pack(_CONSUMER_GROUP_TOMBSTONE) + _U16.pack(len(group)) + group)
    return _frame(_U8.pack(_CONSUMER_GROUP) + _U16.pack(len(group)) + group + _blob(state))


def encode_group_configs(group: bytes, configs: Mapping[str, str]) -> bytes:
    """A group's dynamic configs (empty: none left)."""
    parts = [_U8.pack(_GROUP_CONFIGS), _U16.pack(len(group)), group, _U32.pack(len(configs))]
    for name, value in sorted(configs.items()):
        parts += [_blob(encode_text(name)), _blob(encode_text(value))]
    return _frame(b"".join(parts))


class _Reader(BodyReader):
    def blob(self) -> bytes:
        (length,) = self.unpack(_U32)
        return self.take(length)

    def text(self) -> str:
        return _dec(self.blob())


@attrs.frozen
class GroupUpdate:
    """A decoded group record (``value`` None: the group's tombstone)."""

    group_id: str
    value: StoredGroup | None


@attrs.frozen
class ConsumerGroupUpdate:
    """A consumer-protocol group's state as the Kafka layer encoded it (``state`` None:
    its tombstone)."""

    group_id: str
    state: bytes | None


@attrs.frozen
class GroupConfigUpdate:
    """A group's dynamic configs, all of them (empty: none left)."""

    group_id: str
    configs: Mapping[str, str]


@attrs.frozen
class GroupDeletion:
    """A decoded group deletion: forget the group's membership and offsets."""

    group_id: str


@attrs.frozen
class OffsetDeletion:
    """A decoded offset deletion: forget these ``(topic, partition)`` of one group."""

    group_id: str
    partitions: tuple[tuple[str, int], ...]


Decoded = (
    tuple[str, list[tuple[str, int, Committed]]]
    | tuple[None, str]
    | GroupUpdate
    | ConsumerGroupUpdate
    | GroupConfigUpdate
    | GroupDeletion
    | OffsetDeletion
)


def _decode_group_configs(reader: _Reader) -> GroupConfigUpdate:
    (group_len,) = reader.unpack(_U16)
    group = _dec(reader.take(group_len))
    (count,) = reader.unpack(_U32)
    configs: dict[str, str] = {}
    for _ in range(count):  # each entry takes at least 8 bytes: take() bounds the loop
        name = reader.text()
        configs[name] = reader.text()
    if not reader.done():
        raise ValueError("trailing bytes")
    return GroupConfigUpdate(group, configs)


def _decode_consumer_group(reader: _Reader, tombstone: bool) -> ConsumerGroupUpdate:
    (group_len,) = reader.unpack(_U16)
    group = _dec(reader.take(group_len))
    state = None if tombstone else reader.blob()
    if not reader.done():
        raise ValueError("trailing bytes")
    return ConsumerGroupUpdate(group, state)


def _decode_deletion(reader: _Reader, kind: int) -> GroupDeletion | OffsetDeletion:
    (group_len,) = reader.unpack(_U16)
    group = _dec(reader.take(group_len))
    if kind == _DELETE_GROUP:
        if not reader.done():
            raise ValueError("trailing bytes")
        return GroupDeletion(group)
    (count,) = reader.unpack(_U32)
    partitions: list[tuple[str, int]] = []
    for _ in range(count):  # each entry takes at least 6 bytes: take() bounds the loop
        (topic_len,) = reader.unpack(_U16)
        topic = _dec(reader.take(topic_len))
        (partition,) = reader.unpack(_PARTITION)
        partitions.append((topic, partition))
    if not reader.done():
        raise ValueError("trailing bytes")
    return OffsetDeletion(group, tuple(partitions))


def _decode_group(reader: _Reader, tombstone: bool) -> GroupUpdate:
    (group_len,) = reader.unpack(_U16)
    group = _dec(reader.take(group_len))
    if tombstone:
        if not reader.done():
            raise ValueError("trailing bytes")
        return GroupUpdate(group, None)
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
    return GroupUpdate(
        group, StoredGroup(protocol_type, generation, protocol_name, leader, tuple(members))
    )


def decode_body(body: bytes) -> Decoded:
    """Decode a record body: ``(group, entries)`` for a commit, ``(None, topic)`` for a
    topic deletion, a :class:`GroupUpdate` for a group record or tombstone, a
    :class:`GroupDeletion` or an :class:`OffsetDeletion`. Raises
    ValueError (or UnicodeDecodeError) on a malformed body."""
    reader = _Reader(body)
    (kind,) = reader.unpack(_U8)
    if kind in (_GROUP, _GROUP_TOMBSTONE):
        return _decode_group(reader, kind == _GROUP_TOMBSTONE)
    if kind in (_DELETE_GROUP, _DELETE_OFFSETS):
        return _decode_deletion(reader, kind)
    if kind in (_CONSUMER_GROUP, _CONSUMER_GROUP_TOMBSTONE):
        return _decode_consumer_group(reader, kind == _CONSUMER_GROUP_TOMBSTONE)
    if kind == _GROUP_CONFIGS:
        return _decode_group_configs(reader)
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
    """Encoded size of one entry of a commit record."""
    meta = 0 if value.metadata is None else len(encode_text(value.metadata))
    return _U16.size + len(encode_text(topic)) + _ENTRY_FIXED.size + meta


def live_size(
    offsets: Mapping[str, Mapping[tuple[str, int], Committed]], member_bytes: Mapping[str, int]
) -> int:
    """Size of the records of a journal holding only ``offsets`` (one commit record per
    group) and group records of the given framed sizes: what compaction would write,
    after the magic."""
    total = 0
    for group, entries in offsets.items():
        total += RECORD_HEADER.size + _U8.size + _U16.size + len(encode_text(group))
        total += _U32.size
        total += sum(_entry_size(t, v) for (t, _), v in entries.items())
    return total + sum(member_bytes.values())


def encode_live(
    offsets: Mapping[str, Mapping[tuple[str, int], Committed]],
    members: Mapping[str, StoredGroup],
    consumer_groups: Mapping[str, bytes] | None = None,
    group_configs: Mapping[str, Mapping[str, str]] | None = None,
) -> bytes:
    """The records of a compacted journal (after its magic): one commit record per
    group, then one membership record per group, then one state record per
    consumer-protocol group, each in sorted order."""
    records = [
        encode_commit(
            encode_text(group),
            [(encode_text(t), p, v) for (t, p), v in sorted(entries.items())],
        )
        for group, entries in sorted(offsets.items())
    ]
    records += [encode_group(encode_text(g), value) for g, value in sorted(members.items())]
    records += [
        encode_consumer_group(encode_text(g), state)
        for g, state in sorted((consumer_groups or {}).items())
    ]
    records += [
        encode_group_configs(encode_text(g), configs)
        for g, configs in sorted((group_configs or {}).items())
    ]
    return b"".join(records)


def iter_records(data: bytes, pos: int) -> Iterator[tuple[Decoded, int]]:
    """Decode the records of ``data`` from ``pos`` on, yielding each with the position
    after it. Stops silently at the first record that is incomplete, claims more than
    :data:`MAX_RECORD_BYTES`, fails its CRC or does not decode: everything from there on
    is a write that never completed."""
    for body, _start, end in iter_frames(data, pos, MAX_RECORD_BYTES):
        try:
            decoded = decode_body(body)
        except (ValueError, struct.error):
            return
        yield decoded, end


def check_group(value: StoredGroup) -> None:
    """Raise ValueError if ``value`` holds a number the format cannot carry or encodes
    to a record larger than :data:`MAX_RECORD_BYTES`."""
    if not _INT32_MIN <= value.generation <= _INT32_MAX:
        raise ValueError(f"generation {value.generation} out of range")
    for m in value.members:
        for timeout in (m.session_timeout_ms, m.rebalance_timeout_ms):
            if not _INT32_MIN <= timeout <= _INT32_MAX:
                raise ValueError(f"timeout {timeout} out of range")
    # Lengths are u32 on disk; anything a Kafka request can carry fits, and
    # MAX_RECORD_BYTES bounds the record as a whole.
    if len(encode_group(b"", value)) > MAX_RECORD_BYTES:
        raise ValueError("group metadata too large")


@attrs.frozen
class CommitOp:
    """One OffsetCommit's accepted entries, as ``OffsetStore.write_batch`` takes them."""

    group_id: str
    entries: tuple[OffsetEntry, ...]


#: What ``OffsetStore.write_batch`` writes, in order: a commit, a membership record (value
#: None: tombstone), a consumer-protocol group's state, a group deletion, an offset
#: deletion.
JournalOp = (
    CommitOp | GroupUpdate | ConsumerGroupUpdate | GroupConfigUpdate | GroupDeletion
    | OffsetDeletion
)


def encode_ops(ops: Sequence[JournalOp], now_ms: int) -> list[tuple[bytes, Decoded]]:
    """Each op's framed record with what replaying it means (commits stamped ``now_ms``;
    an empty commit has none). Raises ValueError, before anything is encoded for
    writing, if any op breaks a limit or its wire range."""
    out: list[tuple[bytes, Decoded]] = []
    for op in ops:
        group = encode_text(op.group_id)
        if len(group) > MAX_GROUP_ID_LENGTH:
            raise ValueError(f"group id longer than {MAX_GROUP_ID_LENGTH} bytes")
        if isinstance(op, CommitOp):
            if not op.entries:
                continue
            rows: list[tuple[bytes, int, Committed]] = []
            values: list[tuple[str, int, Committed]] = []
            for topic, partition, offset, leader_epoch, metadata in op.entries:
                check_entry(topic, partition, offset, leader_epoch, metadata)
                value = Committed(offset, leader_epoch, metadata, now_ms)
                rows.append((encode_text(topic), partition, value))
                values.append((topic, partition, value))
            out.append((encode_commit(group, rows), (op.group_id, values)))
        elif isinstance(op, GroupUpdate):
            if op.value is not None:
                check_group(op.value)
            out.append((encode_group(group, op.value), op))
        elif isinstance(op, ConsumerGroupUpdate):
            record = encode_consumer_group(group, op.state)
            if len(record) > MAX_RECORD_BYTES:
                raise ValueError("consumer group state too large")
            out.append((record, op))
        elif isinstance(op, GroupConfigUpdate):
            record = encode_group_configs(group, op.configs)
            if len(record) > MAX_RECORD_BYTES:
                raise ValueError("group configs too large")
            out.append((record, op))
        elif isinstance(op, GroupDeletion):
            out.append((encode_delete_group(group), op))
        else:
            parts: list[tuple[bytes, int]] = []
            for topic, partition in op.partitions:
                raw = encode_text(topic)
                if not raw or len(raw) > MAX_TOPIC_LENGTH:
                    raise ValueError(f"topic must be 1-{MAX_TOPIC_LENGTH} bytes")
                if not 0 <= partition <= _INT32_MAX:
                    raise ValueError(f"partition {partition} out of range")
                parts.append((raw, partition))
            out.append((encode_delete_offsets(group, parts), op))
    return out


def check_entry(
    topic: str, partition: int, offset: int, leader_epoch: int, metadata: str | None
) -> None:
    """Raise ValueError if one commit entry breaks a limit or its wire range."""
    if not topic or len(encode_text(topic)) > MAX_TOPIC_LENGTH:
        raise ValueError(f"topic must be 1-{MAX_TOPIC_LENGTH} bytes")
    if not 0 <= partition <= _INT32_MAX:
        raise ValueError(f"partition {partition} out of range")
    if not _INT64_MIN <= offset <= _INT64_MAX:
        raise ValueError(f"offset {offset} out of range")
    if not _INT32_MIN <= leader_epoch <= _INT32_MAX:
        raise ValueError(f"leader epoch {leader_epoch} out of range")
    if metadata is not None and len(encode_text(metadata)) > MAX_METADATA_LENGTH:
        raise ValueError(f"metadata longer than {MAX_METADATA_LENGTH} bytes")
