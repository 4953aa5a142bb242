# -*- test-case-name: tests.test_acl_enforcement -*-
"""Which ACL each Kafka API needs: one table, :data:`RULES`, of per-API checks.

A check looks at a decoded request with the connection's principal and host
(:class:`Access`) and returns a :class:`Gate`: pass the request on unchanged; answer it
at once (every resource denied, e.g. JoinGroup without READ on its group); or pass on a
request with the denied topics/groups taken out, and add their error entries to the
handler's response (``finish``). Lists of everything (Metadata for all topics,
ListGroups, ListTransactions, OffsetFetch of all topics) are filtered to what the
principal may DESCRIBE. Whether a denied topic exists is never revealed: a topic the
principal may not use gets TOPIC_AUTHORIZATION_FAILED whether it exists or not.

The rules follow Kafka's ``KafkaApis`` (summarised in ``docs/security.md``). An API
missing from :data:`RULES` is not checked: :data:`UNCHECKED` lists the ones meant to be
(ApiVersions); a test fails when a dispatched API is in neither.

It does not decide (:class:`brokerd.security.acl.AclAuthorizer` does) or change any
state; it only reads the current topic names (to refuse an auto-creation).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import attrs

from brokerd.kafka.errors import ErrorCode
from brokerd.kafka.server.handler_base import CLOSE_CONNECTION, Connection, Handler, Outcome
from brokerd.kafka.wire import apis
from brokerd.kafka.wire.apis import Request
from brokerd.kafka.wire.codec import ApiKey
from brokerd.kafka.wire.messages import acl as acl_apis
from brokerd.kafka.wire.messages import sasl as sasl_apis
from brokerd.security.acl import (
    ANONYMOUS,
    CLUSTER_NAME,
    AclAuthorizer,
    Operation,
    ResourceType,
)

TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
#: DescribeConfigs/AlterConfigs resource types (Kafka's ConfigResource.Type).
CONFIG_TOPIC = 2
CONFIG_BROKER = 4
#: FindCoordinator key types.
COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1

_DENIED_TEXT = "not authorized"


class TopicNames(Protocol):
    """What :class:`Access` needs of the core: the topics that exist, and whether an
    unknown one would be created."""

    @property
    def auto_create_topics(self) -> bool: ...

    def topics(self) -> Collection[str]: ...


@attrs.frozen
class Access:
    """One connection's principal and host, checked against the authorizer."""

    authorizer: AclAuthorizer
    principal: str
    host: str
    core: TopicNames

    def allows(self, op: Operation, rtype: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, op, rtype, name)

    def topic(self, op: Operation, name: str) -> bool:
        return self.allows(op, ResourceType.TOPIC, name)

    def group(self, op: Operation, name: str) -> bool:
        return self.allows(op, ResourceType.GROUP, name)

    def txn(self, op: Operation, name: str) -> bool:
        return self.allows(op, ResourceType.TRANSACTIONAL_ID, name)

    def cluster(self, op: Operation) -> bool:
        return self.allows(op, ResourceType.CLUSTER, CLUSTER_NAME)

    def may_create(self, name: str) -> bool:
        """CREATE on the topic or on the cluster (Kafka accepts either)."""
        return self.cluster(Operation.CREATE) or self.topic(Operation.CREATE, name)

    def topic_error(self, op: Operation, name: str) -> ErrorCode | None:
        """Why ``op`` on topic ``name`` is refused, or None. A topic that would be
        auto-created needs CREATE too."""
        if not self.topic(op, name):
            return TOPIC_DENIED
        if (
            self.core.auto_create_topics
            and name not in self.core.topics()
            and not self.may_create(name)
        ):
            return TOPIC_DENIED
        return None


Finish = Callable[[Any], Any]
#: What identifies a request entry to its check (a name, or a config resource).
K = TypeVar("K")


def _same(response: Any) -> Any:
    return response


@attrs.frozen
class Gate:
    """What the dispatch does with a request: answer now (``answer`` set), or run the
    handler on ``request`` and pass its response through ``finish``."""

    request: Request
    answer: Any = None
    finish: Finish = _same


Rule = Callable[[Access, Request], Gate]


def _answer(req: Request, response: Any) -> Gate:
    return Gate(req, answer=response)


def _body(req: Request, **changes: Any) -> Request:
    return Request(req.header, attrs.evolve(req.body, **changes))


