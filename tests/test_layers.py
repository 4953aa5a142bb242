"""The layer rules of docs/architecture.md, read from the source: nothing outside
``brokerd/kafka/`` imports the Kafka listener except the service wiring
(``brokerd/app/wiring.py``, and ``brokerd/app/from_options.py`` for ``--sasl``'s
mechanism names), and no modules inside it import each other in a circle. Every
module's imports are parsed (``ast``), type-checking-only and function-level imports
included, so a dependency cannot hide in a local import.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import brokerd

PACKAGE = Path(brokerd.__file__).resolve().parent
KAFKA = PACKAGE / "kafka"
#: The modules allowed to import brokerd.kafka from outside: the service wiring, and the
#: options' check of ``--sasl`` (the Kafka listener's mechanism names).
WIRING = {PACKAGE / "app" / "wiring.py", PACKAGE / "app" / "from_options.py"}


def imported_modules(source: str | ast.Module) -> set[str]:
    """Every module an ``import`` or ``from ... import`` names, in full dotted form
    (``from brokerd import kafka`` gives ``brokerd.kafka``)."""
    found: set[str] = set()
    tree = ast.parse(source) if isinstance(source, str) else source
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


@functools.cache
def syntax_tree(path: Path) -> ast.Module:
    """One source file's syntax tree, parsed once per test process (tests/test_docs_names.py
    reads the same files' docstrings from it)."""
    return ast.parse(path.read_text())


@functools.cache
def imports_of(path: Path) -> frozenset[str]:
    """:func:`imported_modules` of one file, parsed once for the whole module's tests."""
    return frozenset(imported_modules(syntax_tree(path)))


def is_kafka(module: str) -> bool:
    return module == "brokerd.kafka" or module.startswith("brokerd.kafka.")


def kafka_imports_outside() -> dict[str, list[str]]:
    offenders: dict[str, list[str]] = {}
    # The package and the twistd plugin (tests, tools and benchmarks may use the codec).
    plugin = PACKAGE.parent / "twisted" / "plugins"
    for path in sorted([*PACKAGE.rglob("*.py"), *plugin.glob("*.py")]):
        if path.is_relative_to(KAFKA) or path in WIRING:
            continue
        found = sorted(m for m in imports_of(path) if is_kafka(m))
        if found:
            offenders[str(path.relative_to(PACKAGE.parent))] = found
    return offenders


def test_reader_sees_every_import_form() -> None:
    source = (
        "import brokerd.kafka.wire.codec\n"
        "from brokerd import kafka\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from brokerd.kafka.errors import ErrorCode\n"
        "def f():\n"
        "    from brokerd.kafka.groups import group_admin\n"
    )
    assert {m for m in imported_modules(source) if is_kafka(m)} == {
        "brokerd.kafka.wire.codec",
        "brokerd.kafka",
        "brokerd.kafka.errors",
        "brokerd.kafka.errors.ErrorCode",
        "brokerd.kafka.groups",
        "brokerd.kafka.groups.group_admin",
    }


def test_nothing_outside_kafka_imports_it_but_the_wiring() -> None:
    assert kafka_imports_outside() == {}


def test_the_wiring_does_import_it() -> None:
    # The exception is real (the listener is built somewhere), so the rule is not vacuous.
    for path in WIRING:
        assert any(is_kafka(m) for m in imports_of(path)), path


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (as a path that ends where it starts), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node):], node]
        if node in done:
            return None
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            found = visit(nxt)
            if found:
                return found
        path.pop()
        done.add(node)
        return None

    for node in sorted(graph):
        found = visit(node)
        if found:
            return found
    return None


def test_no_import_cycle_in_kafka() -> None:
    # Type-checking-only imports count: a circle of them is still a circle of modules
    # that must be read together.
    modules = {module_name(p): p for p in KAFKA.rglob("*.py")}
    graph = {
        name: {m for m in imports_of(path) if m in modules and m != name}
        for name, path in modules.items()
    }
    assert import_cycle(graph) is None


def test_cycle_finder_finds_one() -> None:
    assert import_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert import_cycle({"a": {"b"}, "b": set()}) is None


# --- Packages: no circle, and storage's rooms in their order ------------------------------
#
# A node is a package (every module of ``brokerd/storage/log/`` is ``brokerd.storage.log``),
# except the modules directly in ``brokerd/``: those are nodes of their own, since the
# package holds both the floor (errors, names) and the top (tap, cli).

#: storage's rooms, lowest first: a room imports only rooms before it (and the floor,
#: ``brokerd.storage`` itself, imports none of them).
STORAGE_ROOMS = (
    "brokerd.storage",
    "brokerd.storage.record",
    "brokerd.storage.config",
    "brokerd.storage.segment",
    "brokerd.storage.log",
    "brokerd.storage.cleaner",
    "brokerd.storage.journal",
    "brokerd.storage.stores",
    "brokerd.storage.logdir",
)


def node_of(module: str) -> str | None:
    """The graph node a ``brokerd`` module (or a name imported from one) belongs to."""
    parts = module.split(".")
    if parts[0] != "brokerd":
        return None
    # Longest prefix that is a package; a module directly in brokerd/ is its own node.
    for cut in range(len(parts), 0, -1):
        path = PACKAGE.parent.joinpath(*parts[:cut])
        if (path / "__init__.py").is_file():
            if cut == 1:
                return "brokerd." + parts[1] if len(parts) > 1 else "brokerd"
            return ".".join(parts[:cut])
    return None


@functools.cache
def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        src = node_of(module_name(path)) if path.parent != PACKAGE else module_name(path)
        assert src is not None
        targets = graph.setdefault(src, set())
        for module in imports_of(path):
            dst = node_of(module)
            if dst is not None and dst != src and dst != "brokerd":
                targets.add(dst)
    return graph


def test_node_of() -> None:
    assert node_of("brokerd.storage.log.partition_log") == "brokerd.storage.log"
    assert node_of("brokerd.storage.log.partition_log.PartitionLog") == "brokerd.storage.log"
    assert node_of("brokerd.storage.fileio") == "brokerd.storage"
    assert node_of("brokerd.errors") == "brokerd.errors"
    assert node_of("brokerd.errors.StorageError") == "brokerd.errors"
    assert node_of("twisted.internet") is None


def test_no_import_circle_between_packages() -> None:
    assert import_cycle(package_graph()) is None


def test_storage_rooms_import_only_lower_rooms() -> None:
    graph = package_graph()
    upward = {
        (room, dst)
        for i, room in enumerate(STORAGE_ROOMS)
        for dst in graph.get(room, ())
        if dst in STORAGE_ROOMS[i:]
    }
    assert upward == set()
    assert set(STORAGE_ROOMS) == {n for n in graph if n.startswith("brokerd.storage")}


def test_storage_and_core_import_nothing_above_them() -> None:
    # The core and storage serve the protocols, admin, web and the wiring; never the reverse.
    above = ("brokerd.kafka", "brokerd.native", "brokerd.web", "brokerd.operator", "brokerd.tap",
             "brokerd.cli", "brokerd.app", "brokerd.net", "brokerd.security")
    graph = package_graph()
    found = {
        (src, dst)
        for src, dsts in graph.items()
        if src.startswith(("brokerd.storage", "brokerd.core"))
        for dst in dsts
        if dst.startswith(above)
    }
    assert found == set()
