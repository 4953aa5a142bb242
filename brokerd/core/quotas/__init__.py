"""Client quotas: the configured quotas by user and client id (entities), Kafka's
windowed rate and throttle arithmetic (rate), their enforcement per measured share
(manager) and their durable file (store)."""
