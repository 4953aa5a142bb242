"""Operator views of share groups (KIP-932 queues): figures per group and partition.

:class:`ShareGroupInspector` reads the share engine (``brokerd.core.share``) and the open
logs, synchronously on the reactor thread, and builds :class:`ShareGroupView` s: per
partition the share-partition's start and end, its **backlog** (records from the start
offset to the log's end, the last stable offset under read_committed, that are neither
acknowledged nor archived), the records **in flight** (acquired or available again inside
the window), how many of those are redeliveries, and the totals of redeliveries and
archived records since the broker started. The native describe and list requests,
``brokerctl share-groups``, the console and ``/metrics`` all show these views.

The members of a Kafka share group, and the partitions each is assigned, come from the
share group coordinator (:class:`~brokerd.operator.group_face.ShareMembersFace`, when it is
given); a group is Stable while it has members and Empty otherwise, as the coordinator
says. What it does not do: change anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from brokerd.core.share.engine import ShareEngine
from brokerd.core.share.partition import SharePartition
from brokerd.operator.group_face import ShareMembersFace
from brokerd.operator.views import MemberView, to_json
from brokerd.storage.log.partition_log import PartitionLog
from brokerd.storage.types import Isolation

__all__ = ["ShareGroupInspector", "ShareGroupView", "SharePartitionView"]


@attrs.frozen
class SharePartitionView:
    """One share-partition of a group."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    backlog: int
    in_flight: int
    acquired: int
    available: int
    #: Records in flight delivered more than once.
    redelivered: int
    #: Deliveries after the first, since the broker started.
    redelivered_total: int
    #: Records archived (rejected, or at the delivery count limit) since the broker started.
    archived: int
    #: Records written to the group's dead-letter topic since the broker started.
    dead_lettered: int = 0


@attrs.frozen
class ShareGroupView:
    """A share group: its partitions by (topic, partition), its state and members."""

    group_id: str
    partitions: tuple[SharePartitionView, ...] = ()
    #: Stable while it has members, Empty otherwise (the share group coordinator's rule).
    state: str = "Empty"
    members: tuple[MemberView, ...] = ()

    @property
    def backlog(self) -> int:
        return sum(p.backlog for p in self.partitions)

    @property
    def in_flight(self) -> int:
        return sum(p.in_flight for p in self.partitions)

    @property
    def archived(self) -> int:
        return sum(p.archived for p in self.partitions)

    @property
    def redelivered_total(self) -> int:
        return sum(p.redelivered_total for p in self.partitions)

    def summary(self) -> dict[str, object]:
        """The group without its partitions (a list answer's row)."""
        return {
            "group_id": self.group_id,
            "partitions": len(self.partitions),
            "backlog": self.backlog,
            "in_flight": self.in_flight,
            "redelivered_total": self.redelivered_total,
            "archived": self.archived,
        }

    def to_json(self) -> dict[str, object]:
        return {
            **self.summary(),
            "state": self.state,
            "members": to_json(self.members),
            "partitions": [attrs.asdict(p) for p in self.partitions],
        }


class ShareGroupInspector:
    """Builds share-group views. Reactor thread only; never blocks.

    :param engine: the share engine (``ShareService.engine``).
    :param logs: the open logs by (topic, partition) (``broker.logdir.logs``).
    :param members: the share group coordinator's members (None: no member is known,
        as on a broker whose share groups are read only over the native protocol).
    """

    def __init__(
        self,
        engine: ShareEngine,
        logs: Callable[[], Mapping[tuple[str, int], PartitionLog]],
        members: ShareMembersFace | None = None,
    ) -> None:
        self._engine = engine
        self._logs = logs
        self._members = members

    def group_ids(self) -> list[str]:
        """Every share group with a partition used, or known to the coordinator."""
        used = {g for g in self._engine.groups() if self._engine.partitions(g)}
        if self._members is not None:
            used.update(self._members.member_groups())
        return sorted(used)

    def groups(self) -> list[ShareGroupView]:
        logs = self._logs()
        return [self._view(g, logs) for g in self.group_ids()]

    def group(self, group_id: str) -> ShareGroupView | None:
        """The group, or None when no partition of it was ever used and the coordinator
        does not hold it."""
        known = self._members is not None and group_id in self._members.member_groups()
        if not known and not self._engine.partitions(group_id):
            return None
        return self._view(group_id, self._logs())

    def _view(
        self, group_id: str, logs: Mapping[tuple[str, int], PartitionLog]
    ) -> ShareGroupView:
        committed = (
            self._engine.config(group_id).isolation_level is Isolation.READ_COMMITTED
        )
        rows = []
        for (topic, index), part in sorted(self._engine.partitions(group_id).items()):
            log = logs.get((topic, index))
            end = None
            if log is not None:
                end = log.last_stable_offset if committed else log.high_watermark
            rows.append(_partition_view(topic, index, part, end))
        members = tuple(
            MemberView(m.member_id, m.client_id, m.client_host, m.group_instance_id,
                       m.assigned_partitions())
            for m in (self._members.members(group_id) if self._members is not None else ())
        )
        return ShareGroupView(
            group_id, tuple(rows), "Stable" if members else "Empty", members
        )


def _partition_view(
    topic: str, index: int, part: SharePartition, log_end: int | None
) -> SharePartitionView:
    summary = part.summary(log_end)
    done = part.done_count()
    end = log_end if log_end is not None else part.end
    return SharePartitionView(
        topic,
        index,
        summary.start_offset,
        summary.end_offset,
        max(0, end - part.start - done),
        summary.in_flight,
        summary.acquired,
        summary.available,
        summary.redelivered,
        part.redelivered_total,
        summary.archived,
        part.dead_lettered_total,
    )
