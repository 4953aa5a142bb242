"""Per-topic configs: Kafka's names, types, defaults and valid values, and what each does here."""
