# -*- test-case-name: tests.proxy.test_instances, tests.proxy.test_instances_configs -*-
"""The REST Proxy's consumer instances (``/consumers/GROUP/instances/NAME``): their
state, their membership of the group, their positions, and their bounds.

An instance is created IDLE. A subscription makes it a member of its consumer group by
the consumer group protocol (KIP-848), as a Kafka client with ``group.protocol=consumer``
is one: it joins with epoch 0, heartbeats on a timer of the injected clock at the
interval the coordinator gives, always with the partitions it owns, and takes the
assignment it is told. Partitions taken away are dropped at once (a records call is
over before the next heartbeat, so nothing is in flight) with their positions committed
first when ``auto.commit.enable``; the next heartbeat confirms the revocation. A
Kafka consumer of the same group (either protocol) therefore shares the partitions with
it. An assignment instead (``POST .../assignments``) is manual: no membership, commits
outside the group protocol (allowed while the group has no members, as Kafka's).

Positions: a partition without one starts at the group's committed offset, else where
``auto.offset.reset`` says (earliest or latest; ``none`` is an error). A records call
moves them past what it answered; ``auto.commit.enable`` (true by default, as Kafka's) commits
them at the start of the next records call and at deletion, as a Kafka consumer's poll
does.

Bounds: :data:`~brokerd.proxy.limits.MAX_INSTANCES_PER_ADDRESS` per client address and
:data:`~brokerd.proxy.limits.MAX_INSTANCES` in all (429 beyond); an instance not used
for ``consumer.instance.timeout.ms`` (Confluent's default 300000) is deleted and leaves
its group. Reactor thread only. What this module does not do: HTTP, ACLs, formats.
"""

from __future__ import annotations

import enum
import itertools
import re
from collections.abc import Callable, Collection, Iterator, Mapping

import attrs
from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from brokerd.clock import Clock, DelayedCall
from brokerd.proxy.embedded import EmbeddedFormat
from brokerd.proxy.errors import (
    CONSUMER_ALREADY_EXISTS,
    CONSUMER_INSTANCE_NOT_FOUND,
    ILLEGAL_STATE,
    INVALID_CONSUMER_CONFIG,
    KAFKA_ERROR,
    TOO_MANY_REQUESTS,
    ProxyError,
)
from brokerd.proxy.group_face import (
    FENCED_MEMBER_EPOCH,
    LEAVE_EPOCH,
    NONE,
    UNKNOWN_MEMBER_ID,
    MemberAnswer,
    MemberHeartbeat,
    ProxyGroups,
    TopicPartition,
)
from brokerd.proxy.limits import DEFAULT_RECORDS_WAIT_MS, MAX_GROUP_CHARS, ProxyLimits

_log = Logger()

#: Instance names the proxy makes up (Confluent's look: ``rest-consumer-N``).
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
#: Retry of a heartbeat that failed for a reason that may pass (coordinator busy).
_RETRY_SECONDS = 1.0


class InstanceState(enum.Enum):
    """Where an instance is in its life."""

    #: Created; neither subscribed nor assigned.
    IDLE = "idle"
    #: A member of its group, assigned by the coordinator.
    SUBSCRIBED = "subscribed"
    #: Manually assigned partitions, not a member.
    ASSIGNED = "assigned"
    #: Deleted or expired.
    CLOSED = "closed"


