"""``brokerctl``, the command-line client of the native protocol: :mod:`brokerd.cli.brokerctl`
parses the command line and runs the core commands; :mod:`brokerd.cli.topics_groups`,
:mod:`brokerd.cli.queue` and :mod:`brokerd.cli.users` add their own subcommands;
:mod:`brokerd.cli.tables` renders the answers as aligned text. :func:`main` is the
``brokerctl`` entry point."""

from brokerd.cli.brokerctl import main

__all__ = ["main"]
