# -*- test-case-name: tests.kafka.listener.test_protocol -*-
"""Kafka cluster and topic administration: ApiVersions, Metadata, DescribeCluster,
DescribeTopicPartitions, CreateTopics, DeleteTopics and InitProducerId.

Each handler turns a decoded request body (:mod:`brokerd.kafka.wire.requests.apis`) into a response
message, calling the broker core for topics and producer ids. brokerd is a single node:
every partition's leader, replica and in-sync replica is this node, and CreateTopics
accepts replication factor 1 (or -1) only. Topics carry their IDs (the core's
``TopicInfo.topic_id``) wherever Kafka's answer does, and Metadata v12+ and DeleteTopics
v6 find topics by ID (UNKNOWN_TOPIC_ID for one no topic has). InitProducerId allocates
a fresh producer id for an idempotent producer here and hands a transactional one (a
transactional id is set) to :class:`~brokerd.kafka.server.handlers.txn.TxnHandlers`.

It does not parse or build bytes and does not dispatch: :class:`~brokerd.kafka.listener.dispatch.
KafkaHandlers` routes requests here.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

import attrs
from twisted.logger import Logger

from brokerd.errors import InvalidTopic
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.acl_gate import (
    CLUSTER_DENIED,
    DENIED_TEXT,
    TOPIC_DENIED,
    TXN_DENIED,
    Access,
    Gate,
    answer_now,
    by_name,
    itself,
    keep_only,
    split_entries,
    topic_op,
)
from brokerd.kafka.server.handler_base import (
    LEADER_EPOCH,
    BrokerIdentity,
    RequestContext,
    message,
    repeated,
    unexpected_code,
)
from brokerd.kafka.server.handlers.configs import topic_entries
from brokerd.kafka.server.handlers.txn import TxnHandlers
from brokerd.kafka.server.internal_topics import InternalTopics
from brokerd.kafka.server.operations_fields import AuthorizedOperations
from brokerd.kafka.server.route import AnyRoute, route
from brokerd.kafka.server.throttle import (
    THROTTLED_TEXT,
    MutationCharge,
    QuotaEnforcer,
    mutation_charge,
)
from brokerd.kafka.wire.codec import ZERO_UUID
from brokerd.kafka.wire.messages.api_versions import (
    API_VERSIONS,
    ApiVersionsRequest,
    ApiVersionsResponse,
)
from brokerd.kafka.wire.messages.cluster import (
    DESCRIBE_CLUSTER,
    ENDPOINT_BROKERS,
    ENDPOINT_CONTROLLERS,
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from brokerd.kafka.wire.messages.metadata import METADATA
from brokerd.kafka.wire.messages.producer_id import INIT_PRODUCER_ID
from brokerd.kafka.wire.messages.topic_partitions import (
    DESCRIBE_TOPIC_PARTITIONS,
    PARTITION_LIMIT,
    DescribeTopicPartitionsPartition,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsTopic,
    TopicPartitionsCursor,
)
from brokerd.kafka.wire.messages.topics import (
    CREATE_TOPICS,
    DELETE_TOPICS,
    CreatableTopicConfigs,
    DeleteTopicState,
)
from brokerd.kafka.wire.requests import apis
from brokerd.kafka.wire.requests.apis import Request
from brokerd.names import is_internal_topic, validate_topic_name
from brokerd.security.acl import Operation, ResourceType
from brokerd.storage.config.topic_config import validate_overrides
from brokerd.storage.types import TopicInfo

if TYPE_CHECKING:
    from brokerd.core.api import CoreApi

#: Partitions of a topic created by CreateTopics with num_partitions -1, unless the
#: factory is given another (Kafka's ``num.partitions`` default).
DEFAULT_PARTITIONS = 1
#: Metadata entries kept (one per topic); past this the cache starts over.
METADATA_CACHE_TOPICS = 20000


class ClusterTopicHandlers:
    """Answers the cluster and topic administration APIs.

    :param core: the broker core (:class:`~brokerd.core.api.CoreApi`).
    :param identity: node id, advertised host/port and cluster id (read live).
    :param default_partitions: partitions for CreateTopics with num_partitions -1.
    :param transactional: answers InitProducerId with a transactional id (as a broker
        without a transaction coordinator does when it has none).
    :param operations: fills Metadata's authorized-operations fields when asked
        (default: no authorizer, every operation).
    """

    _log = Logger()

    def __init__(
        self,
        core: CoreApi,
        identity: BrokerIdentity,
        *,
        transactional: TxnHandlers,
        default_partitions: int = DEFAULT_PARTITIONS,
        operations: AuthorizedOperations | None = None,
        quotas: QuotaEnforcer | None = None,
        internal_topics: InternalTopics | None = None,
    ) -> None:
        self._core = core
        self._id = identity
        self._quotas = quotas
        self._internal = (
            internal_topics if internal_topics is not None
            else InternalTopics(lambda: identity.cluster_id)
        )
        self._operations = operations if operations is not None else AuthorizedOperations()
        self._default_partitions = default_partitions
        self._txn = transactional
        # Topic name -> ((partition count, node id, topic ID), its Metadata entry).
        self._metadata_cache: dict[
            str, tuple[tuple[int, int, uuid.UUID], apis.MetadataTopic]
        ] = {}

    def routes(self) -> tuple[AnyRoute, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            route(API_VERSIONS, self.api_versions, None),
            route(
                METADATA,
                self.metadata,
                functools.partial(metadata_rule, topic_by_id=self._core.topic_registry.topic_by_id),
            ),
            route(DESCRIBE_CLUSTER, self.describe_cluster, describe_cluster_rule),
            route(
                DESCRIBE_TOPIC_PARTITIONS,
                self.describe_topic_partitions,
                describe_topic_partitions_rule,
            ),
            route(CREATE_TOPICS, self.create_topics, create_topics_rule),
            route(
                DELETE_TOPICS,
                self.delete_topics,
                functools.partial(
                    delete_topics_rule, topic_by_id=self._core.topic_registry.topic_by_id
                ),
            ),
            route(INIT_PRODUCER_ID, self.init_producer_id, init_producer_id_rule),
        )

    def _unexpected(self, what: str, exc: BaseException) -> ErrorCode:
        return unexpected_code(self._log, what, exc)

    async def api_versions(
        self, conn: RequestContext, req: Request[ApiVersionsRequest]
    ) -> ApiVersionsResponse:
        if req.api_version >= 3 and req.body is not None:
            # Client telemetry matches subscriptions on these (KIP-714).
            conn.client_software = (
                req.body.client_software_name, req.body.client_software_version
            )
        return apis.api_versions_response(
            req.api_version, req.body, cluster_id=self._id.cluster_id, node_id=self._id.node_id
        )

    def _topic_metadata(self, info: TopicInfo) -> apis.MetadataTopic:
        # Building the entry of a 10,000-partition topic takes ~50 ms of the reactor;
        # it changes only with the partition count, the node id or (a topic deleted and
        # created again under its name) the topic ID, so it is kept.
        node = self._id.node_id
        key = (info.partitions, node, info.topic_id)
        cached = self._metadata_cache.get(info.name)
        if cached is not None and cached[0] == key:
            return cached[1]
        if len(self._metadata_cache) >= METADATA_CACHE_TOPICS:
            self._metadata_cache.clear()  # a bound on deleted names' entries
        topic = self._build_topic_metadata(info, node)
        self._metadata_cache[info.name] = (key, topic)
        return topic

    @staticmethod
    def _build_topic_metadata(info: TopicInfo, node: int) -> apis.MetadataTopic:
        return apis.MetadataTopic(
            error_code=0,
            name=info.name,
            topic_id=info.topic_id,
            # Only a data directory from before the naming rules can hold one.
            is_internal=is_internal_topic(info.name),
            partitions=tuple(
                apis.MetadataPartition(
                    error_code=0,
                    partition_index=i,
                    leader_id=node,
                    leader_epoch=LEADER_EPOCH,
                    replica_nodes=(node,),
                    isr_nodes=(node,),
                    offline_replicas=(),
                )
                for i in range(info.partitions)
            ),
        )

    async def metadata(
        self, conn: RequestContext, req: Request[apis.MetadataRequest]
    ) -> apis.MetadataResponse:
        body = req.body
        version = req.api_version
        known = self._topics()
        entries: list[apis.MetadataTopic] = []
        # v0: an empty list means every topic; v1+: null means every topic and an empty
        # list means none (librdkafka asks for brokers only that way).
        if body.topics is None or (version == 0 and not body.topics):
            entries = [self._topic_metadata(known[name]) for name in sorted(known)]
        else:
            if _metadata_topics_refused(body.topics, version):
                return _metadata_refused(body.topics, version)
            # v0-3 have no flag: Kafka auto-creates for them whenever it may.
            allow = body.allow_auto_topic_creation if version >= 4 else True
            seen_names: set[str] = set()
            seen_ids: set[uuid.UUID] = set()
            for wanted in body.topics:
                if wanted.topic_id != ZERO_UUID:
                    # Named by ID (v12+): never created, whatever the flag says.
                    if wanted.topic_id not in seen_ids:
                        seen_ids.add(wanted.topic_id)
                        entries.append(self._topic_metadata_by_id(wanted.topic_id))
                    continue
                name = wanted.name
                if name is None or name in seen_names:
                    continue
                seen_names.add(name)
                entries.append(await self._one_topic_metadata(name, known, allow))
        cluster_ops = apis.AUTHORIZED_OPERATIONS_OMITTED
        if version >= 8:
            ops = self._operations
            if body.include_topic_authorized_operations:
                entries = [
                    attrs.evolve(t, topic_authorized_operations=ops.topic(conn, t.name))
                    if t.name is not None
                    else t
                    for t in entries
                ]
            # v8-10 only (decoded False later): v11+ clients ask DescribeCluster.
            if body.include_cluster_authorized_operations:
                cluster_ops = ops.cluster(conn)
        ident = self._id
        return apis.MetadataResponse(
            brokers=(
                apis.MetadataBroker(
                    node_id=ident.node_id, host=ident.advertised_host,
                    port=ident.advertised_port, rack=None,
                ),
            ),
            cluster_id=ident.cluster_id,
            controller_id=ident.node_id,
            topics=tuple(entries),
            cluster_authorized_operations=cluster_ops,
        )

    def _topics(self) -> Mapping[str, TopicInfo]:
        """The core's topics and the internal ones presented (``internal_topics``)."""
        internal = self._internal.topics()
        topics = self._core.topic_registry.topics()
        return {**internal, **topics} if internal else topics

    def _topic_metadata_by_id(self, topic_id: uuid.UUID) -> apis.MetadataTopic:
        info = self._core.topic_registry.topic_by_id(topic_id) or self._internal.by_id(topic_id)
        if info is None:
            return apis.MetadataTopic(
                error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id
            )
        return self._topic_metadata(info)

    async def _one_topic_metadata(
        self, name: str, known: Mapping[str, TopicInfo], allow_create: bool
    ) -> apis.MetadataTopic:
        info = known.get(name)
        if info is not None:
            return self._topic_metadata(info)
        if is_internal_topic(name):
            # Kafka creates its internal topics when asked for them by name.
            info = self._internal.create(name) if allow_create else None
            if info is None:
                return apis.MetadataTopic(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name
                )
            return self._topic_metadata(info)
        try:
            validate_topic_name(name)
        except InvalidTopic:
            return apis.MetadataTopic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=name)
        if not (allow_create and self._core.topic_registry.auto_create_topics):
            return apis.MetadataTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name)
        try:
            info = await self._core.topic_registry.ensure_topic(name)
        except Exception as e:
            return apis.MetadataTopic(
                error_code=self._unexpected("auto-create", e), name=name
            )
        return self._topic_metadata(info)

    async def describe_cluster(
        self, conn: RequestContext, req: Request[DescribeClusterRequest]
    ) -> DescribeClusterResponse:
        body = req.body
        endpoint = body.endpoint_type
        if endpoint != ENDPOINT_BROKERS:
            # Kafka's broker: v0 cannot name another type, so a bad one is a bad
            # request; v1+ say whether the type is unknown or is the controllers'
            # (which a broker's listener does not describe).
            if req.api_version == 0:
                code = ErrorCode.INVALID_REQUEST
            elif endpoint == ENDPOINT_CONTROLLERS:
                code = ErrorCode.MISMATCHED_ENDPOINT_TYPE
            else:
                code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            text = (
                "brokerd is a broker: ask it for brokers (endpoint type 1)"
                if endpoint == ENDPOINT_CONTROLLERS
                else f"Unsupported endpoint type {endpoint}"
            )
            return DescribeClusterResponse(error_code=code, error_message=text)
        ident = self._id
        ops = apis.AUTHORIZED_OPERATIONS_OMITTED
        if body.include_cluster_authorized_operations:
            ops = self._operations.cluster(conn)
        return DescribeClusterResponse(
            endpoint_type=ENDPOINT_BROKERS,
            cluster_id=ident.cluster_id,
            # A single node: it is its own controller, and never fenced.
            controller_id=ident.node_id,
            brokers=(
                DescribeClusterBroker(
                    broker_id=ident.node_id, host=ident.advertised_host,
                    port=ident.advertised_port, rack=None, is_fenced=False,
                ),
            ),
            cluster_authorized_operations=ops,
        )

    async def describe_topic_partitions(
        self, conn: RequestContext, req: Request[DescribeTopicPartitionsRequest]
    ) -> DescribeTopicPartitionsResponse:
        """Topics in name order, at most ``response_partition_limit`` partitions (capped
        at Kafka's 2000) per answer, from the cursor on; ``next_cursor`` says where the
        next request starts when the limit cut the answer short."""
        body = req.body
        known = self._topics()
        cursor = body.cursor
        start = cursor.topic_name if cursor is not None else ""
        every = not body.topics
        if every:
            names = sorted(n for n in known if n >= start)
        else:
            names = sorted({t.name for t in body.topics if t.name >= start})
            if cursor is not None and cursor.topic_name not in names:
                return _partitions_refused(body, "the topic list must hold the cursor's topic")
        if cursor is not None and cursor.partition_index < 0:
            return _partitions_refused(body, "the cursor's partition index is negative")
        ops = self._operations
        # Topics the principal may not DESCRIBE are left out before the partitions are
        # counted, as in Kafka: every topic left out of "all" (nothing told), each named
        # one answered TOPIC_AUTHORIZATION_FAILED without its ID.
        visible = [n for n in names if ops.topic_visible(conn, n)]
        shown = set(visible)
        denied = tuple(
            DescribeTopicPartitionsTopic(error_code=TOPIC_DENIED, name=n)
            for n in names
            if not every and n not in shown
        )
        remaining = max(min(PARTITION_LIMIT, body.response_partition_limit), 1)
        answered: list[DescribeTopicPartitionsTopic] = []
        next_cursor = None
        for name in visible:
            if remaining == 0:
                next_cursor = TopicPartitionsCursor(topic_name=name, partition_index=0)
                break
            info = known.get(name)
            if info is None:
                if not every:
                    answered.append(_unknown_partitions_topic(name))
                continue
            first = cursor.partition_index if cursor is not None and name == start else 0
            end = min(info.partitions, first + remaining)
            answered.append(self._partitions_topic(info, range(first, end)))
            if end < info.partitions:
                next_cursor = TopicPartitionsCursor(topic_name=name, partition_index=end)
                break
            remaining -= max(end - first, 0)
        return DescribeTopicPartitionsResponse(
            topics=(
                *(attrs.evolve(t, topic_authorized_operations=ops.topic(conn, t.name or ""))
                  for t in answered),
                *denied,
            ),
            next_cursor=next_cursor,
        )

    def _partitions_topic(
        self, info: TopicInfo, indexes: range
    ) -> DescribeTopicPartitionsTopic:
        node = self._id.node_id
        return DescribeTopicPartitionsTopic(
            name=info.name,
            topic_id=info.topic_id,
            is_internal=is_internal_topic(info.name),
            partitions=tuple(
                DescribeTopicPartitionsPartition(
                    partition_index=i,
                    leader_id=node,
                    leader_epoch=LEADER_EPOCH,
                    replica_nodes=(node,),
                    isr_nodes=(node,),
                    # One node: no eligible leader replicas beyond the ISR, ever.
                    eligible_leader_replicas=(),
                    last_known_elr=(),
                    offline_replicas=(),
                )
                for i in indexes
            ),
        )

    async def create_topics(
        self, conn: RequestContext, req: Request[apis.CreateTopicsRequest]
    ) -> apis.CreateTopicsResponse:
        body = req.body
        twice = repeated(t.name for t in body.topics)
        quota = mutation_charge(self._quotas, conn.state.principal, req.header.client_id,
                                strict=req.api_version >= 6)
        results = []
        for t in body.topics:
            if t.name in twice:
                result = _create_failed(t, ErrorCode.INVALID_REQUEST, "topic named more than once")
            elif quota.refused():
                result = _create_failed(t, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_TEXT)
            else:
                result = await self._create_one(t, body.validate_only)
                if result.error_code == 0 and not body.validate_only:
                    quota.charge(result.num_partitions)
            results.append(result)
        return apis.CreateTopicsResponse(
            throttle_time_ms=quota.throttle_ms(), topics=tuple(results))

    async def _create_one(
        self, t: apis.CreatableTopic, validate_only: bool
    ) -> apis.CreatableTopicResult:
        try:
            validate_topic_name(t.name)
        except InvalidTopic as e:
            return _create_failed(t, ErrorCode.INVALID_TOPIC_EXCEPTION, str(e))
        names = [c.name for c in t.configs]
        if len(set(names)) != len(names):
            return _create_failed(
                t, ErrorCode.INVALID_REQUEST, "a topic config is given more than once"
            )
        node = self._id.node_id
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                return _create_failed(t, ErrorCode.INVALID_REQUEST, (
                    "set either assignments or num_partitions/replication_factor"
                ))
            indexes = sorted(a.partition_index for a in t.assignments)
            if indexes != list(range(len(indexes))) or any(
                tuple(a.broker_ids) != (node,) for a in t.assignments
            ):
                return _create_failed(t, ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"partitions must be 0..n-1, each on broker {node} alone"
                ))
            partitions = len(indexes)
        else:
            if t.replication_factor not in (-1, 1):
                return _create_failed(t, ErrorCode.INVALID_REPLICATION_FACTOR, (
                    f"brokerd is a single node: replication factor must be 1, "
                    f"not {t.replication_factor}"
                ))
            partitions = (
                self._default_partitions if t.num_partitions == -1 else t.num_partitions
            )
            if partitions <= 0:
                return _create_failed(t, ErrorCode.INVALID_PARTITIONS, (
                    f"number of partitions must be positive, not {t.num_partitions}"
                ))
        configs = {c.name: c.value for c in t.configs}
        try:
            # The core validates the configs (INVALID_CONFIG naming the key) and, with
            # validate_only, everything else too, creating nothing.
            await self._core.create_topic(
                t.name, partitions, configs, validate_only=validate_only
            )
        except Exception as e:
            return _create_failed(t, self._unexpected("create topic", e), message(e))
        created = None if validate_only else self._core.topic_registry.topics().get(t.name)
        if created is None:
            # Validated only: nothing was created, so there is no topic ID (zero), but
            # the partitions and configs are what the topic would have. The configs
            # passed the core's checks, so they normalize here.
            created = TopicInfo(
                t.name, partitions, validate_overrides(configs.items()), topic_id=ZERO_UUID
            )
        return self._created(created)

    def _created(self, info: TopicInfo) -> apis.CreatableTopicResult:
        """A created (or validated) topic's result: v5+ tell its partition count,
        replication factor and every config as DescribeConfigs would (clients learn
        the defaults from it), v7+ its ID."""
        entries = topic_entries(
            info, self._core.topic_config_defaults(), None, synonyms=False, documentation=False
        )
        return apis.CreatableTopicResult(
            name=info.name,
            topic_id=info.topic_id,
            error_code=ErrorCode.NONE,
            error_message=None,
            num_partitions=info.partitions,
            replication_factor=1,
            configs=tuple(
                CreatableTopicConfigs(
                    name=e.name,
                    value=e.value,
                    read_only=e.read_only,
                    config_source=e.config_source,
                    is_sensitive=e.is_sensitive,
                )
                for e in entries
            ),
        )

    async def delete_topics(
        self, conn: RequestContext, req: Request[apis.DeleteTopicsRequest]
    ) -> apis.DeleteTopicsResponse:
        body = req.body
        wanted = _topics_to_delete(body, req.api_version)
        twice_names = repeated(t.name for t in wanted if t.name is not None)
        twice_ids = repeated(str(t.topic_id) for t in wanted if t.name is None)
        quota = mutation_charge(self._quotas, conn.state.principal, req.header.client_id,
                                strict=req.api_version >= 5)
        results = []
        for t in wanted:
            if t.name is None and t.topic_id == ZERO_UUID:
                result = _delete_failed(
                    t, ErrorCode.INVALID_REQUEST, "Neither topic name nor ID was given."
                )
            elif t.name in twice_names or (t.name is None and str(t.topic_id) in twice_ids):
                result = _delete_failed(
                    t, ErrorCode.INVALID_REQUEST, "The topic is named more than once."
                )
            elif quota.refused():
                result = _delete_failed(t, ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_TEXT)
            else:
                result = await self._delete_one(t, quota)
            results.append(result)
        return apis.DeleteTopicsResponse(
            throttle_time_ms=quota.throttle_ms(),
            responses=tuple(results))

    async def _delete_one(
        self, t: DeleteTopicState, quota: MutationCharge
    ) -> apis.DeletableTopicResult:
        # A name wins over an ID when both are given (as in Kafka).
        if t.name is not None:
            info = self._core.topic_registry.topics().get(t.name)
            if info is None:
                return _delete_failed(
                    t, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{t.name}' does not exist."
                )
        else:
            info = self._core.topic_registry.topic_by_id(t.topic_id)
            if info is None:
                return _delete_failed(
                    t, ErrorCode.UNKNOWN_TOPIC_ID, f"No topic has the ID {t.topic_id}."
                )
        try:
            await self._core.topic_registry.delete_topic(info.name)
        except Exception as e:
            return apis.DeletableTopicResult(
                name=info.name, topic_id=info.topic_id,
                error_code=self._unexpected("delete topic", e), error_message=message(e),
            )
        quota.charge(info.partitions)
        return apis.DeletableTopicResult(name=info.name, topic_id=info.topic_id, error_code=0)

    async def init_producer_id(
        self, conn: RequestContext, req: Request[apis.InitProducerIdRequest]
    ) -> apis.InitProducerIdResponse:
        body = req.body
        if body.transactional_id is not None:
            return await self._txn.init_producer_id(req.api_version, body)
        # An idempotent producer always gets a new id, epoch 0, even when v3+ names its
        # current one (as Kafka does: its sequence numbers start over with the new id).
        try:
            producer_id = await self._core.init_producer_id()
        except Exception as e:
            return apis.InitProducerIdResponse(
                error_code=self._unexpected("init producer id", e)
            )
        return apis.InitProducerIdResponse(
            error_code=0, producer_id=producer_id, producer_epoch=0
        )


