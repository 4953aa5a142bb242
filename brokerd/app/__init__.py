"""The application: ``twistd broker``'s options, the typed settings built from them, and
the service wiring that builds the broker's service tree from those settings.

Modules: ``options`` (the command-line :class:`~brokerd.app.options.Options`, their
defaults and help text: a pinned contract), ``config_file`` and ``config_file_options``
(``--config FILE``: the TOML file and its hook into the options), ``settings`` (the
typed settings, grouped by concern), ``from_options`` (the parsed options checked and
turned into settings, once), ``wiring`` (every service built from the settings, in the
order of the shutdown), ``stdlib_logging`` (the storage layer's logging routed into
Twisted's log).

This package holds no broker logic: each part it builds lives in its own layer.
"""
