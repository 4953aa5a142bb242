# -*- test-case-name: tests.kafka.listener.test_protocol -*-
"""The coordinators the Kafka handlers answer from, handed to the listener as one value.

:class:`KafkaCoordinators` holds the concrete group coordinator, the transaction
coordinator, the share groups and the internal topics the Kafka APIs see. The listener's
factory and its dispatch take it whole, so adding a coordinator changes this class and
the handler family that uses it, not every signature between the wiring and the
handlers. A test fakes one part by subclassing its class, or swaps one with
``attrs.evolve(coordinators, transactions=...)``.

Pure data: no behaviour.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from brokerd.kafka.groups.coordinator import GroupCoordinator
    from brokerd.kafka.groups.share.state_service import ShareGroups
    from brokerd.kafka.server.internal_topics import InternalTopics
    from brokerd.kafka.txn.coordinator import TransactionCoordinator


@attrs.frozen
class KafkaCoordinators:
    """What the Kafka handlers coordinate through.

    :param groups: the group coordinator (classic, consumer and streams groups, and
        committed offsets).
    :param transactions: the transaction coordinator; None disables transactions
        (transactional requests get a fatal error, see ``docs/kafka.md``).
    :param shares: the share groups (KIP-932); None: the share APIs answer
        UNSUPPORTED_VERSION, as Kafka does with share groups disabled.
    :param internal_topics: the internal topics presented (shared with the group
        coordinator, whose KIP-848 regexes see them); None: the listener's own.
    """

    groups: GroupCoordinator
    transactions: TransactionCoordinator | None = None
    shares: ShareGroups | None = None
    internal_topics: InternalTopics | None = None


__all__ = ["KafkaCoordinators"]
