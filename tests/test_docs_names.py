"""Every module, name and file the docstrings, comments and docs/ point at exists.

Read from the source (nothing is imported): each dotted ``brokerd.x.y`` name, each
relative Sphinx reference (``:mod:`.reconcile```), each ``path/to/file.py`` and each
``test-case-name`` line must name a module of the tree, or a top-level name of one. A
rename that leaves a docstring behind fails here."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from tests.test_layers import package_graph, syntax_tree

ROOT = Path(__file__).resolve().parent.parent

_DOTTED = re.compile(r"(?<![\w./-])(brokerd(?:\.[A-Za-z_]\w*)+)")
_RELATIVE = re.compile(r":(?:mod|class|func|data|meth|attr|exc):`~?(\.[A-Za-z_][\w.]*)`")
_PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)+[\w.-]+\.py)\b")
_TEST_CASE = re.compile(r"test-case-name: ([\w.]+)")

#: Dotted names in docs/ that are not modules: the systemd units, the pytest plugin's
#: fixture attributes, and MirrorMaker's configs of a cluster aliased ``brokerd``.
_NOT_MODULES = re.compile(
    r"brokerd\.(service|socket|bootstrap_servers|kill|restart)$"
    r"|brokerd\.(bootstrap|enabled|config|offset|status|orders|checkpoints|heartbeats"
    r"|topics|groups|_schemas)(\.|$)"
)


def _module_file(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_Documented = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


def _tree(path: Path) -> ast.Module:
    return syntax_tree(path)


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements at this level, and inside its if/try/with blocks (not in functions)."""
    for node in body:
        yield node
        if isinstance(node, _SCOPES):
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _statements(getattr(node, field, None) or [])