# -- answers built from a request alone ------------------------------------------------


def _metadata_topics_refused(
    topics: Sequence[apis.MetadataRequestTopic], version: int
) -> bool:
    """Whether a Metadata request's topic list is refused as a whole: a topic with
    neither name nor ID, or (v10 and v11, which carry the ID field but, as Kafka's schema
    says, may not use it) an ID or a null name."""
    return any(
        (t.name is None and t.topic_id == ZERO_UUID)
        or (version < 12 and (t.name is None or t.topic_id != ZERO_UUID))
        for t in topics
    )


def _metadata_refused(
    topics: Sequence[apis.MetadataRequestTopic], version: int
) -> apis.MetadataResponse:
    """Kafka's answer to a refused Metadata request: every topic asked for with
    INVALID_REQUEST, and (v13+) the top-level error code too. The broker list stays
    empty: the client learns nothing from a request it got wrong."""
    return apis.MetadataResponse(
        topics=tuple(
            apis.MetadataTopic(
                error_code=ErrorCode.INVALID_REQUEST,
                # Null names are v12+; before, an empty one stands in for it.
                name=t.name if t.name is not None or version >= 12 else "",
                topic_id=t.topic_id,
            )
            for t in topics
        ),
        error_code=ErrorCode.INVALID_REQUEST,
    )


