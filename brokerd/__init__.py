"""brokerd: a persistent, partitioned message broker in the mould of Apache Kafka."""

__version__ = "0.1.0"
