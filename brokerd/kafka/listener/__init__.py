"""The Kafka listener itself, above its handlers: ``protocol`` (:class:`KafkaProtocol`
per connection, :class:`KafkaFactory` per listener: frames, the SASL phase, answers in
request order) and ``dispatch`` (:class:`KafkaHandlers`: builds each API family's
handler object and collects their routes). The handlers
(:mod:`brokerd.kafka.server.handlers`) and what they are built from
(:mod:`brokerd.kafka.server`) import nothing from here.
"""
