"""The HTTP endpoint (``--http``): Prometheus metrics, health checks and the read-only
web console, served by ``twisted.web``."""
