"""Real brokers for test suites: :mod:`brokerd.testing.launcher` starts a ``twistd broker``
child on free ports and finds them through its ready file; :mod:`brokerd.testing.pytest_plugin`
is the pytest plugin (fixtures ``brokerd``, ``brokerd_session``, ``brokerd_factory``) that
pytest loads through the ``pytest11`` entry point once brokerd is installed.

The launcher imports nothing of the broker: the broker runs in its own process.
"""

from brokerd.testing.launcher import TEST_MODE_ARGS, BrokerLaunchError, LaunchedBroker

__all__ = ["TEST_MODE_ARGS", "BrokerLaunchError", "LaunchedBroker"]
