"""What every Kafka API handler is built from: ``route`` (a handler with its ACL rule),
``acl_gate`` (the ACL gate), ``handler_base`` (outcomes, the connection, small helpers),
``operations_fields``, ``sasl`` (the per-connection SASL session) and ``observe`` (what an
answer tells the metrics). The handlers (``handlers/``) import these; the listener that
collects the handlers (:mod:`brokerd.kafka.listener`) sits above both, so nothing here
imports a handler.
"""