def _split(
    req: Request,
    entries_field: str,
    name_of: Callable[[Any], K],
    error_of: Callable[[K], ErrorCode | None],
    denied_entry: Callable[[Any, ErrorCode], Any],
    response_field: str,
) -> Gate:
    """Take the entries ``error_of`` refuses out of ``req``'s ``entries_field`` and add
    ``denied_entry`` for each to the response's ``response_field``."""
    entries: Sequence[Any] = getattr(req.body, entries_field)
    allowed: list[Any] = []
    denied: list[Any] = []
    for entry in entries:
        code = error_of(name_of(entry))
        if code is None:
            allowed.append(entry)
        else:
            denied.append(denied_entry(entry, code))
    if not denied:
        return Gate(req)

    def finish(response: Any) -> Any:
        if isinstance(response, Outcome):
            return response
        kept = tuple(getattr(response, response_field))
        return attrs.evolve(response, **{response_field: kept + tuple(denied)})

    return Gate(_body(req, **{entries_field: tuple(allowed)}), finish=finish)


def _keep(response_field: str, keep: Callable[[Any], bool]) -> Finish:
    def finish(response: Any) -> Any:
        if isinstance(response, Outcome):
            return response
        entries = getattr(response, response_field)
        return attrs.evolve(response, **{response_field: tuple(e for e in entries if keep(e))})

    return finish


def _name(entry: Any) -> str:
    name: str = entry.name
    return name


def _itself(entry: str) -> str:
    return entry


# -- data path -------------------------------------------------------------------------


def _produce_denied(t: apis.ProduceTopicData, code: ErrorCode) -> apis.ProduceTopicResponse:
    return apis.ProduceTopicResponse(
        name=t.name,
        partition_responses=tuple(
            apis.ProducePartitionResponse(index=p.index, error_code=code)
            for p in t.partition_data
        ),
    )


def produce(access: Access, req: Request) -> Gate:
    body: apis.ProduceRequest = req.body
    txn_id = body.transactional_id
    if txn_id is not None and not access.txn(Operation.WRITE, txn_id):
        if body.acks == 0:
            return _answer(req, CLOSE_CONNECTION)
        return _answer(req, apis.ProduceResponse(
            responses=tuple(_produce_denied(t, TXN_DENIED) for t in body.topic_data)
        ))
    gate = _split(
        req, "topic_data", _name, lambda n: access.topic_error(Operation.WRITE, n),
        _produce_denied, "responses",
    )
    if body.acks == 0 and gate.finish is not _same:
        # Nothing can be answered to acks=0: Kafka closes the connection.
        return _answer(req, CLOSE_CONNECTION)
    return gate


def fetch(access: Access, req: Request) -> Gate:
    def denied(t: apis.FetchTopic, code: ErrorCode) -> apis.FetchTopicResponse:
        return apis.FetchTopicResponse(topic=t.topic, partitions=tuple(
            apis.FetchPartitionResponse(partition_index=p.partition, error_code=code, records=b"")
            for p in t.partitions
        ))

    def error(name: str) -> ErrorCode | None:
        return None if access.topic(Operation.READ, name) else TOPIC_DENIED

    return _split(req, "topics", lambda t: t.topic, error, denied, "responses")


def list_offsets(access: Access, req: Request) -> Gate:
    def denied(t: apis.ListOffsetsTopic, code: ErrorCode) -> apis.ListOffsetsTopicResponse:
        return apis.ListOffsetsTopicResponse(name=t.name, partitions=tuple(
            apis.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code)
            for p in t.partitions
        ))

    def error(name: str) -> ErrorCode | None:
        return None if access.topic(Operation.DESCRIBE, name) else TOPIC_DENIED

    return _split(req, "topics", _name, error, denied, "topics")


def metadata(access: Access, req: Request) -> Gate:
    body: apis.MetadataRequest = req.body
    if body.topics is None or (req.api_version == 0 and not body.topics):
        return Gate(req, finish=_keep("topics", lambda t: access.topic(Operation.DESCRIBE, t.name)))

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

    gate = _split(req, "topics", _name, error, denied, "topics")
    if gate.finish is not _same and not gate.request.body.topics:
        # Everything named was denied: an empty list would mean "all topics" at v0.
        return _answer(req, gate.finish(apis.MetadataResponse(topics=())))
    return gate


# -- topic administration -------------------------------------------------------------


