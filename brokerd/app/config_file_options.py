# -*- test-case-name: tests.app.test_config_file_options -*-
"""Applies ``--config FILE`` to a ``usage.Options``: the file's values replace the
defaults before the command line is parsed, so every flag on the command line overrides
the file, and the options' own checks (``postOptions``) then see the merged values.

Reading and checking the file is :mod:`brokerd.app.config_file`; this module only finds
``--config`` in the arguments, applies the values, and turns errors into usage errors that
point at the file's line.
"""

from __future__ import annotations

import getopt
import re
import sys
from collections.abc import Callable, Mapping

from twisted.python import usage

from brokerd.app.config_file import ConfigError, LoadedConfig, OptionSpec, load, specs_from_options

#: The option naming the config file; a config file cannot set it.
CONFIG_OPTION = "config"

_MENTIONED_FLAG = re.compile(r"--([a-z0-9][a-z0-9-]*)")


def option_specs(options: type[usage.Options] | usage.Options) -> dict[str, OptionSpec]:
    """What a config file may set for ``options``: every parameter and flag but
    ``--config``."""
    return specs_from_options(
        getattr(options, "optParameters", []),
        getattr(options, "optFlags", []),
        exclude=frozenset({CONFIG_OPTION}),
    )


def parse_with_config(
    options: usage.Options,
    parse: Callable[[list[str] | None], None],
    argv: list[str] | None,
    *,
    aliases: Mapping[str, str] = {},
) -> None:
    """Run ``parse(argv)`` (``usage.Options.parseOptions``) over the values of the
    ``--config`` file named in ``argv``. ``aliases`` maps an option to another name its
    check errors may use (a topic config name), to point such an error at the file."""
    if argv is None:
        argv = sys.argv[1:]
    path, on_command_line = _scan(options, argv)
    if path is None:
        parse(argv)
        return
    try:
        loaded = load(path, option_specs(options))
    except ConfigError as e:
        raise usage.UsageError(f"--config: {e}") from None
    options.opts.update(loaded.values)
    try:
        parse(argv)
    except usage.UsageError as e:
        raise usage.UsageError(_blame(str(e), loaded, on_command_line, aliases)) from None


def _scan(options: usage.Options, argv: list[str]) -> tuple[str | None, set[str]]:
    """The ``--config`` path and the options given on the command line, read the way the
    real parse reads them (same getopt specs, so abbreviations and ``--`` agree). A bad
    command line gives no path: the real parse reports it."""
    try:
        pairs, _ = getopt.getopt(argv, options.shortOpt, options.longOpt)
    except getopt.error:
        return None, set()
    path = None
    given = set()
    for flag, value in pairs:
        name = flag.lstrip("-")
        name = options.synonyms.get(name, options.synonyms.get(name.replace("-", "_"), name))
        given.add(name)
        if name == CONFIG_OPTION:
            path = value
    return path, given


def _blame(
    message: str,
    loaded: LoadedConfig,
    on_command_line: set[str],
    aliases: Mapping[str, str],
) -> str:
    """``message`` with the file and line of each option it names that the file set
    (and the command line did not)."""
    named = set(_MENTIONED_FLAG.findall(message))
    named.update(name for name, alias in aliases.items() if alias in message)
    culprits = sorted(
        name for name in named if name in loaded.values and name not in on_command_line
    )
    if not culprits:
        return message
    sources = "; ".join(f"{name} set in {loaded.where(name)}" for name in culprits)
    return f"{message} ({sources})"
