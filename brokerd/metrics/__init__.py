"""Prometheus metrics of the broker (``/metrics`` on the ``--http`` endpoint).

:mod:`brokerd.metrics.hooks` is what the protocols and the core call on their hot paths
(plain Protocols and null objects, no Prometheus import); :mod:`brokerd.metrics.registry`
builds one :class:`~prometheus_client.CollectorRegistry` per broker with every series
(``docs/metrics.md`` lists them).
"""
