"""docs/architecture.md's "Where to change what" kept true: every file its table names
exists and every code name it gives is in those files; every native request type and
every routed Kafka API sits in the files the table's rows for adding one name; every
metric series is in docs/metrics.md (and back) and every collector registered; every
journal store is handed to the store recovery. A new type, API, series or store that
skips one of them (or a rename that leaves the table behind) fails here, naming what is
missing."""

from __future__ import annotations

import ast
import functools
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

from brokerd.kafka.server.handlers.sasl import SASL_API_KEYS
from brokerd.kafka.wire import messages
from brokerd.kafka.wire.codec import ApiKey
from brokerd.native import commands, operator_wire, queue_wire, wire
from brokerd.native.messages import RequestType

from tests.brokerproc import REPO

BROKERD = REPO / "brokerd"
ARCHITECTURE = REPO / "docs" / "architecture.md"
# Paths in the table are relative to brokerd/ unless they start with a top-level folder.
TOP_LEVEL = ("docs/", "deploy/", "tools/", "tests/", "brokerd/")


@functools.cache
def table_rows() -> dict[str, str]:
    """The table's rows by their first cell ("add a Kafka API": the rest of the row)."""
    text = ARCHITECTURE.read_text()
    section = text.split("## Where to change what", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("to", "---"):
            rows[cells[0]] = " | ".join(cells[1:])
    return rows


def named_paths(row: str) -> list[str]:
    """The files and folders a row names (backticked, with a slash or a file suffix)."""
    return [
        token
        for token in re.findall(r"`([^`]+)`", row)
        if re.fullmatch(r"[\w./<>-]+", token) and ("/" in token or token.endswith((".py", ".md")))
    ]


def resolve(token: str) -> list[Path]:
    path = token if token.startswith(TOP_LEVEL) else f"brokerd/{token}"
    # ``<family>`` stands for any module of that folder.
    return sorted(REPO.glob(re.sub(r"<\w+>", "*", path).rstrip("/")))


def test_the_table_has_the_rows_this_test_checks() -> None:
    rows = table_rows()
    assert {"add a Kafka API", "add a native request type"} <= set(rows), sorted(rows)
    assert len(rows) >= 8


@pytest.mark.parametrize("row", sorted(table_rows()))
def test_every_file_a_row_names_exists(row: str) -> None:
    paths = named_paths(table_rows()[row])
    assert paths, f"the row {row!r} names no file"
    missing = [token for token in paths if not resolve(token)]
    assert not missing, f"{row!r} names files that do not exist: {missing}"


# -- add a native request type ---------------------------------------------------------


def snake(member: RequestType) -> str:
    return member.name.lower()


#: The client methods not named after their type.
CLIENT_METHODS = {RequestType.LONG_POLL_FETCH: "poll"}


def camel(member: RequestType) -> str:
    return "".join(part.capitalize() for part in member.name.split("_"))


@pytest.mark.parametrize("request_type", list(RequestType), ids=snake)
def test_a_native_type_has_its_row_layout_codecs_method_and_docs(
    request_type: RequestType,
) -> None:
    row = table_rows()["add a native request type"]
    for module in ("native/messages.py", "native/commands.py", "native/wire.py",
                   "native/client_codec.py", "client.py", "docs/protocol.md"):
        assert f"`{module}" in row, f"the table no longer names {module}"

    rows = [command for command in commands.COMMANDS.values()
            if command.request_type == request_type]
    assert len(rows) == 1, f"{request_type!r}: {len(rows)} rows in native/commands.py"

    # Its request layout: the fixed layouts of native/wire.py, or the admin and queue
    # types' body codecs the row names beside it.
    layouts = (
        set(wire.REQUEST_LAYOUTS)
        | set(operator_wire.TYPE_OF_CLASS.values())
        | set(queue_wire.TYPE_OF_CLASS.values())
    )
    assert request_type in layouts, f"{request_type!r} has no request layout"

    # The client's side: an encoder or decoder that names it, and its method.
    client_side = "\n".join(
        (BROKERD / "native" / name).read_text()
        for name in ("client_codec.py", "operator_wire.py", "queue_wire.py")
    )
    assert f"RequestType.{request_type.name}" in client_side or (
        f"encode_{snake(request_type)}" in client_side
    ), f"no client codec names {request_type!r}"
    client = (BROKERD / "client.py").read_text()
    method = CLIENT_METHODS.get(request_type, snake(request_type))
    assert f"def {method}(" in client, f"client.py has no {method}()"

    protocol = (REPO / "docs" / "protocol.md").read_text()
    assert re.search(rf"^\| {request_type.value} \| {camel(request_type)} \|", protocol, re.M), (
        f"docs/protocol.md's type table has no row for {request_type.value} {camel(request_type)}"
    )


# -- add a Kafka API ---------------------------------------------------------------------


@functools.cache
def routed_keys() -> dict[ApiKey, str]:
    """Each API answered by a handler module (its ``route(SPEC, ...)``, the spec named as
    the module imports it), with the module's name, read from the source so no handler
    needs building; the SASL APIs are answered by handlers/sasl.py before a connection
    has authenticated, not routed."""
    routed: dict[ApiKey, str] = dict.fromkeys(SASL_API_KEYS, "sasl")
    for path in sorted((BROKERD / "kafka" / "server" / "handlers").glob("*.py")):
        module = importlib.import_module(f"brokerd.kafka.server.handlers.{path.stem}")
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            spec = node.args[0]
            if (
                isinstance(node.func, ast.Name) and node.func.id == "route"
                and isinstance(spec, ast.Name)
            ):
                key = getattr(module, spec.id).key
                assert key not in routed, f"{key.name} routed twice"
                routed[key] = path.stem
    return routed


@functools.cache
def declared_specs() -> dict[ApiKey, str]:
    """Each API's ``ApiSpec`` by the message module whose ``APIS`` declares it."""
    declared: dict[ApiKey, str] = {}
    for info in pkgutil.iter_modules(list(messages.__path__)):
        module = importlib.import_module(f"{messages.__name__}.{info.name}")
        for spec in getattr(module, "APIS", ()):
            declared[spec.key] = info.name
    return declared


def test_every_routed_api_is_declared_and_every_declared_api_routed() -> None:
    routed, declared = routed_keys(), declared_specs()
    assert len(routed) > 50
    assert set(routed) - set(declared) == set(), "routed without an ApiSpec in wire/messages/"
    assert set(declared) - set(routed) == set(), "declared in wire/messages/ but never routed"


@pytest.mark.parametrize("key", sorted(routed_keys()), ids=lambda key: key.name)
def test_a_kafka_api_has_its_key_spec_route_and_docs_row(key: ApiKey) -> None:
    row = table_rows()["add a Kafka API"]
    for module in ("kafka/wire/codec.py", "kafka/wire/messages/<family>.py",
                   "kafka/server/handlers/<family>.py", "docs/kafka.md"):
        assert f"`{module}" in row, f"the table no longer names {module}"
    assert ApiKey(key.value) is key  # its ApiKey, in kafka/wire/codec.py
    family = declared_specs().get(key)
    assert family is not None, f"{key.name} has no ApiSpec in kafka/wire/messages/<family>.py"
    assert (BROKERD / "kafka" / "wire" / "messages" / f"{family}.py").exists()
    kafka_md = (REPO / "docs" / "kafka.md").read_text()
    assert re.search(rf"^\| {key.value} \| \w+ \|", kafka_md, re.M), (
        f"docs/kafka.md has no row for {key.value} ({key.name})"
    )


# -- the names a row gives live in the files it names -------------------------------------


def _row_files(row: str) -> list[Path]:
    """The Python files a row names (a folder: its modules)."""
    files: list[Path] = []
    for token in named_paths(table_rows()[row]):
        for path in resolve(token):
            files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return [path for path in files if path.suffix == ".py"]


def _names_in(paths: list[Path]) -> set[str]:
    """What the files define (classes, functions, assigned names and attributes) or
    import by name."""
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.ImportFrom):
                names.update(alias.asname or alias.name for alias in node.names)
    return names


