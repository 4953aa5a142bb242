"""The edge both listeners share: one client connection's life (:mod:`.connection`), the
connection caps (:mod:`.connlimit`), TLS listeners and the certificate principal
(:mod:`.tls`), response frames whose records are not copied (:mod:`.frames`) and how they
reach a socket (:mod:`.sendfile`) or a TLS transport (:mod:`.chunked`), the budget of
answer bytes held in memory (:mod:`.answer_budget`), and typed views of the Twisted
transports and clocks (:mod:`.transport`).

Nothing here knows a protocol: the Kafka and native listeners build on it, never the
other way round.
"""
