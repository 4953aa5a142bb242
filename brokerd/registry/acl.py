# -*- test-case-name: tests.registry.test_http -*-
"""Who may do what on the registry, under ``--authorizer acl``: Confluent's
subject-level rules mapped onto Kafka's ACL resource types, so one set of ACLs
(``kafka-acls``, ``brokerctl acls``) governs the topics and their schemas.

* A subject is the TOPIC its records go to under Confluent's default
  TopicNameStrategy: ``orders-value`` and ``orders-key`` are topic ``orders``; any other
  subject (a RecordNameStrategy's ``com.example.Order``) is the topic of its own name.
  Reading a subject's versions, looking a schema up in it and testing compatibility
  against it need READ; registering needs WRITE; deletes need DELETE; a subject's own
  compatibility level or mode: DESCRIBE_CONFIGS to read, ALTER_CONFIGS to change.
* The global compatibility level and mode are the CLUSTER's configs: DESCRIBE_CONFIGS
  to read, ALTER_CONFIGS to change.
* A schema by id is readable by a principal that may READ some subject carrying it.
* Lists (``/subjects``, ``/schemas``, ``/schemas/ids/{id}/subjects``) show only the
  subjects the principal may READ.
* ``/``, ``/schemas/types`` and ``/contexts`` say nothing about the data: any
  authenticated principal.

Kafka's implications apply (an ALLOW of WRITE or DELETE also grants DESCRIBE, not READ).
A refusal is Confluent's 403 with error code 40301. Pure: the authorizer decides, this
module only names what is asked.
"""

from __future__ import annotations

import attrs

from brokerd.registry.model import RegistryError
from brokerd.security.acl import CLUSTER_NAME, AclAuthorizer, Operation, ResourceType

__all__ = ["RegistryGate", "subject_topic"]

_SUFFIXES = ("-value", "-key")


def subject_topic(subject: str) -> str:
    """The topic a subject's schemas describe under TopicNameStrategy (else the
    subject's own name)."""
    for suffix in _SUFFIXES:
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


@attrs.frozen
class RegistryGate:
    """One request's principal and host, checked against the ACLs (``authorizer``
    None: ``--authorizer none``, everything allowed)."""

    authorizer: AclAuthorizer | None
    principal: str
    host: str

    def allows_subject(self, subject: str, operation: Operation) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(
            self.principal, self.host, operation, ResourceType.TOPIC, subject_topic(subject)
        )

    def subject(self, subject: str, operation: Operation) -> None:
        """Raise 40301 unless ``operation`` is allowed on ``subject``'s topic."""
        if not self.allows_subject(subject, operation):
            raise RegistryError(
                403, 40301,
                f"User {self.principal} is not authorized to {operation.name} subject "
                f"{subject!r} (TOPIC {subject_topic(subject)!r})",
            )

    def cluster(self, operation: Operation) -> None:
        """Raise 40301 unless ``operation`` is allowed on the cluster."""
        if self.authorizer is not None and not self.authorizer.authorize(
            self.principal, self.host, operation, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            raise RegistryError(
                403, 40301,
                f"User {self.principal} is not authorized to {operation.name} the "
                "registry's global settings (CLUSTER)",
            )
