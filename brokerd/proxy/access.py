# -*- test-case-name: tests.proxy.test_access -*-
"""What a REST Proxy request may do, under ``--authorizer acl``: the proxy acts as the
request's principal (``--http-auth``), and each action needs the ACLs a Kafka client
would need for the same action (docs/http-proxy.md, "ACLs"):

* produce: WRITE on the topic;
* read records: READ on the topic and READ on the group; commit and committed offsets:
  READ on the group (and the topic); creating a consumer, subscribing: READ on the group;
* metadata (topics, partitions, offsets, configs, brokers, groups, lags): DESCRIBE on
  the topic or group (lists leave out what may not be described), DESCRIBE_CONFIGS for
  configs; the cluster's metadata DESCRIBE on the cluster;
* topic create: CREATE on the cluster or the topic; delete: DELETE on the topic;
  config changes: ALTER_CONFIGS on the topic (as CreateTopics, DeleteTopics and
  IncrementalAlterConfigs).

Without an authorizer every action is allowed. Refusals are 403 with Confluent's 40301.
"""

from __future__ import annotations

import attrs

from brokerd.proxy.errors import forbidden
from brokerd.security.acl import CLUSTER_NAME, AclAuthorizer, Operation, ResourceType


@attrs.frozen
class Access:
    """One request's rights: its principal and address, and the ACLs (None: all)."""

    authorizer: AclAuthorizer | None
    principal: str
    host: str

    def may(self, operation: Operation, resource: ResourceType, name: str) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(self.principal, self.host, operation, resource, name)

    def need(self, operation: Operation, resource: ResourceType, name: str) -> None:
        """Go on only if allowed; else 403 naming what was refused."""
        if not self.may(operation, resource, name):
            kind = resource.name.lower()
            raise forbidden(f"{operation.name} {kind} {name}" if resource is not
                            ResourceType.CLUSTER else f"{operation.name} the cluster")

    def topic(self, operation: Operation, name: str) -> None:
        self.need(operation, ResourceType.TOPIC, name)

    def group(self, operation: Operation, name: str) -> None:
        self.need(operation, ResourceType.GROUP, name)

    def may_topic(self, operation: Operation, name: str) -> bool:
        return self.may(operation, ResourceType.TOPIC, name)

    def may_describe_topic(self, name: str) -> bool:
        return self.may(Operation.DESCRIBE, ResourceType.TOPIC, name)

    def create_topic(self, name: str) -> None:
        """CreateTopics' rule: CREATE on the cluster, or on the topic itself."""
        if not (self.may(Operation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
                or self.may(Operation.CREATE, ResourceType.TOPIC, name)):
            raise forbidden(f"CREATE topic {name}")

    def cluster(self, operation: Operation) -> None:
        self.need(operation, ResourceType.CLUSTER, CLUSTER_NAME)