@cache
def _top_names(path: Path) -> frozenset[str]:
    names: set[str] = set()
    for node in _statements(_tree(path).body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def _exists(dotted: str) -> bool:
    """A module, or a name defined in one (the first part after the module)."""
    parts = dotted.rstrip(".").split(".")
    for i in range(len(parts), 0, -1):
        found = _module_file(parts[:i])
        if found is not None:
            return i == len(parts) or parts[i] in _top_names(found)
    return False


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _relative_exists(ref: str, path: Path) -> bool:
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    return any(_exists(base + ref) for base in (here, package) if base)


@cache
def _tree_files() -> frozenset[str]:
    tops = (ROOT / "brokerd", ROOT / "tests", ROOT / "bench")
    return frozenset(str(p.relative_to(ROOT)) for top in tops for p in top.rglob("*.py"))


def _path_exists(text: str, path: Path) -> bool:
    """From the repository root, brokerd/ or tests/, or a file's own package; a short path
    (``log/start.py`` under a section that names the room) must end a file of the tree."""
    bases = [ROOT, ROOT / "brokerd", ROOT / "tests", *path.parents]
    if any((base / text).exists() for base in bases if ROOT in (base, *base.parents)):
        return True
    return any(f.endswith("/" + text) for f in _tree_files())


def _docstrings(node: _Documented) -> Iterator[str]:
    doc = ast.get_docstring(node, clean=False)
    if doc:
        yield doc
    for child in node.body:
        if isinstance(child, _SCOPES):
            yield from _docstrings(child)


def _comments(path: Path) -> Iterator[str]:
    """The ``#`` comments of a source file (``#:`` attribute docs among them)."""
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if token.type == tokenize.COMMENT:
            yield token.string


def _texts(path: Path) -> Iterator[str]:
    if path.suffix == ".md":
        yield path.read_text()
    else:
        yield from _docstrings(_tree(path))
        yield from _comments(path)


def _documents() -> list[Path]:
    return [*sorted((ROOT / "brokerd").rglob("*.py")), *sorted((ROOT / "docs").rglob("*.md")),
            ROOT / "README.md"]


def _stale() -> list[str]:
    stale: list[str] = []
    for path in _documents():
        where = str(path.relative_to(ROOT))
        for text in _texts(path):
            for name in _DOTTED.findall(text):
                if not _exists(name) and not (path.suffix == ".md" and _NOT_MODULES.match(name)):
                    stale.append(f"{where}: {name}")
            for ref in _RELATIVE.findall(text):
                if not _relative_exists(ref, path):
                    stale.append(f"{where}: {ref}")
            for file in _PATH.findall(text):
                if not _path_exists(file, path):
                    stale.append(f"{where}: {file}")
        if path.suffix == ".py":
            for test in _TEST_CASE.findall(path.read_text()):
                if not _exists(test):
                    stale.append(f"{where}: test-case-name {test}")
    return stale


def test_docstrings_and_docs_name_what_exists() -> None:
    assert _stale() == []


def test_the_check_sees_a_stale_name() -> None:
    # The check itself: a name that was never there, a relative one, and a path are caught.
    assert not _exists("brokerd.no_such_module")
    assert not _exists("brokerd.fsm.NoSuchName")
    assert _exists("brokerd.fsm.InvalidTransition")
    assert not _relative_exists(".no_such_sibling", ROOT / "brokerd" / "net" / "phase.py")
    assert _relative_exists(".connection", ROOT / "brokerd" / "net" / "phase.py")
    assert not _path_exists("net/no_such_file.py", ROOT / "docs" / "architecture.md")
    assert _path_exists("net/phase.py", ROOT / "docs" / "architecture.md")
    # Comments are read too.
    assert any("test-case-name" in c for c in _comments(ROOT / "brokerd" / "net" / "phase.py"))


def _kafka_rooms() -> list[str]:
    """The rooms of ``brokerd/kafka/`` in docs/architecture.md's listing, lowest first."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    listing = text[text.index("```\nbrokerd/kafka/\n") :].split("```\n")[1]
    return [
        "brokerd.kafka." + line.split()[0].removesuffix("/").removesuffix(".py")
        for line in listing.splitlines()
        if line.startswith("  ") and not line.startswith("   ")
    ]


def _room(module: str, rooms: list[str]) -> str | None:
    return next((r for r in rooms if module == r or module.startswith(r + ".")), None)


def test_the_kafka_rooms_are_listed_lowest_first() -> None:
    rooms = _kafka_rooms()
    assert set(rooms) >= {"brokerd.kafka.wire", "brokerd.kafka.server", "brokerd.kafka.listener"}
    upward = set()
    for src, dsts in package_graph().items():
        mine = _room(src, rooms)
        for dst in dsts:
            theirs = _room(dst, rooms)
            if mine and theirs and rooms.index(theirs) > rooms.index(mine):
                upward.add((src, dst))
    assert upward == set()


# -- the house's small truths (docs/architecture.md) ---------------------------------------


def _brokerd_trees() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted((ROOT / "brokerd").rglob("*.py")):
        yield path, _tree(path)


def _assigned(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        targets = (
            node.targets if isinstance(node, ast.Assign)
            else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_every_state_table_is_walked_by_fsm() -> None:
    # "brokerd.fsm.step, the one way every state table in the house is walked", and one
    # InvalidTransition.
    tables, errors = [], []
    for path, tree in _brokerd_trees():
        where = str(path.relative_to(ROOT))
        if any(name.endswith("TRANSITIONS") for name in _assigned(tree)):
            tables.append(where)
            steps = {
                alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "brokerd.fsm"
                for alias in node.names if alias.name == "step"
            }
            assert steps, f"{where}: a transition table not walked by brokerd.fsm.step"
            called = any(
                isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in steps
                for node in ast.walk(tree)
            )
            assert called, f"{where}: imports brokerd.fsm.step but never walks its table"
        errors += [
            where for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and node.name == "InvalidTransition"
        ]
    assert len(tables) >= 4
    assert errors == ["brokerd/fsm.py"]


def test_read_committed_is_defined_once() -> None:
    found = [
        str(path.relative_to(ROOT)) for path, tree in _brokerd_trees()
        if "READ_COMMITTED" in _assigned(tree)
    ]
    assert found == ["brokerd/storage/types.py"]


def test_brokerctl_is_the_cli_package() -> None:
    assert (ROOT / "brokerd" / "cli" / "__init__.py").is_file()
    assert sorted((ROOT / "brokerd").glob("cli_*.py")) == []