def _partitions_refused(
    body: DescribeTopicPartitionsRequest, text: str
) -> DescribeTopicPartitionsResponse:
    """Kafka's answer to a DescribeTopicPartitions request it refuses: every topic named
    with INVALID_REQUEST, no partitions, no cursor."""
    return DescribeTopicPartitionsResponse(
        topics=tuple(
            DescribeTopicPartitionsTopic(error_code=ErrorCode.INVALID_REQUEST, name=t.name)
            for t in body.topics
        ),
    )


def _unknown_partitions_topic(name: str) -> DescribeTopicPartitionsTopic:
    try:
        validate_topic_name(name)
    except InvalidTopic:
        return DescribeTopicPartitionsTopic(
            error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=name
        )
    return DescribeTopicPartitionsTopic(
        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name
    )


def _create_failed(
    t: apis.CreatableTopic, code: ErrorCode, text: str
) -> apis.CreatableTopicResult:
    return apis.CreatableTopicResult(name=t.name, error_code=code, error_message=text)


def _topics_to_delete(body: apis.DeleteTopicsRequest, version: int) -> list[DeleteTopicState]:
    """The topics of a DeleteTopics request: v6+ name each by name or by ID, v1-5 by
    name (``topic_names``)."""
    if version >= 6:
        return list(body.topics)
    return [DeleteTopicState(name=name) for name in body.topic_names]


