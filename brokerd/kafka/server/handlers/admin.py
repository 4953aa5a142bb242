# -*- test-case-name: tests.test_kafka_protocol -*-
"""Kafka cluster and topic administration: ApiVersions, Metadata, CreateTopics,
DeleteTopics and InitProducerId.

Each handler turns a decoded request body (:mod:`brokerd.kafka.wire.apis`) into a response
message, calling the broker core for topics and producer ids. brokerd is a single node:
every partition's leader, replica and in-sync replica is this node, and CreateTopics
accepts replication factor 1 (or -1) only. InitProducerId allocates a fresh producer id
for an idempotent producer here and hands a transactional one (a transactional id is
set) to :class:`~brokerd.kafka.server.handlers.txn.TxnHandlers`.

It does not parse or build bytes and does not dispatch: :class:`~brokerd.kafka.server.dispatch.
KafkaHandlers` routes requests here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
from twisted.logger import Logger

from brokerd.errors import InvalidTopic
from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.authorize import (
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
from brokerd.kafka.server.authorized_ops import AuthorizedOperations
from brokerd.kafka.server.handler_base import (
    LEADER_EPOCH,
    BrokerIdentity,
    Connection,
    message,
    repeated,
    unexpected_code,
)
from brokerd.kafka.server.handlers.txn import TxnHandlers
from brokerd.kafka.server.route import Route
from brokerd.kafka.wire import apis
from brokerd.kafka.wire.apis import Request
from brokerd.kafka.wire.codec import ApiKey
from brokerd.names import is_internal_topic, validate_topic_name
from brokerd.security.acl import Operation, ResourceType
from brokerd.storage.types import TopicInfo

if TYPE_CHECKING:
    from brokerd.kafka.server.core_face import KafkaCore

#: Partitions of a topic created by CreateTopics with num_partitions -1, unless the
#: factory is given another (Kafka's ``num.partitions`` default).
DEFAULT_PARTITIONS = 1
#: Metadata entries kept (one per topic); past this the cache starts over.
METADATA_CACHE_TOPICS = 20000


class AdminHandlers:
    """Answers the cluster and topic administration APIs.

    :param core: the broker core (:class:`~brokerd.kafka.server.dispatch.KafkaCore`).
    :param identity: node id, advertised host/port and cluster id (read live).
    :param default_partitions: partitions for CreateTopics with num_partitions -1.
    :param transactional: answers InitProducerId with a transactional id (default: as a
        broker without a transaction coordinator does).
    :param operations: fills Metadata's authorized-operations fields when asked
        (default: no authorizer, every operation).
    """

    _log = Logger()

    def __init__(
        self,
        core: KafkaCore,
        identity: BrokerIdentity,
        *,
        default_partitions: int = DEFAULT_PARTITIONS,
        transactional: TxnHandlers | None = None,
        operations: AuthorizedOperations | None = None,
    ) -> None:
        self._core = core
        self._id = identity
        self._operations = operations if operations is not None else AuthorizedOperations()
        self._default_partitions = default_partitions
        self._txn = transactional if transactional is not None else TxnHandlers(core, None)
        # Topic name -> ((partition count, node id), its Metadata entry).
        self._metadata_cache: dict[str, tuple[tuple[int, int], apis.MetadataTopic]] = {}

    def routes(self) -> tuple[Route, ...]:
        """This module's APIs, each handler with its ACL rule."""
        return (
            Route(ApiKey.API_VERSIONS, self.api_versions, None),
            Route(ApiKey.METADATA, self.metadata, metadata_rule),
            Route(ApiKey.CREATE_TOPICS, self.create_topics, create_topics_rule),
            Route(ApiKey.DELETE_TOPICS, self.delete_topics, delete_topics_rule),
            Route(ApiKey.INIT_PRODUCER_ID, self.init_producer_id, init_producer_id_rule),
        )

    def _unexpected(self, what: str, exc: BaseException) -> ErrorCode:
        return unexpected_code(self._log, what, exc)

    async def api_versions(self, conn: Connection, req: Request) -> Any:
        return apis.api_versions_response(req.api_version, req.body)

    def _topic_metadata(self, info: TopicInfo) -> apis.MetadataTopic:
        # Building the entry of a 10,000-partition topic takes ~50 ms of the reactor;
        # it changes only with the partition count (or the node id), so it is kept.
        node = self._id.node_id
        cached = self._metadata_cache.get(info.name)
        if cached is not None and cached[0] == (info.partitions, node):
            return cached[1]
        if len(self._metadata_cache) >= METADATA_CACHE_TOPICS:
            self._metadata_cache.clear()  # a bound on deleted names' entries
        topic = self._build_topic_metadata(info, node)
        self._metadata_cache[info.name] = ((info.partitions, node), topic)
        return topic

    @staticmethod
    def _build_topic_metadata(info: TopicInfo, node: int) -> apis.MetadataTopic:
        return apis.MetadataTopic(
            error_code=0,
            name=info.name,
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

    async def metadata(self, conn: Connection, req: Request) -> Any:
        body: apis.MetadataRequest = req.body
        known = self._core.topics()
        entries: list[apis.MetadataTopic] = []
        # v0: an empty list means every topic; v1+: null means every topic and an empty
        # list means none (librdkafka asks for brokers only that way).
        if body.topics is None or (req.api_version == 0 and not body.topics):
            entries = [self._topic_metadata(known[name]) for name in sorted(known)]
        else:
            # v0-3 have no flag: Kafka auto-creates for them whenever it may.
            allow = body.allow_auto_topic_creation if req.api_version >= 4 else True
            seen: set[str] = set()
            for wanted in body.topics:
                name = wanted.name
                if name in seen:
                    continue
                seen.add(name)
                entries.append(await self._one_topic_metadata(name, known, allow))
        cluster_ops = apis.AUTHORIZED_OPERATIONS_OMITTED
        if req.api_version >= 8:
            ops = self._operations
            if body.include_topic_authorized_operations:
                entries = [
                    attrs.evolve(t, topic_authorized_operations=ops.topic(conn, t.name))
                    for t in entries
                ]
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

    async def _one_topic_metadata(
        self, name: str, known: Mapping[str, TopicInfo], allow_create: bool
    ) -> apis.MetadataTopic:
        info = known.get(name)
        if info is not None:
            return self._topic_metadata(info)
        try:
            validate_topic_name(name)
        except InvalidTopic:
            return apis.MetadataTopic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=name)
        if not (allow_create and self._core.auto_create_topics):
            return apis.MetadataTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name)
        try:
            info = await self._core.ensure_topic(name)
        except Exception as e:
            return apis.MetadataTopic(
                error_code=self._unexpected("auto-create", e), name=name
            )
        return self._topic_metadata(info)


    async def create_topics(self, conn: Connection, req: Request) -> Any:
        body: apis.CreateTopicsRequest = req.body
        twice = repeated(t.name for t in body.topics)
        results = []
        for t in body.topics:
            if t.name in twice:
                code, text = ErrorCode.INVALID_REQUEST, "topic named more than once"
            else:
                code, text = await self._create_one(t, body.validate_only)
            results.append(
                apis.CreatableTopicResult(
                    name=t.name, error_code=code, error_message=text if code else None
                )
            )
        return apis.CreateTopicsResponse(topics=tuple(results))

    async def _create_one(
        self, t: apis.CreatableTopic, validate_only: bool
    ) -> tuple[ErrorCode, str]:
        try:
            validate_topic_name(t.name)
        except InvalidTopic as e:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)
        names = [c.name for c in t.configs]
        if len(set(names)) != len(names):
            return ErrorCode.INVALID_REQUEST, "a topic config is given more than once"
        node = self._id.node_id
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                return ErrorCode.INVALID_REQUEST, (
                    "set either assignments or num_partitions/replication_factor"
                )
            indexes = sorted(a.partition_index for a in t.assignments)
            if indexes != list(range(len(indexes))) or any(
                tuple(a.broker_ids) != (node,) for a in t.assignments
            ):
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"partitions must be 0..n-1, each on broker {node} alone"
                )
            partitions = len(indexes)
        else:
            if t.replication_factor not in (-1, 1):
                return ErrorCode.INVALID_REPLICATION_FACTOR, (
                    f"brokerd is a single node: replication factor must be 1, "
                    f"not {t.replication_factor}"
                )
            partitions = (
                self._default_partitions if t.num_partitions == -1 else t.num_partitions
            )
            if partitions <= 0:
                return ErrorCode.INVALID_PARTITIONS, (
                    f"number of partitions must be positive, not {t.num_partitions}"
                )
        try:
            # The core validates the configs (INVALID_CONFIG naming the key) and, with
            # validate_only, everything else too, creating nothing.
            await self._core.create_topic(
                t.name,
                partitions,
                {c.name: c.value for c in t.configs},
                validate_only=validate_only,
            )
        except Exception as e:
            return self._unexpected("create topic", e), message(e)
        return ErrorCode.NONE, ""

    async def delete_topics(self, conn: Connection, req: Request) -> Any:
        body: apis.DeleteTopicsRequest = req.body
        results = []
        for name in body.topic_names:
            code: int = ErrorCode.NONE
            if name not in self._core.topics():
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                try:
                    await self._core.delete_topic(name)
                except Exception as e:
                    code = self._unexpected("delete topic", e)
            results.append(apis.DeletableTopicResult(name=name, error_code=code))
        return apis.DeleteTopicsResponse(responses=tuple(results))

    async def init_producer_id(self, conn: Connection, req: Request) -> Any:
        body: apis.InitProducerIdRequest = req.body
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


