"""The edge both listeners share: one client connection's life (:mod:`.connection`, given
a protocol's sans-IO decoder, :mod:`.decoding`, and its dispatcher) and its phases
(:mod:`.phase`), the broker-wide budget of buffered request bytes
(:mod:`.request_budget`), the connection caps per listener and per address
(:mod:`.connlimit`) and how refusals are logged (:mod:`.refusals`), TLS listeners and the
certificate principal (:mod:`.tls`), response frames whose records are not copied
(:mod:`.frames`) and how they reach a socket (:mod:`.sendfile`) or a TLS transport
(:mod:`.chunked`), the budget of answer bytes held in memory (:mod:`.answer_budget`),
typed views of the Twisted transports and clocks (:mod:`.transport`), and the one place
that relies on Twisted state Twisted does not publish (:mod:`.twisted_state`).

Nothing here knows a protocol: the Kafka and native listeners build on it, never the
other way round.
"""
