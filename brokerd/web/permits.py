# -*- test-case-name: tests.web.test_actions -*-
"""What the console's data pages share, and what a request's principal may do there.

Without ``--authorizer acl`` every request let in (``--http-auth``) may do everything the
console offers. With it, each page and action is checked as the Kafka API checks the
same work (Kafka's operation on Kafka's resource):

=====================================  ===============================================
reading records (message browser)      READ on the topic (as a Fetch)
producing from the form                WRITE on the topic (as a Produce)
creating a topic                       CREATE on the cluster, or on the topic
editing a topic's configs              ALTER_CONFIGS on the topic
deleting a topic                       DELETE on the topic
resetting a group's offsets            READ on the group and on the topic (as an
                                       OffsetCommit)
seeing a schema subject                READ on the topic the subject names, as the
                                       registry's own API asks (Confluent's
                                       TopicNameStrategy: ``T-key`` and ``T-value``
                                       are topic ``T``; another subject is the topic
                                       of its own name, as in ``brokerd.registry.acl``)
=====================================  ===============================================

A topic the principal may not DESCRIBE is not found at all (as on the other pages).
``--http-console-readonly`` turns every action off whoever asks.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from brokerd.clock import Clock
from brokerd.security.acl import CLUSTER_NAME, Operation, ResourceType
from brokerd.web.browse import MAX_SCAN_BYTES, MAX_SCAN_SECONDS
from brokerd.web.console_history import ConsoleSource
from brokerd.web.csrf import CsrfGuard
from brokerd.web.data_face import BrokerData
from brokerd.web.schema_face import SchemaSource, subject_topic
from brokerd.web.scope import RequestScope, ScopeOf

__all__ = ["DataPages", "may_create_topic", "may_see_subject", "permits"]


@attrs.frozen
class DataPages:
    """What the data pages and actions are built over.

    :param data: the broker's records and operations (None: no data pages, e.g. a
        console built over views alone).
    :param lookup: the schema registry (None: no registry pages, values are not
        decoded by schema).
    :param clock: the reactor's clock (scan deadlines, record timestamps).
    :param scope_of: what a request may see.
    :param source: the views (which topics and groups exist for a request).
    :param csrf: the form tokens.
    :param actions: whether the console may change anything (``False``: read-only).
    :param now_ms: the time stamped on produced records (None: the clock's).
    :param scan_bytes: the message browser's bound on bytes examined per scan.
    :param scan_seconds: its bound on wall time per scan.
    """

    data: BrokerData | None
    lookup: SchemaSource | None
    clock: Clock
    scope_of: ScopeOf
    source: ConsoleSource
    csrf: CsrfGuard
    actions: bool = True
    now_ms: Callable[[], int] | None = None
    scan_bytes: int = MAX_SCAN_BYTES
    scan_seconds: float = MAX_SCAN_SECONDS

    def time_ms(self) -> int:
        if self.now_ms is not None:
            return self.now_ms()
        return int(self.clock.seconds() * 1000)


def permits(scope: RequestScope, operation: Operation, rtype: ResourceType, name: str) -> bool:
    """Whether the request of ``scope`` may do ``operation`` on the resource."""
    if scope.principal is None:
        return False
    visibility = scope.visibility
    if visibility is None:
        return True
    return visibility.authorizer.authorize(
        visibility.principal, visibility.host, operation, rtype, name
    )


def may_create_topic(scope: RequestScope, name: str) -> bool:
    return permits(scope, Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME) or permits(
        scope, Operation.CREATE, ResourceType.TOPIC, name
    )


def may_see_subject(scope: RequestScope, subject: str) -> bool:
    return permits(scope, Operation.READ, ResourceType.TOPIC, subject_topic(subject))
