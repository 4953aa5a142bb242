# -*- test-case-name: tests.app.test_config_file -*-
"""The ``--config FILE`` of ``twistd broker``: a TOML file holding command-line options.

The keys are the long option names exactly as on the command line (``segment-bytes``;
``segment_bytes`` is accepted too), flags are booleans. This module reads and checks such a
file against the option declarations (the ``optParameters``/``optFlags`` lists of
:class:`brokerd.app.options.Options`) and returns typed values; it also renders the example file
``deploy/brokerd.toml`` from the same declarations.

It does not apply the values nor run the options' own range checks (``postOptions`` does,
after the command line overrides the file), and it imports nothing from Twisted.

``tomllib`` reports no positions of keys, so the line of a key in an error message is found
by a scan of the file's lines for ``key =`` before the first table header: best effort, a
key written as a dotted or quoted key may get no line.
"""

from __future__ import annotations

import difflib
import errno
import json
import re
import textwrap
import tomllib
from collections.abc import Mapping, Sequence
from typing import Literal

import attrs

from brokerd.storage.fileio import read_at_most

#: A config file larger than this is refused before it is read.
MAX_CONFIG_BYTES = 1024 * 1024

Kind = Literal["flag", "int", "float", "str", "number-text"]
Value = bool | int | float | str

_KIND_NAMES: Mapping[Kind, str] = {
    "flag": "a boolean (true or false)",
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "number-text": "a number or a string",
}
_TOML_TYPE_NAMES: Mapping[type, str] = {
    bool: "a boolean",
    int: "an integer",
    float: "a float",
    str: "a string",
    dict: "a table",
    list: "an array",
}


class ConfigError(ValueError):
    """The config file cannot be used; the message names the file, and the key and line
    when there is one."""


@attrs.frozen
class OptionSpec:
    """One option as the config file sees it."""

    name: str
    kind: Kind
    default: Value | None
    help: str


def specs_from_options(
    parameters: Sequence[Sequence[object]],
    flags: Sequence[Sequence[object]],
    *,
    exclude: frozenset[str] = frozenset(),
) -> dict[str, OptionSpec]:
    """The specs of ``usage.Options``-style declarations: parameters are
    ``[long, short, default, help(, coerce)]``, flags ``[long, short, help]``."""
    specs: dict[str, OptionSpec] = {}
    for parameter in parameters:
        name, default, doc = str(parameter[0]), parameter[2], str(parameter[3])
        coerce = parameter[4] if len(parameter) > 4 else None
        if name in exclude:
            continue
        kind: Kind
        if coerce is int:
            kind = "int"
        elif coerce is float:
            kind = "float"
        elif coerce is None:
            kind = "number-text" if _is_number_text(default) else "str"
        else:
            raise TypeError(f"option {name}: no config-file type for coerce {coerce!r}")
        if default is not None and not isinstance(default, (int, float, str)):
            raise TypeError(f"option {name}: default {default!r} has no TOML form")
        specs[name] = OptionSpec(name, kind, default, doc)
    for flag in flags:
        name = str(flag[0])
        if name not in exclude:
            specs[name] = OptionSpec(name, "flag", False, str(flag[2]))
    return specs


def _is_number_text(value: object) -> bool:
    """A string option whose default is a number (the topic-config defaults, checked as
    text later) also takes a TOML number."""
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


@attrs.frozen
class LoadedConfig:
    """What a config file sets: ``values`` by long option name, typed for the options (a
    number for an ``int``/``float`` option, the text for a text option), and the line
    that sets each (``None`` where the scan found none)."""

    path: str
    values: dict[str, Value]
    lines: dict[str, int | None]

    def where(self, name: str) -> str:
        """``FILE, line N`` (or ``FILE``) of option ``name``."""
        line = self.lines.get(name)
        return f"{self.path}, line {line}" if line is not None else self.path


