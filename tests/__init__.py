"""brokerd's test suite, a package so that ``pytest`` and ``trial tests`` import its helper
modules (``tests.brokerproc``, ``tests.kafka_helpers`` ...) by the same names."""
