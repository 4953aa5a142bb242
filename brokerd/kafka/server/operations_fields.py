"""The authorized-operations fields of the Kafka answers, for one connection: Metadata's
``topic_authorized_operations`` (v8+) and ``cluster_authorized_operations`` (v8-10),
DescribeCluster's ``cluster_authorized_operations`` and DescribeGroups'
``authorized_operations`` (v3+), each filled only when the request asks (the field keeps
Kafka's "omitted", INT32_MIN, otherwise), and DescribeTopicPartitions' (always filled).

The decision is :mod:`brokerd.security.authorized_ops` (every operation of the resource
type when no authorizer runs); this only supplies the connection's principal and host.
"""

from __future__ import annotations

import attrs

from brokerd.kafka.server.handler_base import RequestContext
from brokerd.security.acl import CLUSTER_NAME, AclAuthorizer, Operation, ResourceType
from brokerd.security.authorized_ops import allowed_operations, operations_field

__all__ = ["AuthorizedOperations"]


@attrs.frozen
class AuthorizedOperations:
    """The fields for the connections of one broker (``authorizer`` None: no ACLs)."""

    authorizer: AclAuthorizer | None = None

    def _allowed(
        self, conn: RequestContext, rtype: ResourceType, name: str
    ) -> frozenset[Operation]:
        state = conn.state
        return allowed_operations(self.authorizer, state.principal, state.peer_host, rtype, name)

    def topic(self, conn: RequestContext, name: str) -> int:
        return operations_field(self._allowed(conn, ResourceType.TOPIC, name))

    def topic_visible(self, conn: RequestContext, name: str) -> bool:
        """Whether the principal may DESCRIBE topic ``name`` (or do anything implying
        it): for the handlers that filter topics themselves (DescribeTopicPartitions
        counts only the topics it answers against its partition limit)."""
        return Operation.DESCRIBE in self._allowed(conn, ResourceType.TOPIC, name)

    def group(self, conn: RequestContext, group_id: str) -> int:
        return operations_field(self._allowed(conn, ResourceType.GROUP, group_id))

    def cluster(self, conn: RequestContext) -> int:
        """Nothing at all unless the principal may DESCRIBE the cluster (Kafka's rule
        for Metadata: the field never tells more than a DESCRIBE would)."""
        allowed = self._allowed(conn, ResourceType.CLUSTER, CLUSTER_NAME)
        return operations_field(allowed) if Operation.DESCRIBE in allowed else 0