def load(path: str, specs: Mapping[str, OptionSpec]) -> LoadedConfig:
    """Read and check the config file at ``path`` against ``specs``."""
    text = _read(path)
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        # The decoder's message ends with "(at line N, column M)".
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    lines = text.splitlines()
    values: dict[str, Value] = {}
    found: dict[str, int | None] = {}
    given_as: dict[str, str] = {}
    for key, raw in document.items():
        line = key_line(lines, key)
        where = f"{path}, line {line}" if line is not None else path
        name = _option_name(key, specs)
        if name is None:
            raise ConfigError(f"{where}: unknown key {key!r}{_suggestion(key, specs)}")
        if name in given_as:
            raise ConfigError(f"{where}: {key!r} sets {name!r} again (also {given_as[name]!r})")
        given_as[name] = key
        values[name] = _typed(specs[name], raw, where, key)
        found[name] = line
    return LoadedConfig(path, values, found)


def _read(path: str) -> str:
    try:
        data = read_at_most(path, MAX_CONFIG_BYTES)
    except OSError as e:
        if e.errno == errno.EFBIG:  # read_at_most's refusal: not a config file at all
            raise ConfigError(f"{path}: {e.strerror}, not a config file") from None
        raise ConfigError(f"{path}: cannot read the config file: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ConfigError(f"{path}, line {line}: not UTF-8 text") from None


def _option_name(key: str, specs: Mapping[str, OptionSpec]) -> str | None:
    if key in specs:
        return key
    dashed = key.replace("_", "-")
    return dashed if dashed in specs else None


def _suggestion(key: str, specs: Mapping[str, OptionSpec]) -> str:
    close = difflib.get_close_matches(key.replace("_", "-"), list(specs), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _typed(spec: OptionSpec, raw: object, where: str, key: str) -> Value:
    ok: Value | None = None
    if isinstance(raw, bool):
        ok = raw if spec.kind == "flag" else None
    elif isinstance(raw, int):
        if spec.kind in ("int", "float"):
            ok = float(raw) if spec.kind == "float" else raw
        elif spec.kind == "number-text":
            ok = str(raw)
    elif isinstance(raw, float):
        if spec.kind == "float":
            ok = raw
        elif spec.kind == "number-text":
            ok = repr(raw)
    elif isinstance(raw, str) and spec.kind in ("str", "number-text"):
        ok = raw
    if ok is None:
        got = _TOML_TYPE_NAMES.get(type(raw), type(raw).__name__)
        raise ConfigError(
            f"{where}: {key} must be {_KIND_NAMES[spec.kind]}, not {got} ({_show(raw)})"
        )
    return ok


def _show(raw: object) -> str:
    text = json.dumps(raw, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


_TABLE_HEADER = re.compile(r"^\s*\[")


def key_line(lines: Sequence[str], key: str) -> int | None:
    """The 1-based line that sets top-level ``key`` (bare or quoted), or the line of a
    table header named ``key``; ``None`` when the scan finds neither (best effort)."""
    quoted = re.escape(key)
    assignment = re.compile(rf"""^\s*(?:{quoted}|"{quoted}"|'{quoted}')\s*=""")
    header = re.compile(rf"""^\s*\[\[?\s*(?:{quoted}|"{quoted}"|'{quoted}')\s*[\].]""")
    in_top_level = True
    for number, line in enumerate(lines, 1):
        if _TABLE_HEADER.match(line):
            if header.match(line):
                return number
            in_top_level = False
        elif in_top_level and assignment.match(line):
            return number
    return None


def toml_value(value: Value) -> str:
    """``value`` as a TOML literal (JSON's string escapes are valid TOML)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value)


#: Marks an example line whose option has no default value.
UNSET_NOTE = "not set by default"


def render_example(specs: Mapping[str, OptionSpec], header: str) -> str:
    """The example config file: ``header``, then every option commented out with its
    help text and its default."""
    out = [header.rstrip("\n"), ""]
    for spec in specs.values():
        out.extend(textwrap.wrap(spec.help, 88, initial_indent="# ", subsequent_indent="# "))
        if spec.default is None:
            out.append(f'# {spec.name} = ""  # {UNSET_NOTE}')
        elif spec.kind == "number-text":
            out.append(f"# {spec.name} = {spec.default}")
        else:
            out.append(f"# {spec.name} = {toml_value(spec.default)}")
        out.append("")
    return "\n".join(out)