def create_topics(access: Access, req: Request) -> Gate:
    def error(name: str) -> ErrorCode | None:
        return None if access.may_create(name) else TOPIC_DENIED

    def denied(t: apis.CreatableTopic, code: ErrorCode) -> apis.CreatableTopicResult:
        return apis.CreatableTopicResult(name=t.name, error_code=code, error_message=_DENIED_TEXT)

    return _split(req, "topics", _name, error, denied, "topics")


def _topic_op(op: Operation, access: Access) -> Callable[[str], ErrorCode | None]:
    return lambda name: None if access.topic(op, name) else TOPIC_DENIED


def delete_topics(access: Access, req: Request) -> Gate:
    return _split(
        req, "topic_names", _itself, _topic_op(Operation.DELETE, access),
        lambda n, code: apis.DeletableTopicResult(name=n, error_code=code), "responses",
    )


def create_partitions(access: Access, req: Request) -> Gate:
    return _split(
        req, "topics", _name, _topic_op(Operation.ALTER, access),
        lambda t, code: apis.CreatePartitionsTopicResult(
            name=t.name, error_code=code, error_message=_DENIED_TEXT
        ),
        "results",
    )


def delete_records(access: Access, req: Request) -> Gate:
    def denied(t: apis.DeleteRecordsTopic, code: ErrorCode) -> apis.DeleteRecordsTopicResult:
        return apis.DeleteRecordsTopicResult(name=t.name, partitions=tuple(
            apis.DeleteRecordsPartitionResult(partition_index=p.partition_index, error_code=code)
            for p in t.partitions
        ))

    return _split(req, "topics", _name, _topic_op(Operation.DELETE, access), denied, "topics")


def _config_error(access: Access, op: Operation) -> Callable[[tuple[int, str]], ErrorCode | None]:
    def error(resource: tuple[int, str]) -> ErrorCode | None:
        rtype, name = resource
        if rtype == CONFIG_TOPIC:
            return None if access.topic(op, name) else TOPIC_DENIED
        # Broker and broker-logger configs belong to the cluster.
        return None if access.cluster(op) else CLUSTER_DENIED

    return error


def _resource(r: Any) -> tuple[int, str]:
    return (r.resource_type, r.resource_name)


def describe_configs(access: Access, req: Request) -> Gate:
    return _split(
        req, "resources", _resource, _config_error(access, Operation.DESCRIBE_CONFIGS),
        lambda r, code: apis.DescribeConfigsResult(
            error_code=code, error_message=_DENIED_TEXT,
            resource_type=r.resource_type, resource_name=r.resource_name,
        ),
        "results",
    )


def alter_configs(access: Access, req: Request) -> Gate:
    return _split(
        req, "resources", _resource, _config_error(access, Operation.ALTER_CONFIGS),
        lambda r, code: apis.AlterConfigsResourceResponse(
            error_code=code, error_message=_DENIED_TEXT,
            resource_type=r.resource_type, resource_name=r.resource_name,
        ),
        "responses",
    )


def describe_log_dirs(access: Access, req: Request) -> Gate:
    if access.cluster(Operation.DESCRIBE):
        return Gate(req)
    # v0-1 have no error code: Kafka answers no log directories.
    return _answer(req, apis.DescribeLogDirsResponse(results=()))


# -- groups ----------------------------------------------------------------------------


def _group_gate(op: Operation, response: Callable[[], Any]) -> Rule:
    def rule(access: Access, req: Request) -> Gate:
        if access.group(op, req.body.group_id):
            return Gate(req)
        return _answer(req, response())

    return rule


join_group = _group_gate(
    Operation.READ, lambda: apis.JoinGroupResponse(error_code=GROUP_DENIED)
)
sync_group = _group_gate(
    Operation.READ, lambda: apis.SyncGroupResponse(error_code=GROUP_DENIED)
)
heartbeat = _group_gate(
    Operation.READ, lambda: apis.HeartbeatResponse(error_code=GROUP_DENIED)
)
leave_group = _group_gate(
    Operation.READ, lambda: apis.LeaveGroupResponse(error_code=GROUP_DENIED)
)


