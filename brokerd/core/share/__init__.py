"""Share groups (KIP-932, "queues"): records of a partition shared by a group's members.

The API other front ends build on (the Kafka listener uses it; the native protocol,
brokerctl, the console and the metrics can too):

- :class:`~brokerd.core.share.engine.ShareEngine` (synchronous, pure): per (group, topic,
  partition) a :class:`~brokerd.core.share.partition.SharePartition`; ``ensure``,
  ``acquire(group, topic, partition, member, spans, max_records, now_ms) -> (ranges,
  journal records)``, ``acknowledge(group, topic, partition, member, batches)``,
  ``release_member``, ``expire_locks``, ``describe(group) -> {(topic, partition):
  PartitionSummary}`` (backlog, in flight, redelivered, archived), ``set_start``,
  ``delete_partition``, ``delete_group``, group configs; ``restore`` (start-up) and
  ``reload`` (a live broker's journal failed or was reopened) from the journal's view.
- :class:`~brokerd.core.share.service.ShareService` (reactor thread, Deferreds): the same
  operations against the broker's logs, each change made durable in the share-state
  journal before it answers (a change whose write failed is undone, with every change
  queued behind it); ``acquire`` reads the log (read_committed by default) and answers
  the acquired ranges with the batches holding them.
- :mod:`~brokerd.core.share.states`: the record states and the transition table;
  :mod:`~brokerd.core.share.config`: the group configs (names, defaults, bounds).
- :mod:`~brokerd.core.share.dead_letters`: KIP-1191's dead-letter topics. The engine
  notes the records a member rejects or that run out of deliveries (``take_dead_letters``)
  in groups that name a topic, holding them ARCHIVING; the service writes them there once
  the journal has ARCHIVING, then archives them (``dead_lettered``).

Membership (who is in a group, which partitions each member gets) is the protocol's:
the Kafka listener's share group coordinator keeps it.
"""
