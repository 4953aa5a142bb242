"""The Kafka wire format, sans-IO, in three layers that import one way: the primitives
here (``codec``: framing, the bounds-checked Reader/Writer, headers, types; ``schema``:
``Wire`` fields and ``ApiSpec``), the message families built from them
(:mod:`brokerd.kafka.wire.messages`), and whole requests and responses over the families'
specs (:mod:`brokerd.kafka.wire.requests`).
"""