def find_coordinator(access: Access, req: Request) -> Gate:
    body: apis.FindCoordinatorRequest = req.body
    if body.key_type == COORDINATOR_TRANSACTION:
        ok, code = access.txn(Operation.DESCRIBE, body.key), TXN_DENIED
    else:
        ok, code = access.group(Operation.DESCRIBE, body.key), GROUP_DENIED
    if ok:
        return Gate(req)
    return _answer(req, apis.FindCoordinatorResponse(
        error_code=code, error_message=_DENIED_TEXT, node_id=-1, host="", port=-1
    ))


def _commit_topics_denied(code: ErrorCode, topics: Sequence[Any], topic_cls: Any,
                          part_cls: Any) -> tuple[Any, ...]:
    return tuple(
        topic_cls(name=t.name, partitions=tuple(
            part_cls(partition_index=p.partition_index, error_code=code) for p in t.partitions
        ))
        for t in topics
    )


def offset_commit(access: Access, req: Request) -> Gate:
    body: apis.OffsetCommitRequest = req.body
    topic_cls, part_cls = apis.OffsetCommitTopicResponse, apis.OffsetCommitPartitionResponse
    if not access.group(Operation.READ, body.group_id):
        return _answer(req, apis.OffsetCommitResponse(
            topics=_commit_topics_denied(GROUP_DENIED, body.topics, topic_cls, part_cls)
        ))
    return _split(
        req, "topics", _name, _topic_op(Operation.READ, access),
        lambda t, code: _commit_topics_denied(code, (t,), topic_cls, part_cls)[0], "topics",
    )


def txn_offset_commit(access: Access, req: Request) -> Gate:
    body: apis.TxnOffsetCommitRequest = req.body
    topic_cls = apis.TxnOffsetCommitResponseTopic
    part_cls = apis.TxnOffsetCommitResponsePartition
    for ok, code in (
        (access.txn(Operation.WRITE, body.transactional_id), TXN_DENIED),
        (access.group(Operation.READ, body.group_id), GROUP_DENIED),
    ):
        if not ok:
            return _answer(req, apis.TxnOffsetCommitResponse(
                topics=_commit_topics_denied(code, body.topics, topic_cls, part_cls)
            ))
    return _split(
        req, "topics", _name, _topic_op(Operation.READ, access),
        lambda t, code: _commit_topics_denied(code, (t,), topic_cls, part_cls)[0], "topics",
    )


def offset_fetch(access: Access, req: Request) -> Gate:
    body: apis.OffsetFetchRequest = req.body
    if not access.group(Operation.DESCRIBE, body.group_id):
        # v1 has no top-level error code: every asked partition carries it.
        return _answer(req, apis.OffsetFetchResponse(
            error_code=GROUP_DENIED,
            topics=tuple(
                apis.OffsetFetchTopicResponse(name=t.name, partitions=tuple(
                    apis.OffsetFetchPartitionResponse(partition_index=i, error_code=GROUP_DENIED)
                    for i in t.partition_indexes
                ))
                for t in body.topics or ()
            ),
        ))
    if body.topics is None:
        return Gate(req, finish=_keep("topics", lambda t: access.topic(Operation.DESCRIBE, t.name)))

    def denied(t: apis.OffsetFetchTopic, code: ErrorCode) -> apis.OffsetFetchTopicResponse:
        return apis.OffsetFetchTopicResponse(name=t.name, partitions=tuple(
            apis.OffsetFetchPartitionResponse(partition_index=i, error_code=code)
            for i in t.partition_indexes
        ))

    return _split(req, "topics", _name, _topic_op(Operation.DESCRIBE, access), denied, "topics")


def list_groups(access: Access, req: Request) -> Gate:
    if access.cluster(Operation.DESCRIBE):
        return Gate(req)
    return Gate(req, finish=_keep("groups", lambda g: access.group(Operation.DESCRIBE, g.group_id)))


def describe_groups(access: Access, req: Request) -> Gate:
    return _split(
        req, "groups", _itself,
        lambda g: None if access.group(Operation.DESCRIBE, g) else GROUP_DENIED,
        lambda g, code: apis.DescribedGroup(error_code=code, group_id=g), "groups",
    )


def delete_groups(access: Access, req: Request) -> Gate:
    return _split(
        req, "groups_names", _itself,
        lambda g: None if access.group(Operation.DELETE, g) else GROUP_DENIED,
        lambda g, code: apis.DeletableGroupResult(group_id=g, error_code=code), "results",
    )


