"""What the v2 and v3 handlers work with: the broker's parts they call, and the
proxy's own state (consumer instances, the appender), in one frozen value the wiring
builds. Only the seams' types: nothing here imports the Kafka listener.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from brokerd.core.api import CoreApi
from brokerd.operator.inspect import Inspector
from brokerd.operator.operations import OperatorOps
from brokerd.proxy.access import Access
from brokerd.proxy.errors import topic_not_found
from brokerd.proxy.instances import ConsumerInstances
from brokerd.proxy.limits import ProxyLimits
from brokerd.proxy.produce import Appender

#: The broker's cluster id (what Kafka's Metadata answers) and node id.
DEFAULT_CLUSTER_ID = "brokerd-single-node"
NODE_ID = 0

if TYPE_CHECKING:
    from brokerd.registry.service import SchemaRegistry


@attrs.frozen
class ProxyContext:
    core: CoreApi
    inspector: Inspector
    admin: OperatorOps
    appender: Appender
    instances: ConsumerInstances
    limits: ProxyLimits
    #: The Schema Registry (None: the schema formats are refused).
    registry: SchemaRegistry | None = None
    cluster_id: str = DEFAULT_CLUSTER_ID
    node_id: int = NODE_ID
    #: Host and port Kafka clients are told (v3 brokers' ``host``/``port``).
    kafka_host: str = "127.0.0.1"
    kafka_port: int | None = None

    def visible_partitions(self, access: Access, topic: str) -> int:
        """The partition count of ``topic``, or 40401 when it does not exist or the
        principal may not DESCRIBE it (as Kafka: such a topic is not told to exist)."""
        info = self.core.topics().get(topic) if access.may_describe_topic(topic) else None
        if info is None:
            raise topic_not_found(topic)
        return info.partitions