def _delete_failed(
    t: DeleteTopicState, code: ErrorCode, text: str
) -> apis.DeletableTopicResult:
    return apis.DeletableTopicResult(
        name=t.name, topic_id=t.topic_id, error_code=code, error_message=text
    )


# -- ACL rules (brokerd.kafka.server.acl_gate) ----------------------------------------


#: A request entry, its own key (the rule looks at the whole entry: a name or an ID).
E = TypeVar("E")


def _entry(entry: E) -> E:
    return entry


#: How a rule finds a topic by ID (the core's ``topic_by_id``).
TopicById = Callable[[uuid.UUID], TopicInfo | None]


def metadata_rule(
    access: Access, req: Request[apis.MetadataRequest], *, topic_by_id: TopicById
) -> Gate[apis.MetadataRequest, apis.MetadataResponse]:
    body = req.body
    if body.topics is None or (req.api_version == 0 and not body.topics):
        return Gate(req, finish=keep_only(
            lambda r: r.topics,
            lambda r, kept: attrs.evolve(r, topics=kept),
            lambda t: t.name is not None and access.topic(Operation.DESCRIBE, t.name),
        ))

    def error(t: apis.MetadataRequestTopic) -> ErrorCode | None:
        if t.topic_id != ZERO_UUID:
            # An ID no topic has is answered UNKNOWN_TOPIC_ID by the handler; IDs are
            # not secret, so a known one refused says TOPIC_AUTHORIZATION_FAILED.
            info = topic_by_id(t.topic_id)
            if info is None or access.topic(Operation.DESCRIBE, info.name):
                return None
            return TOPIC_DENIED
        name = t.name
        if name is None:
            return None  # the handler refuses the request
        if not access.topic(Operation.DESCRIBE, name):
            return TOPIC_DENIED
        # A topic this request would create needs CREATE (Kafka answers
        # TOPIC_AUTHORIZATION_FAILED for it, as for a topic it may not see).
        if (
            body.allow_auto_topic_creation
            and access.core.auto_create_topics
            and name not in access.core.topics()
            and not access.may_create(name)
        ):
            return TOPIC_DENIED
        return None

    def denied(t: apis.MetadataRequestTopic, code: ErrorCode) -> apis.MetadataTopic:
        by_id = t.topic_id != ZERO_UUID
        return apis.MetadataTopic(
            error_code=code, name=None if by_id else t.name, topic_id=t.topic_id
        )

    gate: Gate[apis.MetadataRequest, apis.MetadataResponse] = split_entries(
        req, body.topics, _entry, error, denied,
        narrow=lambda kept: attrs.evolve(body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, topics=(*r.topics, *denied)),
    )
    if gate.changed and not gate.request.body.topics:
        # Everything named was denied: an empty list would mean "all topics" at v0.
        return answer_now(req, gate.finish(apis.MetadataResponse(topics=())))
    return gate