def offset_delete(access: Access, req: Request) -> Gate:
    body: apis.OffsetDeleteRequest = req.body
    if not access.group(Operation.DELETE, body.group_id):
        return _answer(req, apis.OffsetDeleteResponse(error_code=GROUP_DENIED))

    def denied(t: apis.OffsetDeleteRequestTopic, code: ErrorCode) -> apis.OffsetDeleteResponseTopic:
        return apis.OffsetDeleteResponseTopic(name=t.name, partitions=tuple(
            apis.OffsetDeleteResponsePartition(partition_index=i, error_code=code)
            for i in t.partitions
        ))

    return _split(req, "topics", _name, _topic_op(Operation.READ, access), denied, "topics")


# -- transactions ----------------------------------------------------------------------


def init_producer_id(access: Access, req: Request) -> Gate:
    body: apis.InitProducerIdRequest = req.body
    if body.transactional_id is not None:
        if access.txn(Operation.WRITE, body.transactional_id):
            return Gate(req)
        return _answer(req, apis.InitProducerIdResponse(error_code=TXN_DENIED))
    # An idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic.
    if access.cluster(Operation.IDEMPOTENT_WRITE) or access.authorizer.authorize_any(
        access.principal, access.host, Operation.WRITE, ResourceType.TOPIC
    ):
        return Gate(req)
    return _answer(req, apis.InitProducerIdResponse(error_code=CLUSTER_DENIED))


def add_partitions_to_txn(access: Access, req: Request) -> Gate:
    body: apis.AddPartitionsToTxnRequest = req.body

    def answer(code_of: Callable[[str], ErrorCode]) -> Gate:
        return _answer(req, apis.AddPartitionsToTxnResponse(results_by_topic=tuple(
            apis.AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=tuple(
                apis.AddPartitionsToTxnPartitionResult(
                    partition_index=i, partition_error_code=code_of(t.name)
                )
                for i in t.partitions
            ))
            for t in body.topics
        )))

    if not access.txn(Operation.WRITE, body.transactional_id):
        return answer(lambda _name: TXN_DENIED)
    denied = {t.name for t in body.topics if access.topic_error(Operation.WRITE, t.name)}
    if denied:
        # Kafka adds nothing when one partition is refused; the rest are not attempted.
        return answer(
            lambda n: TOPIC_DENIED if n in denied else ErrorCode.OPERATION_NOT_ATTEMPTED
        )
    return Gate(req)


def add_offsets_to_txn(access: Access, req: Request) -> Gate:
    body: apis.AddOffsetsToTxnRequest = req.body
    if not access.txn(Operation.WRITE, body.transactional_id):
        return _answer(req, apis.AddOffsetsToTxnResponse(error_code=TXN_DENIED))
    if not access.group(Operation.READ, body.group_id):
        return _answer(req, apis.AddOffsetsToTxnResponse(error_code=GROUP_DENIED))
    return Gate(req)


def end_txn(access: Access, req: Request) -> Gate:
    if access.txn(Operation.WRITE, req.body.transactional_id):
        return Gate(req)
    return _answer(req, apis.EndTxnResponse(error_code=TXN_DENIED))


def describe_transactions(access: Access, req: Request) -> Gate:
    return _split(
        req, "transactional_ids", _itself,
        lambda t: None if access.txn(Operation.DESCRIBE, t) else TXN_DENIED,
        lambda t, code: apis.DescribeTransactionsState(error_code=code, transactional_id=t),
        "transaction_states",
    )


def list_transactions(access: Access, req: Request) -> Gate:
    return Gate(req, finish=_keep(
        "transaction_states", lambda s: access.txn(Operation.DESCRIBE, s.transactional_id)
    ))


# -- ACL administration -------------------------------------------------------------


def create_acls(access: Access, req: Request) -> Gate:
    if access.cluster(Operation.ALTER):
        return Gate(req)
    return _answer(req, acl_apis.CreateAclsResponse(results=tuple(
        acl_apis.AclCreationResult(error_code=CLUSTER_DENIED, error_message=_DENIED_TEXT)
        for _ in req.body.creations
    )))


def describe_acls(access: Access, req: Request) -> Gate:
    if access.cluster(Operation.DESCRIBE):
        return Gate(req)
    return _answer(req, acl_apis.DescribeAclsResponse(
        error_code=CLUSTER_DENIED, error_message=_DENIED_TEXT
    ))


