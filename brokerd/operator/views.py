"""What an operator sees of the broker: immutable snapshots of topics, partitions and
consumer groups, shared by the admin commands, the web console and the metrics.

Data only: these classes are built by :class:`brokerd.operator.inspect.Inspector` and
rendered elsewhere (tables and JSON in ``brokerd.cli.topics_groups``, HTML in ``brokerd.web``,
Prometheus series in ``brokerd.metrics``). :func:`to_json` turns any of them into plain
JSON-ready values, so every output form shows the same fields under the same names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import attrs

if TYPE_CHECKING:
    from brokerd.operator.share_groups import SharePartitionView

#: A group's type, as ListGroups v5 and Kafka's Admin API name it: a group of the classic
#: protocol (or known only by its committed offsets), of the consumer protocol (KIP-848),
#: or a share group (KIP-932). Kafka's tools print them capitalized (Classic, Consumer,
#: Share).
CLASSIC_GROUP = "classic"
CONSUMER_GROUP = "consumer"
SHARE_GROUP = "share"


def _frozen_mapping(value: Mapping[str, str]) -> Mapping[str, str]:
    return dict(sorted(value.items()))


@attrs.frozen
class PartitionView:
    """One partition: its offsets, size on disk and whether it is offline.

    ``records`` counts offsets between the log start and the high watermark (compaction
    and control records leave gaps, so it is an upper bound of the records kept).
    """

    topic: str
    partition: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    size_bytes: int
    segments: int
    #: Why the partition is offline (its log could not be opened), or None.
    offline: str | None = None

    @property
    def records(self) -> int:
        return max(0, self.high_watermark - self.log_start_offset)


@attrs.frozen
class TopicView:
    """One topic, with every partition and its effective configs (the topic's
    overrides on top of the broker's defaults); ``overrides`` names the keys the topic
    sets itself; ``topic_id`` is the topic's ID in Kafka's text form (base64url, as
    ``kafka-topics.sh --describe`` shows it)."""

    name: str
    partitions: tuple[PartitionView, ...]
    configs: Mapping[str, str] = attrs.field(converter=_frozen_mapping, hash=False)
    overrides: frozenset[str] = frozenset()
    topic_id: str = attrs.field(default="", kw_only=True)

    @property
    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.partitions)

    @property
    def end_offsets(self) -> int:
        """The sum of the partitions' high watermarks: what a rate is derived from."""
        return sum(p.high_watermark for p in self.partitions)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)


@attrs.frozen
class MemberView:
    """One member of a group and the partitions assigned to it (empty unless the group is
    Stable and uses the consumer protocol)."""

    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None = None
    assignment: tuple[tuple[str, int], ...] = ()


@attrs.frozen
class GroupOffsetView:
    """A committed offset and the lag behind the partition's end.

    ``lag`` is ``high_watermark - committed_offset`` (never negative), or None when the
    partition does not exist (any more) on this broker.
    """

    topic: str
    partition: int
    committed_offset: int
    high_watermark: int | None
    lag: int | None
    metadata: str | None = None


@attrs.frozen
class GroupView:
    """One group: state, members, and what it has read.

    A consumer group (``group_type`` classic or consumer) has committed ``offsets`` and
    its lag; a share group has no committed offsets but ``share_partitions``: per
    partition its start offset and its backlog, which is a share group's lag (records
    from the start offset to the log's end not yet acknowledged or archived).
    """

    group_id: str
    state: str
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[MemberView, ...] = ()
    offsets: tuple[GroupOffsetView, ...] = ()
    group_type: str = attrs.field(default=CLASSIC_GROUP, kw_only=True)
    share_partitions: tuple[SharePartitionView, ...] = attrs.field(default=(), kw_only=True)

    @property
    def total_lag(self) -> int:
        return sum(o.lag for o in self.offsets if o.lag is not None) + sum(
            p.backlog for p in self.share_partitions
        )


@attrs.frozen
class OffsetResetView:
    """One partition of a group's offset reset: the offset committed before (None when
    there was none) and the one the reset commits, within the partition's log start
    offset and high watermark at the time."""

    group_id: str
    topic: str
    partition: int
    previous_offset: int | None
    new_offset: int
    log_start_offset: int
    high_watermark: int


def to_json(value: object) -> Any:
    """``value`` (a view, or lists/mappings of them) as JSON-ready dicts, lists and
    scalars; derived figures (``records``, ``size_bytes``, ``total_lag``) included."""
    if attrs.has(type(value)):
        fields = attrs.fields(cast("type[attrs.AttrsInstance]", type(value)))
        out = {f.name: to_json(getattr(value, f.name)) for f in fields}
        for name in ("records", "size_bytes", "end_offsets", "total_lag"):
            if hasattr(value, name) and name not in out:
                out[name] = getattr(value, name)
        return out
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, frozenset | set):
        return sorted(to_json(v) for v in value)
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    return value


__all__ = [
    "CLASSIC_GROUP",
    "CONSUMER_GROUP",
    "SHARE_GROUP",
    "GroupOffsetView",
    "GroupView",
    "MemberView",
    "OffsetResetView",
    "PartitionView",
    "TopicView",
    "to_json",
]