def row_identifiers(row: str) -> list[str]:
    """The code names a row gives in backticks (``FsyncPolicy``, ``@refused_when_stopping``,
    ``core.reads.read(...)``: the last part of a dotted one)."""
    found = []
    for token in re.findall(r"`([^`]+)`", table_rows()[row]):
        match = re.fullmatch(r"@?([A-Za-z_][\w.]*?)(\(.*\))?", token)
        if match and "/" not in token and not token.endswith((".py", ".md", ".toml")):
            found.append(match.group(1).rsplit(".", 1)[-1])
    return found


@pytest.mark.parametrize("row", sorted(table_rows()))
def test_every_name_a_row_gives_is_in_the_files_it_names(row: str) -> None:
    names = _names_in(_row_files(row))
    missing = [name for name in row_identifiers(row) if name not in names]
    assert not missing, f"{row!r} gives names none of its files has: {missing}"


def test_the_name_check_sees_a_missing_name() -> None:
    assert "flush_rule" in row_identifiers("change the fsync policy")
    assert "no_such_rule" not in _names_in(_row_files("change the fsync policy"))


# -- add a metric ---------------------------------------------------------------------------

_METRIC = re.compile(r"brokerd_[a-z_]+")


def _metric_names() -> set[str]:
    """The series names written in brokerd/metrics/ (a counter's without ``_total``)."""
    names = set()
    for path in (BROKERD / "metrics").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant) and isinstance(node.value, str)
                and _METRIC.fullmatch(node.value)
            ):
                names.add(node.value.removesuffix("_total"))
    return names


