"""The HTTP proxy: Confluent's REST Proxy API (v2 and v3) served by the broker itself
(``--http-proxy``; docs/http-proxy.md)."""