def delete_acls(access: Access, req: Request) -> Gate:
    if access.cluster(Operation.ALTER):
        return Gate(req)
    return _answer(req, acl_apis.DeleteAclsResponse(filter_results=tuple(
        acl_apis.DeleteAclsFilterResult(error_code=CLUSTER_DENIED, error_message=_DENIED_TEXT)
        for _ in req.body.filters
    )))


# -- SCRAM credential administration ---------------------------------------------------


def describe_user_scram_credentials(access: Access, req: Request) -> Gate:
    if access.cluster(Operation.DESCRIBE):
        return Gate(req)
    return _answer(req, sasl_apis.DescribeUserScramCredentialsResponse.refused(
        req.body, CLUSTER_DENIED, _DENIED_TEXT
    ))


def alter_user_scram_credentials(access: Access, req: Request) -> Gate:
    if access.cluster(Operation.ALTER):
        return Gate(req)
    users = dict.fromkeys(
        [d.name for d in req.body.deletions] + [u.name for u in req.body.upsertions]
    )
    return _answer(req, sasl_apis.AlterUserScramCredentialsResponse(results=tuple(
        sasl_apis.AlterUserScramCredentialsResult(
            user=user, error_code=CLUSTER_DENIED, error_message=_DENIED_TEXT
        )
        for user in users
    )))


#: The check of each API.
RULES: dict[ApiKey, Rule] = {
    ApiKey.PRODUCE: produce,
    ApiKey.FETCH: fetch,
    ApiKey.LIST_OFFSETS: list_offsets,
    ApiKey.METADATA: metadata,
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.CREATE_PARTITIONS: create_partitions,
    ApiKey.DELETE_RECORDS: delete_records,
    ApiKey.DESCRIBE_CONFIGS: describe_configs,
    ApiKey.ALTER_CONFIGS: alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: alter_configs,
    ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs,
    ApiKey.FIND_COORDINATOR: find_coordinator,
    ApiKey.JOIN_GROUP: join_group,
    ApiKey.SYNC_GROUP: sync_group,
    ApiKey.HEARTBEAT: heartbeat,
    ApiKey.LEAVE_GROUP: leave_group,
    ApiKey.OFFSET_COMMIT: offset_commit,
    ApiKey.OFFSET_FETCH: offset_fetch,
    ApiKey.LIST_GROUPS: list_groups,
    ApiKey.DESCRIBE_GROUPS: describe_groups,
    ApiKey.DELETE_GROUPS: delete_groups,
    ApiKey.OFFSET_DELETE: offset_delete,
    ApiKey.INIT_PRODUCER_ID: init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn,
    ApiKey.END_TXN: end_txn,
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit,
    ApiKey.DESCRIBE_TRANSACTIONS: describe_transactions,
    ApiKey.LIST_TRANSACTIONS: list_transactions,
    ApiKey.CREATE_ACLS: create_acls,
    ApiKey.DESCRIBE_ACLS: describe_acls,
    ApiKey.DELETE_ACLS: delete_acls,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: alter_user_scram_credentials,
}

#: APIs every connection may use (a client learns the versions before anything else).
UNCHECKED: frozenset[ApiKey] = frozenset({ApiKey.API_VERSIONS})


def gate(access: Access, req: Request) -> Gate:
    rule = RULES.get(req.api_key)
    return Gate(req) if rule is None else rule(access, req)


def access_of(authorizer: AclAuthorizer, core: TopicNames, conn: Connection) -> Access:
    """The connection's principal (``User:ANONYMOUS`` until TLS or SASL set one) and
    host, as seen by ``authorizer``."""
    state = conn.state
    principal = str(getattr(state, "principal", ANONYMOUS))
    return Access(authorizer, principal, state.peer_host, core)


def guard(
    handlers: Mapping[ApiKey, Handler], authorizer: AclAuthorizer | None, core: TopicNames
) -> dict[ApiKey, Handler]:
    """``handlers`` with each checked API's handler behind its rule (unchanged when
    ``authorizer`` is None: the broker then allows everything)."""
    if authorizer is None:
        return dict(handlers)

    def wrap(handler: Handler) -> Handler:
        async def guarded(conn: Connection, req: Request) -> Any:
            g = gate(access_of(authorizer, core, conn), req)
            if g.answer is not None:
                return g.answer
            return g.finish(await handler(conn, g.request))

        return guarded

    return {key: wrap(h) if key in RULES else h for key, h in handlers.items()}