def describe_cluster_rule(
    access: Access, req: Request[DescribeClusterRequest]
) -> Gate[DescribeClusterRequest, DescribeClusterResponse]:
    """Kafka checks nothing for DescribeCluster: any client may learn the brokers (as
    from Metadata); the authorized operations it asks for are this principal's, and
    none unless it may DESCRIBE the cluster (:class:`AuthorizedOperations`)."""
    return Gate(req)


def describe_topic_partitions_rule(
    access: Access, req: Request[DescribeTopicPartitionsRequest]
) -> Gate[DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse]:
    """Nothing here: the handler leaves out the topics the principal may not DESCRIBE
    itself, before it counts partitions against the limit and places the cursor (which
    must never name a hidden topic)."""
    return Gate(req)


def create_topics_rule(
    access: Access, req: Request[apis.CreateTopicsRequest]
) -> Gate[apis.CreateTopicsRequest, apis.CreateTopicsResponse]:
    def error(name: str) -> ErrorCode | None:
        return None if access.may_create(name) else TOPIC_DENIED

    def denied(t: apis.CreatableTopic, code: ErrorCode) -> apis.CreatableTopicResult:
        return apis.CreatableTopicResult(name=t.name, error_code=code, error_message=DENIED_TEXT)

    return split_entries(
        req, req.body.topics, by_name, error, denied,
        narrow=lambda kept: attrs.evolve(req.body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, topics=(*r.topics, *denied)),
    )


