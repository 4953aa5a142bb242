"""The tests mirror the source tree: each module of ``brokerd/`` that has logic has its
test module at the same folders under ``tests/``, so the tests of a module are found
without a search and a new module's missing tests are seen.

The rule, read from the source (``ast``): a module *has logic* when it defines a function
or method whose body is more than a declaration (more than a docstring, ``...`` or
``pass``), outside ``Protocol`` classes and ``if TYPE_CHECKING:`` blocks. Its *mirrored*
test module is ``tests/<folders>/test_<stem>.py`` or ``tests/<folders>/test_<stem>_<aspect>.py``
(a package's ``__init__.py`` counts as the module ``<package>``: ``brokerd/core/api/``
is tested by ``tests/core/test_api.py``). A module with logic and no mirrored test module
fails the test unless :data:`WITHOUT_OWN_TESTS` says why it needs none.

The ``# -*- test-case-name: ... -*-`` first line of a source module (what ``trial``
runs for it) must name test modules that exist, so a moved test module takes its
source's line along.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "brokerd"
TESTS = ROOT / "tests"

#: Source folders whose tests live under another name. ``tests/operator`` would be a
#: package named like the standard library's ``operator`` (a child script run as a file
#: has tests/ first on sys.path, and the fsync fault broker could not start).
TEST_FOLDER_OF = {"operator": "operator_room"}

#: Modules with logic that need no test module of their own, and why.
WITHOUT_OWN_TESTS: dict[str, str] = {
    "testing/pytest_plugin.py": "the pytest plugin is tested in a child pytest, tests/plugin/",
    "testing/launcher.py": "the plugin's broker launcher: tests/plugin/ starts brokers with it",
    "testing/fork_server.py": "the plugin's forking broker starter: tests/plugin/ uses it",
}

def declares_only(body: list[ast.stmt]) -> bool:
    """Whether a function body is a declaration: a docstring, ``...`` or ``pass``."""
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        body = body[1:] if isinstance(first.value.value, str) else body
    return all(
        isinstance(s, ast.Pass)
        or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
            and s.value.value is Ellipsis)
        for s in body
    )


def is_protocol(cls: ast.ClassDef) -> bool:
    for base in cls.bases:
        node = base.value if isinstance(base, ast.Subscript) else base
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
        if name == "Protocol":
            return True
    return False


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
    return name == "TYPE_CHECKING"


def logic_functions(tree: ast.Module) -> list[str]:
    """The functions and methods of a module whose bodies are more than declarations."""
    found: list[str] = []

    def visit(nodes: list[ast.stmt], in_protocol: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.ClassDef):
                visit(node.body, is_protocol(node))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not in_protocol and not declares_only(node.body):
                    found.append(node.name)
            elif isinstance(node, ast.Try) or (
                isinstance(node, ast.If) and not is_type_checking(node)
            ):
                visit(node.body, in_protocol)
                visit(node.orelse, in_protocol)

    visit(tree.body, False)
    return found


def mirror_of(module: Path) -> tuple[Path, str]:
    """The folder under tests/ and the stem a source module's test modules carry."""
    rel = module.relative_to(SOURCE)
    if rel.name == "__init__.py":
        folders, stem = rel.parts[:-2], rel.parts[-2]
    else:
        folders, stem = rel.parts[:-1], rel.stem
    folder = TESTS.joinpath(*(TEST_FOLDER_OF.get(f, f) for f in folders))
    return folder, stem


def mirrored(module: Path) -> bool:
    folder, stem = mirror_of(module)
    return (folder / f"test_{stem}.py").is_file() or any(folder.glob(f"test_{stem}_*.py"))


@functools.cache
def logic_modules() -> dict[str, bool]:
    """Each source module with logic (path under brokerd/), and whether it is mirrored."""
    out: dict[str, bool] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        if path == SOURCE / "__init__.py":
            continue
        if logic_functions(ast.parse(path.read_text())):
            out[path.relative_to(SOURCE).as_posix()] = mirrored(path)
    return out


def test_the_rule_reads_logic_from_the_source() -> None:
    tree = ast.parse(
        "from typing import Protocol, TYPE_CHECKING\n"
        "class Face(Protocol):\n    def op(self) -> int:\n        return 1\n"
        "class Data:\n    x: int\n"
        "    def declared(self) -> None:\n        '''Doc.'''\n        ...\n"
        "if TYPE_CHECKING:\n    def check(f: Face) -> Face:\n        return f\n"
        "def work(x: int) -> int:\n    return x + 1\n"
    )
    assert logic_functions(tree) == ["work"]
    assert mirror_of(SOURCE / "core" / "api" / "__init__.py") == (TESTS / "core", "api")
    assert mirror_of(SOURCE / "operator" / "views.py") == (TESTS / "operator_room", "views")


def test_every_module_with_logic_has_its_mirrored_test_module() -> None:
    modules = logic_modules()
    missing = sorted(
        m for m, has in modules.items()
        if not has and m not in WITHOUT_OWN_TESTS
    )
    assert not missing, (
        "modules with logic and no tests/<same folders>/test_<stem>[_<aspect>].py "
        f"(write it, or say in WITHOUT_OWN_TESTS why none is needed): {missing}"
    )


def test_the_exemptions_name_modules_with_logic() -> None:
    modules = logic_modules()
    stale = sorted(m for m in WITHOUT_OWN_TESTS if m not in modules)
    assert not stale, f"no such module with logic: {stale}"


TEST_CASE_NAME = re.compile(r"#\s*-\*-\s*test-case-name:\s*(?P<names>[^*]+?)\s*-\*-")


def test_test_case_names_name_test_modules_that_exist() -> None:
    wrong: list[str] = []
    for path in sorted(SOURCE.rglob("*.py")):
        first = path.read_text().split("\n", 1)[0]
        match = TEST_CASE_NAME.search(first)
        if match is None:
            continue
        for name in (n.strip() for n in match["names"].split(",")):
            target = ROOT.joinpath(*name.split("."))
            if not (target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()):
                wrong.append(f"{path.relative_to(ROOT)}: {name}")
    assert not wrong, wrong
