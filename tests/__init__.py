"""brokerd's test suite, a package so that ``pytest`` and ``trial tests`` import its helper
modules (``tests.brokerproc``, ``tests.kafka_helpers`` ...) by the same names."""

import gc

# The test processes (pytest's and trial's) hold every module of brokerd and of the suite,
# and many tests build large object graphs that live for the test (syntax trees of the
# whole source, hypothesis' examples, logs of thousands of records): at Python's default
# thresholds (700, 10, 10) the cyclic collector ran tens of thousands of times and cost a
# tenth of the unit layer's CPU. Collections are rarer here, not off; tests that need a
# collection call gc.collect() themselves.
gc.set_threshold(50_000, 20, 20)