def delete_topics_rule(
    access: Access, req: Request[apis.DeleteTopicsRequest], *, topic_by_id: TopicById
) -> Gate[apis.DeleteTopicsRequest, apis.DeleteTopicsResponse]:
    body = req.body
    if req.api_version < 6:
        return split_entries(
            req, body.topic_names, itself, topic_op(Operation.DELETE, access),
            lambda n, code: apis.DeletableTopicResult(
                name=n, error_code=code, error_message=DENIED_TEXT
            ),
            narrow=lambda kept: attrs.evolve(body, topic_names=kept),
            widen=lambda r, denied: attrs.evolve(r, responses=(*r.responses, *denied)),
        )

    def error(t: DeleteTopicState) -> ErrorCode | None:
        if t.name is not None:
            return None if access.topic(Operation.DELETE, t.name) else TOPIC_DENIED
        info = topic_by_id(t.topic_id)
        if info is None:
            return None  # the handler answers UNKNOWN_TOPIC_ID
        # A topic the principal may not see is not there for it (Kafka's rule).
        if not access.topic(Operation.DESCRIBE, info.name):
            return ErrorCode.UNKNOWN_TOPIC_ID
        return None if access.topic(Operation.DELETE, info.name) else TOPIC_DENIED

    def denied(t: DeleteTopicState, code: ErrorCode) -> apis.DeletableTopicResult:
        name = t.name
        if name is None and code == TOPIC_DENIED:
            info = topic_by_id(t.topic_id)
            name = None if info is None else info.name
        text = DENIED_TEXT if code == TOPIC_DENIED else f"No topic has the ID {t.topic_id}."
        return apis.DeletableTopicResult(
            name=name, topic_id=t.topic_id, error_code=code, error_message=text
        )

    return split_entries(
        req, body.topics, _entry, error, denied,
        narrow=lambda kept: attrs.evolve(body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, responses=(*r.responses, *denied)),
    )


def init_producer_id_rule(
    access: Access, req: Request[apis.InitProducerIdRequest]
) -> Gate[apis.InitProducerIdRequest, apis.InitProducerIdResponse]:
    body = req.body
    if body.transactional_id is not None:
        if access.txn(Operation.WRITE, body.transactional_id):
            return Gate(req)
        return answer_now(req, apis.InitProducerIdResponse(error_code=TXN_DENIED))
    # An idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic.
    if access.cluster(Operation.IDEMPOTENT_WRITE) or access.authorizer.authorize_any(
        access.principal, access.host, Operation.WRITE, ResourceType.TOPIC
    ):
        return Gate(req)
    return answer_now(req, apis.InitProducerIdResponse(error_code=CLUSTER_DENIED))
