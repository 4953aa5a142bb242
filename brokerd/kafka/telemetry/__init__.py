"""Client telemetry (KIP-714): client-metrics subscriptions, the clients that ask for
them and push, and their pushed metrics decoded from OTLP."""
