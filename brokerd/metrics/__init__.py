"""Prometheus metrics of the broker (``/metrics`` on the ``--http`` endpoint).

:mod:`brokerd.observers` (below the core and both protocols) declares what they call on
their hot paths (plain Protocols and null objects, no Prometheus import); this package
implements it; :mod:`brokerd.metrics.registry`
builds one :class:`~prometheus_client.CollectorRegistry` per broker with every series
(``docs/metrics.md`` lists them).
"""
