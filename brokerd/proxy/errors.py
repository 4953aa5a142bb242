# -*- test-case-name: tests.proxy.test_errors -*-
"""The REST Proxy's failures, as Confluent's REST Proxy answers them: an HTTP status and a
body ``{"error_code": N, "message": "..."}`` whose code is the status followed by two
digits when the status alone does not say enough (40401 topic not found, ...).

Also the map from the broker core's exceptions (:mod:`brokerd.errors`) to those answers,
so every layer of the proxy raises or lets through what it knows and the HTTP layer
answers it one way.
"""

from __future__ import annotations

from brokerd.errors import (
    AuthorizationFailed,
    BrokerError,
    InvalidConfig,
    InvalidPartitions,
    InvalidRecord,
    InvalidTopic,
    OffsetOutOfRange,
    PolicyViolation,
    RecordTooLarge,
    ShuttingDown,
    TopicAlreadyExists,
    UnknownTopicOrPartition,
)

#: Confluent's error codes (its REST Proxy's ``Errors`` table).
TOPIC_NOT_FOUND = 40401
PARTITION_NOT_FOUND = 40402
CONSUMER_INSTANCE_NOT_FOUND = 40403
NOT_FOUND = 404
NOT_ACCEPTABLE = 406
UNSUPPORTED_CONTENT_TYPE = 40601
CONSUMER_ALREADY_EXISTS = 40902
ILLEGAL_STATE = 40903
CONFLICT = 409
TOO_LARGE = 413
UNPROCESSABLE = 422
INVALID_CONSUMER_CONFIG = 42204
KEY_SCHEMA_MISSING = 42201
VALUE_SCHEMA_MISSING = 42202
INVALID_SCHEMA = 42205
SERIALIZATION = 42203
TOO_MANY_REQUESTS = 429
KAFKA_ERROR = 50001
#: A schema format asked of a broker without its registry (--schema-registry none).
NO_REGISTRY = 42207
KAFKA_RETRIABLE = 50003
UNAUTHORIZED = 40101
FORBIDDEN = 40301


class ProxyError(Exception):
    """A failure answered to a client: the HTTP status, Confluent's error code and a
    message."""

    def __init__(self, http_status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


def topic_not_found(topic: str) -> ProxyError:
    return ProxyError(404, TOPIC_NOT_FOUND, f"Topic {topic} not found.")


def partition_not_found(topic: str, partition: int) -> ProxyError:
    return ProxyError(404, PARTITION_NOT_FOUND, f"Partition {partition} of topic {topic} "
                      "not found.")


def bad_request(message: str) -> ProxyError:
    return ProxyError(422, UNPROCESSABLE, message)


def forbidden(what: str) -> ProxyError:
    return ProxyError(403, FORBIDDEN, f"Not authorized to {what}.")


#: A broker core failure's answer, first match: (exception classes, HTTP status,
#: Confluent error code).
_Kinds = type[BaseException] | tuple[type[BaseException], ...]
_BROKER_ERRORS: tuple[tuple[_Kinds, int, int], ...] = (
    (UnknownTopicOrPartition, 404, TOPIC_NOT_FOUND),
    (AuthorizationFailed, 403, FORBIDDEN),
    (TopicAlreadyExists, 409, CONFLICT),
    ((InvalidTopic, InvalidConfig, InvalidPartitions, PolicyViolation, InvalidRecord), 400, 400),
    (RecordTooLarge, 413, TOO_LARGE),
    (OffsetOutOfRange, 422, UNPROCESSABLE),
    (ShuttingDown, 503, KAFKA_RETRIABLE),
    (BrokerError, 500, KAFKA_ERROR),
)


def from_broker(exc: BaseException) -> ProxyError:
    """The answer to a broker core failure."""
    if isinstance(exc, ProxyError):
        return exc
    message = str(exc) or type(exc).__name__
    for kinds, http_status, code in _BROKER_ERRORS:
        if isinstance(exc, kinds):
            return ProxyError(http_status, code, message)
    return ProxyError(500, KAFKA_ERROR, "internal error")