# -- ACL rules (brokerd.kafka.server.authorize) ----------------------------------------


def metadata_rule(access: Access, req: Request) -> Gate:
    body: apis.MetadataRequest = req.body
    if body.topics is None or (req.api_version == 0 and not body.topics):
        return Gate(req, finish=keep_only(
            lambda r: r.topics,
            lambda r, kept: attrs.evolve(r, topics=kept),
            lambda t: access.topic(Operation.DESCRIBE, t.name),
        ))

    def error(name: str) -> ErrorCode | None:
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
        return apis.MetadataTopic(error_code=code, name=t.name)

    gate = split_entries(
        req, body.topics, by_name, error, denied,
        narrow=lambda kept: attrs.evolve(body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, topics=(*r.topics, *denied)),
    )
    if gate.changed and not gate.request.body.topics:
        # Everything named was denied: an empty list would mean "all topics" at v0.
        return answer_now(req, gate.finish(apis.MetadataResponse(topics=())))
    return gate


def create_topics_rule(access: Access, req: Request) -> Gate:
    def error(name: str) -> ErrorCode | None:
        return None if access.may_create(name) else TOPIC_DENIED

    def denied(t: apis.CreatableTopic, code: ErrorCode) -> apis.CreatableTopicResult:
        return apis.CreatableTopicResult(name=t.name, error_code=code, error_message=DENIED_TEXT)

    return split_entries(
        req, req.body.topics, by_name, error, denied,
        narrow=lambda kept: attrs.evolve(req.body, topics=kept),
        widen=lambda r, denied: attrs.evolve(r, topics=(*r.topics, *denied)),
    )


def delete_topics_rule(access: Access, req: Request) -> Gate:
    return split_entries(
        req, req.body.topic_names, itself, topic_op(Operation.DELETE, access),
        lambda n, code: apis.DeletableTopicResult(name=n, error_code=code),
        narrow=lambda kept: attrs.evolve(req.body, topic_names=kept),
        widen=lambda r, denied: attrs.evolve(r, responses=(*r.responses, *denied)),
    )


def init_producer_id_rule(access: Access, req: Request) -> Gate:
    body: apis.InitProducerIdRequest = req.body
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
