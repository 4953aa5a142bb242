# -*- test-case-name: tests.kafka.test_errors -*-
"""Kafka error codes and the mapping from :mod:`brokerd.errors` to them.

Codes and names follow ``clients/src/main/java/org/apache/kafka/common/protocol/Errors.java``.
Only the codes brokerd can send are listed: the request handlers' and the group
coordinator's (one enum for both). Pure: no I/O, no Twisted.
"""

from __future__ import annotations

import enum

from brokerd import errors


class ErrorCode(enum.IntEnum):
    """Kafka's error codes, with Kafka's numbers and names."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    MESSAGE_TOO_LARGE = 10
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    # Authorization (brokerd/kafka/server/acl_gate.py).
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    SECURITY_DISABLED = 54
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    #: AddPartitionsToTxn: this partition was fine, but another one of the request failed.
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    UNSUPPORTED_COMPRESSION_TYPE = 76
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    # Group admin APIs.
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    #: Fetch: an incremental fetch in a session the broker does not have.
    FETCH_SESSION_ID_NOT_FOUND = 70
    #: Fetch: an incremental fetch whose epoch is not the one its session expects.
    INVALID_FETCH_SESSION_EPOCH = 71
    #: Fetch: a session opened with topic IDs continued without them, or the reverse.
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    # Transactions.
    PRODUCER_FENCED = 90
    TRANSACTIONAL_ID_NOT_FOUND = 105
    # Leader elections and reassignments (one node: never needed, none in progress).
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    # Leader epochs (KIP-320): the client's epoch is older / newer than the leader's.
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 76
    # Topic IDs and DescribeCluster's endpoint types.
    UNKNOWN_TOPIC_ID = 100
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    INVALID_REGULAR_EXPRESSION = 128
    #: ApiVersions v5+ (KIP-1242): the client meant another cluster or node.
    REBOOTSTRAP_REQUIRED = 129
    # The consumer group protocol (KIP-848).
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    # Client telemetry (KIP-714).
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    # Share groups (KIP-932).
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    # Streams groups (KIP-1071): a topology that cannot be one, a description (KIP-1331)
    # of another topology epoch than the group's.
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    #: ShareFetch: the broker holds as many share sessions as it may; a new one is
    #: refused, the existing ones go on.
    SHARE_SESSION_LIMIT_REACHED = 133


#: Most specific class first: the first ``isinstance`` match wins.
_MAPPING: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (errors.OffsetOutOfRange, ErrorCode.OFFSET_OUT_OF_RANGE),
    (errors.CorruptBatch, ErrorCode.CORRUPT_MESSAGE),
    (errors.UnknownTopicOrPartition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (errors.InvalidTopic, ErrorCode.INVALID_TOPIC_EXCEPTION),
    (errors.TopicAlreadyExists, ErrorCode.TOPIC_ALREADY_EXISTS),
    (errors.InvalidPartitions, ErrorCode.INVALID_PARTITIONS),
    (errors.PolicyViolation, ErrorCode.POLICY_VIOLATION),
    (errors.RecordTooLarge, ErrorCode.MESSAGE_TOO_LARGE),
    (errors.InvalidTimestamp, ErrorCode.INVALID_TIMESTAMP),
    (errors.InvalidConfig, ErrorCode.INVALID_CONFIG),
    # Before StorageError: a batch failing its CRC on read is what Kafka reports as
    # CORRUPT_MESSAGE, which clients surface to the application instead of retrying.
    (errors.CorruptStoredBatch, ErrorCode.CORRUPT_MESSAGE),
    (errors.StorageError, ErrorCode.KAFKA_STORAGE_ERROR),
    # Retriable, and makes every client refresh metadata and retry: what a client of a
    # broker that is going away should do (it will reconnect after the restart).
    (errors.ShuttingDown, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (errors.DuplicateSequence, ErrorCode.DUPLICATE_SEQUENCE_NUMBER),
    (errors.OutOfOrderSequence, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (errors.InvalidProducerEpoch, ErrorCode.INVALID_PRODUCER_EPOCH),
    (errors.InvalidTxnState, ErrorCode.INVALID_TXN_STATE),
)


def error_code_for(exc: BaseException) -> ErrorCode:
    """The Kafka error code a client should see for ``exc`` (UNKNOWN_SERVER_ERROR for
    anything brokerd does not expect)."""
    for cls, code in _MAPPING:
        if isinstance(exc, cls):
            return code
    return ErrorCode.UNKNOWN_SERVER_ERROR
