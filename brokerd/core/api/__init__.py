# -*- test-case-name: tests.core.test_api -*-
"""The broker core's face: the one typed interface the Kafka listener, the native
protocol, the admin operations, the web side and the metrics use of the core.

:class:`CoreApi` declares everything of :class:`brokerd.core.broker.Broker` that code
outside the core calls (reactor thread; Deferreds fire there, and failures carry
:mod:`brokerd.errors` exceptions). Each operation is declared once, in the role it
belongs to (:mod:`brokerd.core.roles`), and implemented once: the broker implements the
topic administration, write and long-poll roles itself, and holds the parts that play
the others, reached through the role (``core.topic_registry`` is its
``TopicRegistry``, ``core.reads`` its ``Fetcher``, ``core.transactions`` its
``TxnMarkers``, ``core.storage`` its ``LogDirectoryService``, ``core.waiters`` its
``WaiterRegistry``, ``core.share`` the share groups' ``ShareService``), so no method
forwards to another. A consumer that needs only one
role (the ACL gate reads topic names, the transaction coordinator writes markers) takes
that role, every other consumer takes :class:`CoreApi`. ``Broker`` satisfies it
(checked by mypy at the end of this module); tests pass fakes that have what their
handler calls.

The long-poll primitive is part of the face: :func:`long_poll` and its
:class:`Shortfall` (defined in :mod:`brokerd.core.roles.long_poll`), which the Kafka
Fetch runs over its own reads with :meth:`CoreLongPoll.wait_for_data` as the park step.

A package of its own, above the core's parts: the face names the share service, which
is built on the roles below it (``brokerd.core.api`` -> ``brokerd.core.share`` ->
``brokerd.core.roles``), and nothing of ``brokerd.core`` imports the face back. Only
declarations, no behaviour. What it does not declare: the core's wiring (the service
tree, producer-id source, runners: ``brokerd/app/wiring.py`` builds those on the
``Broker`` itself) and what the core needs of the reactor
(:mod:`brokerd.core.interfaces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from brokerd.after_answer import AfterAnswer
from brokerd.core.roles import (
    ConfigUpdate,
    CoreAppendWatches,
    CoreLogDir,
    CoreLongPoll,
    CoreReads,
    CoreTopicChanges,
    CoreTopics,
    CoreTransactions,
    CoreWrites,
    HoldsReads,
    HoldsTopics,
    RecordValidator,
    TxnVerifier,
)
from brokerd.core.roles.long_poll import AppendWatcher, Shortfall, long_poll
from brokerd.core.share.service import ShareService


class CoreApi(HoldsTopics, CoreTopicChanges, CoreWrites, CoreLongPoll, HoldsReads, Protocol):
    """Everything the protocols, admin, web and metrics use of the core: its own
    operations (topic administration, writes, long poll), and the parts it holds, each
    as the role it plays (as Kafka's ``ReplicaManager`` holds each ``UnifiedLog``)."""

    @property
    def transactions(self) -> CoreTransactions:
        """The core's side of transactions (its ``TxnMarkers``)."""
        ...

    @property
    def storage(self) -> CoreLogDir:
        """The data directory's side (its ``LogDirectoryService``)."""
        ...

    @property
    def waiters(self) -> CoreAppendWatches:
        """Standing watches of appends (its ``WaiterRegistry``)."""
        ...

    @property
    def after_answer(self) -> AfterAnswer:
        """The wake-ups of the core's inline appends, waiting for the answer being
        written: a connection calls its ``answer_written()`` right after handing an
        answer to the kernel or the transport (:mod:`brokerd.after_answer`)."""
        ...

    @property
    def share(self) -> ShareService | None:
        """Share groups' records (KIP-932) when the application added share groups,
        else None."""
        ...


if TYPE_CHECKING:
    from brokerd.core.broker import Broker

    def _has_the_face(broker: Broker) -> CoreApi:
        # mypy checks here that Broker has every member of the core's face.
        return broker


__all__ = [
    "AppendWatcher",
    "ConfigUpdate",
    "CoreApi",
    "CoreAppendWatches",
    "CoreLogDir",
    "CoreLongPoll",
    "CoreReads",
    "CoreTopicChanges",
    "CoreTopics",
    "CoreTransactions",
    "CoreWrites",
    "HoldsReads",
    "HoldsTopics",
    "RecordValidator",
    "Shortfall",
    "TxnVerifier",
    "long_poll",
]
