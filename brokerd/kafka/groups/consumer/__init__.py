"""The consumer group protocol (KIP-848): groups whose assignment the coordinator computes.

:mod:`.state` holds the member and group state enums and their transition tables,
:mod:`.assignors` the server-side assignors (``uniform``, ``range``), :mod:`.reconcile`
how one member moves towards its target assignment, :mod:`.regex_resolver` which
topics the subscription regexes match (in bounded slices), and :mod:`.coordinator`
answers ConsumerGroupHeartbeat and ConsumerGroupDescribe. The classic protocol is
:mod:`brokerd.kafka.groups.coordinator`'s.
"""
