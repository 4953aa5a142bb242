"""Whole Kafka requests and responses, above the message families: ``registry`` (every
family's ``APIS``, collected) and ``apis`` (the request decoder and response encoder over
it). The families (:mod:`brokerd.kafka.wire.messages`) and the primitives they are built
from (:mod:`brokerd.kafka.wire.codec`, :mod:`brokerd.kafka.wire.schema`) import nothing
from here, so the wire room's imports run one way: primitives, families, whole requests.
"""
