# -*- test-case-name: tests.kafka.groups.test_store -*-
"""The group coordinator's side of the offsets journal: what it writes and in which order.

- :func:`check_offsets` is the one place where an OffsetCommit's partitions are judged
  (topic name, number ranges, metadata length) and given Kafka error codes; only what it
  accepts reaches the store.
- :func:`fetch_rows` answers an OffsetFetch from the store's memory.
- :func:`stored_group` / :func:`restored_group` map a group to the
  :class:`~brokerd.storage.stores.offsets.StoredGroup` record the journal keeps of its last
  Stable generation (or of an Empty group: protocol type and generation), and back.
- :class:`CommitQueue` is the group coordinator's face of the coordinator runtime's
  ordered writer: commits, consumer-group records and group or offset deletions queue
  in the reactor and are written one batch at a time, each batch in one store call (one
  journal write and one fsync: group commit), so they reach the journal in arrival
  order. Classic group records reach the same writer from the coordinator's runtime
  (:class:`~brokerd.coordinator_runtime.CoordinatorRuntime`), in the same order.

What this module does not do: group-membership rules (whether a member may commit is the
coordinator's call), reading offsets back, or any blocking I/O in the reactor thread (the
store runs through the injected ``run_blocking``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.coordinator_runtime import OrderedJournalWriter
from brokerd.errors import InvalidTopic, StorageError
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.groups.state import GroupMetadata, GroupState, Member
from brokerd.names import validate_topic_name
from brokerd.storage.stores.offsets import (
    MAX_METADATA_LENGTH,
    CommitOp,
    ConsumerGroupUpdate,
    GroupConfigUpdate,
    GroupDeletion,
    JournalOp,
    OffsetDeletion,
    OffsetStore,
    StoredGroup,
    StoredMember,
)

OffsetEntry = tuple[str, int, int, int, str | None]
"""``(topic, partition, offset, leader_epoch, metadata)`` of one OffsetCommit partition."""

#: Results of one OffsetCommit: a Kafka error code per ``(topic, partition)``.
CommitResults = dict[tuple[str, int], int]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

#: What a commit or deletion whose journal write failed is answered: Kafka's group
#: coordinator answers a storage error on its log append NOT_COORDINATOR, which clients
#: treat as retriable (they look the coordinator up again and retry).
STORE_FAILED = ErrorCode.NOT_COORDINATOR


def _valid_topic(topic: str) -> bool:
    try:
        validate_topic_name(topic)
    except InvalidTopic:
        return False
    return True


def offset_entry_error(entry: OffsetEntry) -> ErrorCode:
    """NONE if the store can take ``entry``, else the Kafka error for its partition."""
    topic, partition, offset, leader_epoch, metadata = entry
    if metadata is not None and (
        len(metadata.encode("utf-8", "surrogatepass")) > MAX_METADATA_LENGTH
    ):
        return ErrorCode.OFFSET_METADATA_TOO_LARGE
    if not (
        _valid_topic(topic)
        and 0 <= partition <= _INT32_MAX
        and _INT64_MIN <= offset <= _INT64_MAX
        and _INT32_MIN <= leader_epoch <= _INT32_MAX
    ):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return ErrorCode.NONE


def check_offsets(offsets: list[OffsetEntry]) -> tuple[CommitResults, list[OffsetEntry]]:
    """Judge every partition of one OffsetCommit: the codes of all of them (NONE for the
    accepted ones, to be replaced if the write fails) and the accepted entries."""
    results: CommitResults = {}
    accepted: list[OffsetEntry] = []
    for entry in offsets:
        code = offset_entry_error(entry)
        results[(entry[0], entry[1])] = int(code)
        if code is ErrorCode.NONE:
            accepted.append(entry)
    return results, accepted


def fetch_rows(
    offsets: OffsetStore, group_id: str, partitions: list[tuple[str, int]] | None, code: ErrorCode
) -> list[tuple[str, int, int, int, str, int]]:
    """An OffsetFetch answered from the store's memory: ``(topic, partition, offset,
    leader_epoch, metadata, error_code)`` per partition, ``-1, -1, ""`` where nothing is
    committed, ``code`` on every row when it is an error (then nothing is read)."""
    if partitions is None:
        if code is not ErrorCode.NONE:
            return []
        committed = offsets.committed(group_id)
        return [
            (topic, partition, offset, epoch, metadata or "", 0)
            for (topic, partition), (offset, epoch, metadata) in sorted(committed.items())
        ]
    out: list[tuple[str, int, int, int, str, int]] = []
    for topic, partition in partitions:
        found = None
        if code is ErrorCode.NONE:
            found = offsets.fetch(group_id, topic, partition)
        if found is None:
            out.append((topic, partition, -1, -1, "", int(code)))
        else:
            offset, epoch, metadata = found
            out.append((topic, partition, offset, epoch, metadata or "", 0))
    return out


def commit_member_error(
    group: GroupMetadata | None, generation_id: int, member_id: str, instance_id: str | None
) -> ErrorCode:
    """OffsetCommit's group rules (the caller has checked the coordinator and group id)."""
    if group is not None and group.fenced(instance_id, member_id):
        return ErrorCode.FENCED_INSTANCE_ID
    if group is None or not group.members:
        # Nobody is a member: only a commit from outside the group protocol (generation
        # -1) makes sense; a member of a generation that no longer exists must re-join.
        return ErrorCode.NONE if generation_id < 0 else ErrorCode.UNKNOWN_MEMBER_ID
    member = group.members.get(member_id)
    if generation_id < 0 or member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation_id != group.generation:
        return ErrorCode.ILLEGAL_GENERATION
    if group.state is GroupState.COMPLETING_REBALANCE:
        return ErrorCode.REBALANCE_IN_PROGRESS
    # Stable, or PreparingRebalance: Kafka stores the commit; refusing it would make
    # clients re-deliver what they already processed.
    return ErrorCode.NONE