class OffsetReset(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"


@attrs.frozen
class InstanceConfig:
    """What ``POST /consumers/GROUP`` asked for."""

    format: EmbeddedFormat = EmbeddedFormat.BINARY
    auto_offset_reset: OffsetReset = OffsetReset.LATEST
    auto_commit: bool = True
    fetch_min_bytes: int = 1
    request_timeout_ms: int = DEFAULT_RECORDS_WAIT_MS


def parse_config(body: Mapping[str, object]) -> InstanceConfig:
    """An instance's config from the create request (Confluent's names, and Kafka's
    dotted and underscored spellings alike); a bad value is 422 (42204)."""

    def field(*names: str) -> object:
        for name in names:
            if name in body and body[name] is not None:
                return body[name]
        return None

    def bad(what: str) -> ProxyError:
        return ProxyError(422, INVALID_CONSUMER_CONFIG, what)

    fmt_text = field("format")
    fmt = EmbeddedFormat.BINARY
    if fmt_text is not None:
        try:
            fmt = EmbeddedFormat(str(fmt_text).lower())
        except ValueError:
            raise bad(f"unknown format {fmt_text!r}: json, binary, avro, protobuf or "
                      "jsonschema") from None
    reset_text = field("auto.offset.reset", "auto_offset_reset")
    reset = OffsetReset.LATEST
    if reset_text is not None:
        name = {"smallest": "earliest", "largest": "latest"}.get(str(reset_text),
                                                                  str(reset_text))
        try:
            reset = OffsetReset(name)
        except ValueError:
            raise bad(f"auto.offset.reset {reset_text!r}: earliest, latest or none") from None
    commit_text = field("auto.commit.enable", "auto_commit_enable", "enable.auto.commit")
    auto_commit = True
    if commit_text is not None:
        if str(commit_text).lower() not in ("true", "false"):
            raise bad(f"auto.commit.enable {commit_text!r}: true or false")
        auto_commit = str(commit_text).lower() == "true"

    def number(value: object, name: str, low: int, high: int, default: int) -> int:
        if value is None:
            return default
        try:
            n = int(str(value))
        except ValueError:
            raise bad(f"{name} {value!r} is not a number") from None
        if not low <= n <= high:
            raise bad(f"{name} {n} is not within {low}..{high}")
        return n

    return InstanceConfig(
        format=fmt,
        auto_offset_reset=reset,
        auto_commit=auto_commit,
        fetch_min_bytes=number(field("fetch.min.bytes", "fetch_min_bytes"),
                               "fetch.min.bytes", 1, 64 * 1024 * 1024, 1),
        request_timeout_ms=number(
            field("consumer.request.timeout.ms", "consumer_request_timeout_ms"),
            "consumer.request.timeout.ms", 0, 3_600_000, DEFAULT_RECORDS_WAIT_MS),
    )


class ConsumerInstance:
    """One consumer instance. Changed only by :class:`ConsumerInstances`."""

    def __init__(
        self, group: str, name: str, address: str, principal: str, config: InstanceConfig
    ) -> None:
        self.group = group
        self.name = name
        self.address = address
        self.principal = principal
        self.config = config
        self.state = InstanceState.IDLE
        self.member_id = ""
        self.member_epoch = 0
        self.topics: tuple[str, ...] = ()
        self.topic_pattern: str | None = None
        self.may_describe: Callable[[str], bool] | None = None
        self.assignment: frozenset[TopicPartition] = frozenset()
        #: The offset of the next record to read, per assigned partition.
        self.positions: dict[TopicPartition, int] = {}
        #: Positions answered but not committed yet (auto commit).
        self.uncommitted: dict[TopicPartition, int] = {}
        self.expiry: DelayedCall | None = None
        self.heartbeat: DelayedCall | None = None
        #: Records calls of this instance in progress (one at a time, as Confluent's).
        self.reading = False
        #: Where the next records call starts in the sorted partitions (round robin).
        self.next_start = 0
        #: The last heartbeat's error code (0: none), so a failure is logged once.
        self.last_error = 0
        #: The heartbeat sent and not answered yet (answered once the group's records
        #: it changed are durable); one at a time, as a Kafka consumer sends them.
        self.beating: Deferred[MemberAnswer | None] | None = None

    @property
    def is_member(self) -> bool:
        return self.state is InstanceState.SUBSCRIBED

    def take_assignment(self, partitions: frozenset[TopicPartition]) -> set[TopicPartition]:
        """Adopt ``partitions``; the ones taken away (their positions dropped)."""
        revoked = set(self.assignment - partitions)
        self.assignment = partitions
        for tp in revoked:
            self.positions.pop(tp, None)
            self.uncommitted.pop(tp, None)
        return revoked


class ConsumerInstances:
    """Every consumer instance of the proxy. Reactor thread only.

    :param groups: the group coordinator (:class:`~brokerd.proxy.group_face.ProxyGroups`).
    :param clock: time of heartbeats and expiry.
    :param limits: the counts and the idle timeout.
    """

    def __init__(self, groups: ProxyGroups, clock: Clock, limits: ProxyLimits) -> None:
        self._groups = groups
        self._clock = clock
        self._limits = limits
        self._instances: dict[tuple[str, str], ConsumerInstance] = {}
        self._per_address: dict[str, int] = {}
        self._names = itertools.count(1)
        self._stopped = False

    def __len__(self) -> int:
        return len(self._instances)

    def __iter__(self) -> Iterator[ConsumerInstance]:
        return iter(list(self._instances.values()))

    # -- life ---------------------------------------------------------------------------

    def create(
        self,
        group: str,
        name: str | None,
        *,
        address: str,
        principal: str,
        config: InstanceConfig,
    ) -> ConsumerInstance:
        """A new IDLE instance (409 40902 if the name is taken, 429 beyond the bounds)."""
        if self._stopped:
            raise ProxyError(503, 50003, "the broker is shutting down")
        if not group or len(group) > MAX_GROUP_CHARS:
            raise ProxyError(422, INVALID_CONSUMER_CONFIG,
                             f"a group id has 1 to {MAX_GROUP_CHARS} characters")
        if name is None:
            while True:
                name = f"rest-consumer-{next(self._names)}"
                if (group, name) not in self._instances:
                    break
        elif not _NAME.match(name):
            raise ProxyError(422, INVALID_CONSUMER_CONFIG,
                             "an instance name has 1 to 249 of A-Z a-z 0-9 . _ -")
        if (group, name) in self._instances:
            raise ProxyError(409, CONSUMER_ALREADY_EXISTS,
                             f"Consumer {name} already exists in group {group}.")
        if len(self._instances) >= self._limits.max_instances:
            raise ProxyError(429, TOO_MANY_REQUESTS,
                             f"the proxy holds {self._limits.max_instances} consumer "
                             "instances, its most: delete one first")
        held = self._per_address.get(address, 0)
        if held >= self._limits.max_instances_per_address:
            raise ProxyError(429, TOO_MANY_REQUESTS,
                             f"{address} holds {held} consumer instances, the most one "
                             "client address may: delete one first")
        instance = ConsumerInstance(group, name, address, principal, config)
        self._instances[(group, name)] = instance
        self._per_address[address] = held + 1
        instance.expiry = self._clock.callLater(
            self._limits.instance_timeout_ms / 1000, self._expire, instance
        )
        return instance

    def get(self, group: str, name: str) -> ConsumerInstance:
        """The instance (404 40403 if none), its idle timer restarted."""
        instance = self._instances.get((group, name))
        if instance is None:
            raise ProxyError(404, CONSUMER_INSTANCE_NOT_FOUND, "Consumer instance not found.")
        if instance.expiry is not None and instance.expiry.active():
            instance.expiry.reset(self._limits.instance_timeout_ms / 1000)
        return instance

    def delete(self, instance: ConsumerInstance) -> Deferred[None]:
        """Close ``instance``: commit its positions (auto commit), leave its group."""
        if instance.state is InstanceState.CLOSED:
            return succeed(None)
        d = self._auto_commit(instance)
        self._leave(instance)
        instance.state = InstanceState.CLOSED
        if instance.expiry is not None and instance.expiry.active():
            instance.expiry.cancel()
        if self._instances.get((instance.group, instance.name)) is instance:
            del self._instances[(instance.group, instance.name)]
            left = self._per_address.get(instance.address, 1) - 1
            if left > 0:
                self._per_address[instance.address] = left
            else:
                self._per_address.pop(instance.address, None)
        return d

    def _expire(self, instance: ConsumerInstance) -> None:
        _log.info("REST Proxy consumer {group}/{name} expired after {ms} ms unused",
                  group=instance.group, name=instance.name,
                  ms=self._limits.instance_timeout_ms)
        self.delete(instance).addErrback(
            lambda f: _log.failure("committing an expired instance's offsets", f))

    def stop(self) -> None:
        """Close every instance (the broker is stopping): each leaves its group."""
        self._stopped = True
        for instance in list(self._instances.values()):
            self.delete(instance).addErrback(lambda _f: None)

    # -- subscription -------------------------------------------------------------------

    def subscribe(
        self,
        instance: ConsumerInstance,
        *,
        topics: tuple[str, ...] = (),
        pattern: str | None = None,
        may_describe: Callable[[str], bool] | None = None,
    ) -> Deferred[None]:
        """Join (or change the subscription in) the group; fires once the coordinator
        answered, failing with a :class:`ProxyError` when it refused the join."""
        if instance.state is InstanceState.ASSIGNED:
            raise ProxyError(409, ILLEGAL_STATE,
                             "Subscription to topics, partitions and pattern are mutually "
                             "exclusive.")
        instance.topics = topics
        instance.topic_pattern = pattern
        instance.may_describe = may_describe
        joining = instance.state is not InstanceState.SUBSCRIBED
        if joining:
            instance.state = InstanceState.SUBSCRIBED
            instance.member_id = _member_id(instance)
            instance.member_epoch = 0
        member_id = instance.member_id

        def answered(answer: MemberAnswer | None) -> None:
            if not (joining and answer is not None and answer.error_code != NONE):
                return
            if instance.member_id != member_id or instance.state is not InstanceState.SUBSCRIBED:
                return  # left or closed meanwhile
            # Refused (a classic group that cannot be converted, a full group, a bad
            # regex): the client hears why, and the instance stays as it was.
            self._leave(instance)
            instance.state = InstanceState.IDLE
            instance.member_id = ""
            instance.topics, instance.topic_pattern = (), None
            why = f": {answer.error_message}" if answer.error_message else ""
            raise ProxyError(
                409, ILLEGAL_STATE,
                f"the group coordinator refused the subscription (Kafka error "
                f"{answer.error_code}{why})",
            )

        return self._beat(instance).addCallback(answered)

    def unsubscribe(self, instance: ConsumerInstance) -> Deferred[None]:
        d = self._auto_commit(instance)
        self._leave(instance)
        instance.state = InstanceState.IDLE
        instance.topics, instance.topic_pattern = (), None
        instance.take_assignment(frozenset())
        return d

    def assign(self, instance: ConsumerInstance, partitions: frozenset[TopicPartition]) -> None:
        if instance.state is InstanceState.SUBSCRIBED:
            raise ProxyError(409, ILLEGAL_STATE,
                             "Subscription to topics, partitions and pattern are mutually "
                             "exclusive.")
        instance.state = InstanceState.ASSIGNED if partitions else InstanceState.IDLE
        instance.take_assignment(partitions)

    def poll_membership(self, instance: ConsumerInstance) -> None:
        """A records call of a member that has no partitions yet heartbeats now rather
        than at its timer (as a Kafka consumer's poll does)."""
        if instance.is_member and not instance.assignment and instance.beating is None:
            self._beat(instance)

    def _beat(self, instance: ConsumerInstance) -> Deferred[MemberAnswer | None]:
        """Heartbeat now (after the one in flight, if any); the answer once taken."""
        if instance.beating is not None:
            return instance.beating.addCallback(lambda _: self._beat(instance))
        if instance.heartbeat is not None and instance.heartbeat.active():
            instance.heartbeat.cancel()
        instance.heartbeat = None
        if instance.state is not InstanceState.SUBSCRIBED or self._stopped:
            return succeed(None)
        member_id = instance.member_id
        beat = self._groups.heartbeat(MemberHeartbeat(
            group_id=instance.group,
            member_id=instance.member_id,
            member_epoch=instance.member_epoch,
            topics=instance.topics if instance.topic_pattern is None else (),
            topic_regex=instance.topic_pattern,
            owned=instance.assignment,
            client_id=f"rest-proxy-{instance.name}",
            client_host=instance.address,
            may_describe=instance.may_describe,
        ))

        def answered(answer: MemberAnswer) -> MemberAnswer | None:
            instance.beating = None
            if (instance.state is not InstanceState.SUBSCRIBED or self._stopped
                    or instance.member_id != member_id):
                return None  # left, closed or joined afresh while it was in flight
            delay = self._apply(instance, answer)
            if instance.heartbeat is not None and instance.heartbeat.active():
                instance.heartbeat.cancel()
            instance.heartbeat = self._clock.callLater(delay, self._beat, instance)
            return answer

        def failed(reason: Failure) -> None:
            instance.beating = None
            _log.failure("REST Proxy consumer {group}/{name}: heartbeat", reason,
                         group=instance.group, name=instance.name)
            if instance.state is InstanceState.SUBSCRIBED and not self._stopped:
                instance.heartbeat = self._clock.callLater(_RETRY_SECONDS, self._beat, instance)

        checked: Deferred[MemberAnswer | None] = beat.addCallbacks(answered, failed)
        if not checked.called:
            instance.beating = checked
        return checked

    def _apply(self, instance: ConsumerInstance, answer: MemberAnswer) -> float:
        """Take a heartbeat's answer; the seconds until the next heartbeat."""
        if answer.error_code in (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH) and (
            instance.member_epoch > 0
        ):
            # Fenced (a session timed out, say): lose the partitions, join again now.
            instance.take_assignment(frozenset())
            instance.member_epoch = 0
            return 0.0
        if answer.error_code != NONE:
            if answer.error_code != instance.last_error:
                # Once per kind of failure, not once per retry.
                _log.warn("REST Proxy consumer {group}/{name}: heartbeat error {code} "
                          "{message}; retrying every {seconds} s", group=instance.group,
                          name=instance.name, code=answer.error_code,
                          message=answer.error_message or "", seconds=_RETRY_SECONDS)
            instance.last_error = answer.error_code
            return _RETRY_SECONDS
        instance.last_error = NONE
        instance.member_id = answer.member_id or instance.member_id
        # The coordinator holds the member at this epoch now: commits go with it.
        instance.member_epoch = answer.member_epoch
        if answer.assignment is not None:
            before = {tp: instance.uncommitted[tp] for tp in instance.assignment - answer.assignment
                      if tp in instance.uncommitted}
            if before and instance.config.auto_commit:
                # The partitions' new owner starts where this one stopped.
                self._commit(instance, before).addErrback(
                    lambda f: _log.failure("committing revoked partitions' offsets", f))
            instance.take_assignment(answer.assignment)
        return max(answer.heartbeat_interval_ms, 100) / 1000

    def _leave(self, instance: ConsumerInstance) -> None:
        if instance.heartbeat is not None and instance.heartbeat.active():
            instance.heartbeat.cancel()
        instance.heartbeat = None
        if instance.state is InstanceState.SUBSCRIBED and instance.member_id:
            self._groups.heartbeat(MemberHeartbeat(
                group_id=instance.group, member_id=instance.member_id,
                member_epoch=LEAVE_EPOCH,
            )).addErrback(lambda f: _log.failure("leaving the group", f))
        instance.member_epoch = 0

    # -- offsets ------------------------------------------------------------------------

    def committed(
        self, instance: ConsumerInstance, partitions: Collection[TopicPartition] | None
    ) -> dict[TopicPartition, tuple[int, str]]:
        return self._groups.committed(instance.group, partitions)

    def commit(
        self, instance: ConsumerInstance, offsets: Mapping[TopicPartition, tuple[int, str]]
    ) -> Deferred[None]:
        """Commit ``offsets`` as the instance (a member with its epoch); an error of
        the coordinator is 500 (50001) naming it."""
        epoch = instance.member_epoch if instance.is_member else -1
        member = instance.member_id if instance.is_member else ""
        d = self._groups.commit(instance.group, member, epoch, offsets)

        def judged(results: dict[TopicPartition, int]) -> None:
            failed = sorted((code, tp) for tp, code in results.items() if code)
            if failed:
                code, (topic, partition) = failed[0]
                raise ProxyError(500, KAFKA_ERROR,
                                 f"commit of {topic}-{partition} refused by the group "
                                 f"coordinator (Kafka error {code})")
            for tp, (offset, _meta) in offsets.items():
                if instance.uncommitted.get(tp) == offset:
                    del instance.uncommitted[tp]

        return d.addCallback(judged)

    def _commit(
        self, instance: ConsumerInstance, positions: Mapping[TopicPartition, int]
    ) -> Deferred[None]:
        return self.commit(instance, {tp: (o, "") for tp, o in positions.items()})

    def _auto_commit(self, instance: ConsumerInstance) -> Deferred[None]:
        if not instance.config.auto_commit or not instance.uncommitted:
            return succeed(None)
        return self._commit(instance, dict(instance.uncommitted))

    def auto_commit(self, instance: ConsumerInstance) -> Deferred[None]:
        """What the previous records call answered, committed (auto commit)."""
        return self._auto_commit(instance)


def _member_id(instance: ConsumerInstance) -> str:
    import uuid

    # KIP-848 (v1+): the client makes its member id up; a fresh one per subscription.
    return f"rest-proxy-{instance.name}-{uuid.uuid4()}"