def test_every_metric_is_in_docs_metrics_md_and_back() -> None:
    row = table_rows()["add a metric"]
    for named in ("metrics/live.py", "metrics/collectors.py", "metrics/registry.py",
                  "docs/metrics.md"):
        assert f"`{named}" in row, f"the table no longer names {named}"
    documented = {
        name.removesuffix("_total")
        for name in re.findall(r"^\| `(brokerd_\w+)`", (REPO / "docs" / "metrics.md").read_text(),
                               re.M)
    }
    code = _metric_names()
    assert len(code) > 40
    assert code - documented == set(), "series missing from docs/metrics.md"
    assert documented - code == set(), "docs/metrics.md documents series no code makes"


def test_every_collector_is_registered() -> None:
    registry = (BROKERD / "metrics" / "registry.py").read_text()
    collectors = {
        node.name
        for path in (BROKERD / "metrics").glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.name.endswith("Collector")
    }
    assert collectors
    assert {name for name in collectors if f"{name}(" not in registry} == set()


# -- add a journal store ----------------------------------------------------------------------


def test_every_journal_store_is_handed_to_store_recovery() -> None:
    row = table_rows()["add a journal store"]
    for named in ("storage/stores/<name>.py", "storage/journal/engine.py", "app/wiring.py",
                  "core/store_recovery.py"):
        assert f"`{named}`" in row, f"the table no longer names {named}"
    wiring = ast.parse((BROKERD / "app" / "wiring.py").read_text())
    handed = [
        node.args[0] for node in ast.walk(wiring)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id == "StoreRecovery" and node.args
    ]
    assert len(handed) == 1 and isinstance(handed[0], ast.List), "one StoreRecovery([...])"
    assert all(isinstance(e, ast.Name) for e in handed[0].elts), ast.unparse(handed[0])
    stores = _journal_store_classes()
    assert len(stores) >= 4
    given = sorted(_class_of(wiring, e.id) for e in handed[0].elts if isinstance(e, ast.Name))
    assert given == stores, f"journal stores {stores}, but StoreRecovery gets {given}"


def _journal_store_classes() -> list[str]:
    """The classes of storage/stores/ that open a journal of a ``JournalKind`` their
    module declares."""
    found = []
    for path in sorted((BROKERD / "storage" / "stores").glob("*.py")):
        tree = ast.parse(path.read_text())
        kinds = {
            target.id for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "JournalKind"
            for target in node.targets if isinstance(target, ast.Name)
        }
        found += [
            node.name for node in tree.body if isinstance(node, ast.ClassDef)
            and any(isinstance(n, ast.Name) and n.id in kinds for n in ast.walk(node))
        ]
    return sorted(found)


def _class_of(wiring: ast.Module, variable: str) -> str:
    """The class of a store the wiring builds into ``variable``: ``Class(...)`` or
    ``Class.open(...)``, or one element of an ``add_*`` function's ``tuple[...]``."""
    returns = {
        f.name: f.returns for f in wiring.body if isinstance(f, ast.FunctionDef)
    }
    for node in ast.walk(wiring):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        func = node.value.func
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id == variable:
                built = func.value if isinstance(func, ast.Attribute) else func
                assert isinstance(built, ast.Name), ast.unparse(node)
                return built.id
            if isinstance(target, ast.Tuple) and isinstance(func, ast.Name):
                names = [e.id if isinstance(e, ast.Name) else "" for e in target.elts]
                annotation = returns.get(func.id)
                if variable in names and isinstance(annotation, ast.Subscript):
                    assert isinstance(annotation.slice, ast.Tuple), ast.unparse(annotation)
                    return ast.unparse(annotation.slice.elts[names.index(variable)])
    raise AssertionError(f"app/wiring.py: where is {variable} built?")