def txn_member_error(
    group: GroupMetadata | None, generation_id: int, member_id: str, instance_id: str | None
) -> ErrorCode:
    """TxnOffsetCommit's group rules (KIP-447, as Kafka's ``doTxnCommitOffsets``): a
    producer outside the group protocol (generation -1, no member id) always passes; a
    static member's old incarnation is fenced; a member id the group does not know is
    refused; a generation given (>= 0) must be the group's current one (0 for a group
    that does not exist yet). Unlike OffsetCommit, a rebalance in progress is no reason
    to refuse: the offsets are stored only when the transaction commits."""
    if group is not None and group.fenced(instance_id, member_id):
        return ErrorCode.FENCED_INSTANCE_ID
    if member_id and (group is None or member_id not in group.members):
        return ErrorCode.UNKNOWN_MEMBER_ID
    current = 0 if group is None else group.generation
    if generation_id >= 0 and generation_id != current:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


# -- persistence mapping -------------------------------------------------------------------


def stored_group(group: GroupMetadata) -> StoredGroup:
    """The journal record of ``group``'s current (Stable) generation, or of an Empty
    group (no members: its protocol type and generation only)."""
    protocol = group.protocol_name or ""
    return StoredGroup(
        protocol_type=group.protocol_type or "",
        generation=group.generation,
        protocol_name=protocol,
        leader_id=group.leader_id or "",
        members=tuple(
            StoredMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                session_timeout_ms=m.session_timeout_ms,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                metadata=m.metadata_for(protocol),
                assignment=m.assignment,
            )
            for m in group.members.values()
        ),
    )


def restored_group(group_id: str, stored: StoredGroup) -> GroupMetadata:
    """``stored`` rebuilt as a Stable group (no timers armed), or as an Empty group with
    its generation and protocol type if it has no members."""
    if not stored.members:
        return GroupMetadata(
            group_id,
            generation=stored.generation,
            protocol_type=stored.protocol_type or None,
        )
    group = GroupMetadata(
        group_id,
        state=GroupState.STABLE,
        generation=stored.generation,
        protocol_type=stored.protocol_type,
        protocol_name=stored.protocol_name,
        leader_id=stored.leader_id,
    )
    for m in stored.members:
        member = Member(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            session_timeout_ms=m.session_timeout_ms,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            # Only the chosen protocol's metadata is kept (it is all the leader ever
            # sees); a re-join brings the member's full list again.
            protocols=[(stored.protocol_name, m.metadata)],
            assignment=m.assignment,
        )
        group.add_member(member, stored.protocol_type)
    if group.leader_id not in group.members:
        group.leader_id = next(iter(group.members))
    return group


# -- the write queue -----------------------------------------------------------------------


@attrs.define(eq=False)
class _PendingCommit:
    group_id: str
    entries: list[OffsetEntry]
    results: CommitResults
    waiter: Deferred[CommitResults]


@attrs.define(eq=False)
class _AwaitedRecord:
    """A record its requester waits for (DeleteGroups, OffsetDelete, a group's configs);
    ``waiter`` fires with an error code once it is durable."""

    op: GroupDeletion | OffsetDeletion | GroupConfigUpdate
    waiter: Deferred[int]


