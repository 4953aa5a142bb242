"""Streams groups (KIP-1071): Kafka Streams applications whose tasks the group
coordinator assigns and whose internal topics it creates.

:mod:`.topology` configures an application's topology against the topics,
:mod:`.assignor` assigns tasks (sticky, with standby replicas), :mod:`.reconcile` moves
each member towards its target, :mod:`.state` holds a group and its state machines, and
:mod:`.coordinator` answers StreamsGroupHeartbeat. Offsets and the group id namespace are
shared with the other group types (:mod:`brokerd.kafka.groups.coordinator`).
"""
