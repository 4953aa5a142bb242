"""The proxy handlers' context: a topic's partition count, told only to a principal
that may DESCRIBE the topic (else 40401, as if it did not exist)."""

from __future__ import annotations

from typing import Any

import pytest

from brokerd.proxy.access import Access
from brokerd.proxy.context import ProxyContext
from brokerd.proxy.errors import ProxyError
from brokerd.security.acl import (
    AclAuthorizer,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

from tests.fake_core import FakeCore


def context(core: FakeCore) -> ProxyContext:
    none: Any = None
    return ProxyContext(core, none, none, none, none, none)


def test_the_partition_count_of_a_visible_topic() -> None:
    core = FakeCore()
    core.add_topic("t", 3)
    assert context(core).visible_partitions(Access(None, "User:a", "h"), "t") == 3


def test_a_missing_or_hidden_topic_is_not_found() -> None:
    core = FakeCore()
    core.add_topic("t", 3)
    core.add_topic("secret", 1)
    describe_t = AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:a", "*",
                            Operation.DESCRIBE, Permission.ALLOW)
    access = Access(AclAuthorizer([describe_t]), "User:a", "h")
    assert context(core).visible_partitions(access, "t") == 3
    for topic in ("secret", "missing"):
        with pytest.raises(ProxyError) as caught:
            context(core).visible_partitions(access, topic)
        assert (caught.value.http_status, caught.value.error_code) == (404, 40401)
        assert topic in caught.value.message