class CommitQueue:
    """Ordered, batched writes of commits, group records and deletions to an
    :class:`OffsetStore`, through the coordinator runtime's
    :class:`~brokerd.coordinator_runtime.OrderedJournalWriter`: everything queued
    while a write runs goes, in arrival order, into the next one (one journal write and
    one fsync). A failed write fails its own batch only (each commit answered with
    :data:`STORE_FAILED`; a lost group record only costs a rebalance after a restart).

    :param offsets: the store (already open).
    :param run_blocking: ``run_blocking(f, *args) -> Deferred`` runs ``f`` off the reactor.
    """

    _log = Logger()

    def __init__(self, *, offsets: OffsetStore, run_blocking: Callable[..., Deferred[Any]]) -> None:
        self._journal: OrderedJournalWriter[JournalOp] = OrderedJournalWriter(
            offsets.write_batch, run_blocking, None, name="offsets journal"
        )
        #: Commits and deletions not yet answered, with their answers on refusal.
        self._waiting: dict[Deferred[None], _PendingCommit | _AwaitedRecord] = {}
        #: Each consumer group's record still waiting for a write (superseded by a
        #: newer one of the group).
        self._group_records: dict[str, Deferred[None]] = {}

    @property
    def journal(self) -> OrderedJournalWriter[JournalOp]:
        """The offsets journal's ordered writer (the group coordinator's runtime writes
        its group records through it)."""
        return self._journal

    def commit(
        self, group_id: str, entries: list[OffsetEntry], results: CommitResults
    ) -> Deferred[CommitResults]:
        """Queue accepted ``entries``; fires with ``results`` once they are durable (with
        :data:`STORE_FAILED` for ``entries`` if the journal write failed)."""
        d: Deferred[CommitResults] = Deferred()
        self._await(_PendingCommit(group_id, entries, results, d),
                    CommitOp(group_id, tuple(entries)))
        return d

    def store_consumer_group(self, group_id: str, state: bytes | None) -> None:
        """Queue a consumer-protocol group's state (None: tombstone); only the latest
        queued one per group is written."""
        self._store_latest(ConsumerGroupUpdate(group_id, state))

    def _store_latest(self, record: ConsumerGroupUpdate) -> None:
        # Only the latest record per group matters; an earlier one still waiting is
        # superseded (even across a queued deletion of the group: the deletion erases
        # it anyway).
        key = record.group_id
        earlier = self._group_records.pop(key, None)
        if earlier is not None:
            self._journal.withdraw(earlier)
        d = self._journal.submit([record])
        self._group_records[key] = d

        def written(result: object) -> None:
            if self._group_records.get(key) is d:
                del self._group_records[key]
            if isinstance(result, Failure):
                self._failed(result)

        d.addBoth(written)

    def store_group_configs(self, group_id: str, configs: dict[str, str]) -> Deferred[int]:
        """Queue a group's whole set of dynamic configs; fires with 0 once durable, or
        with :data:`STORE_FAILED`."""
        d: Deferred[int] = Deferred()
        op = GroupConfigUpdate(group_id, configs)
        self._await(_AwaitedRecord(op, d), op)
        return d

    def delete(self, op: GroupDeletion | OffsetDeletion) -> Deferred[int]:
        """Queue a group or offset deletion; fires with 0 once it is durable (and
        applied), or with :data:`STORE_FAILED` if the journal write failed. Commits queued
        before it are deleted with it; commits queued after it survive."""
        d: Deferred[int] = Deferred()
        self._await(_AwaitedRecord(op, d), op)
        return d

    def refuse_queued(self, code: ErrorCode) -> list[tuple[Deferred[Any], object]]:
        """Take every commit and deletion not yet being written out of the queue; return
        the answers (``code`` for their entries) for the caller to deliver. Group records
        stay."""
        answers: list[tuple[Deferred[Any], object]] = []
        for written, item in list(self._waiting.items()):
            if self._journal.withdraw(written):
                del self._waiting[written]
                answers.append((item.waiter, _answer(item, code)))
        return answers

    def drained(self) -> Deferred[None]:
        """A Deferred that fires once the queue is empty and no write is running."""
        return self._journal.drained()

    def _await(self, item: _PendingCommit | _AwaitedRecord, op: JournalOp) -> None:
        written = self._journal.submit([op])
        self._waiting[written] = item

        def answer(result: object) -> None:
            del self._waiting[written]
            code = ErrorCode.NONE
            if isinstance(result, Failure):
                code = self._failed(result)
            if not item.waiter.called:
                item.waiter.callback(_answer(item, code))

        written.addBoth(answer)

    def _failed(self, failure: Failure) -> ErrorCode:
        # A storage error was already logged by the store, at a bounded rate and without
        # a traceback (a full disk fails every commit until space returns).
        if isinstance(failure.value, StorageError):
            return STORE_FAILED
        self._log.failure("writing consumer offsets / group metadata failed", failure)
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _answer(item: _PendingCommit | _AwaitedRecord, code: ErrorCode) -> Any:
    """A queued request's answer: its results with ``code`` for its entries (a commit),
    or ``code`` (a deletion or configs update)."""
    if isinstance(item, _AwaitedRecord):
        return int(code)
    answer = dict(item.results)
    if code is not ErrorCode.NONE:
        for topic, partition, *_ in item.entries:
            answer[(topic, partition)] = int(code)
    return answer


__all__ = [
    "STORE_FAILED",
    "CommitQueue",
    "CommitResults",
    "OffsetEntry",
    "check_offsets",
    "commit_member_error",
    "fetch_rows",
    "offset_entry_error",
    "restored_group",
    "stored_group",
    "txn_member_error",
]
