"""Code versions derived from the source each asset actually imports.

An asset's code version is a hash of the source files of every project module its compute
function's module imports, directly or transitively, so editing a module changes the version of
exactly the assets that import it, and the stage caches (``assets/_stages.open_store``) key on
that same string. Nothing is kept by hand: the import graph is read from the source with
``ast``.

What counts as an import (``SourceTree.direct_imports``):

- every ``import`` and ``from ... import`` statement anywhere in the module, including those
  inside functions (the core imports heavy modules lazily), resolved to a project module: a
  module or package of ``saturated_dag``, ``assets``, ``resources`` or ``jobs``; relative
  imports are resolved against the importing module's package;
- ``from pkg import name`` counts ``pkg.name`` when that is a module (a submodule import) and
  ``pkg`` (its ``__init__.py``) when ``name`` is something ``__init__`` defines or re-exports;
- a string literal that is the dotted name of a project module (``"saturated_dag.training.
  isolated"`` as a ``python -m`` argument): a child process runs that module's code;
- imports under ``if TYPE_CHECKING:`` do not count: they never run.

How package ``__init__`` files count: only when the package itself is imported by name
(``import resources``, ``from resources import ExperimentResource``, ``from saturated_dag.tasks
import TASKS``), never merely because a submodule below it is imported. Python does execute
``assets/__init__.py`` when ``assets.generation_pool`` is imported, but what the importer uses
is the submodule's names; and ``assets/__init__.py`` imports every asset module to build the
graph, so counting it for every submodule import would make every asset depend on every other
asset module and turn any edit into a re-run of everything. The price of the rule: a side
effect of a parent ``__init__`` that a submodule silently relies on is not tracked (none of the
project's packages has one; they are docstrings, re-exports or the graph builder).
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import dagster as dg

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROJECT_PACKAGES = ("saturated_dag", "assets", "resources", "jobs")

SourceReader = Callable[[Path], bytes]
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


class SourceTree:
    """The project's modules under ``root``, their imports and their source hashes.

    ``read`` returns a file's bytes; tests pass their own to simulate an edit without touching
    the file. Parsed imports and closures are memoised per tree.
    """

    def __init__(self, root: Path = PROJECT_ROOT,
                 packages: Iterable[str] = PROJECT_PACKAGES,
                 read: SourceReader = Path.read_bytes) -> None:
        self.root = Path(root)
        self.packages = tuple(packages)
        self._read = read
        self._imports: dict[str, frozenset[str]] = {}
        self._versions: dict[str, str] = {}

    def file_of(self, module: str) -> Path | None:
        """The file of a project module (``pkg/mod.py`` or ``pkg/__init__.py``), else None."""
        parts = module.split(".")
        if parts[0] not in self.packages:
            return None
        base = self.root.joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None

    def is_project(self, module: str) -> bool:
        return module.split(".")[0] in self.packages

    def source(self, module: str) -> bytes:
        path = self.file_of(module)
        if path is None:
            raise ModuleNotFoundError(f"{module} is not a module of the project under "
                                      f"{self.root} (packages: {', '.join(self.packages)})")
        return self._read(path)

    def direct_imports(self, module: str) -> frozenset[str]:
        """The project modules ``module`` imports itself (see the module docstring's rules)."""
        if module not in self._imports:
            path = self.file_of(module)
            tree = ast.parse(self.source(module), filename=str(path))
            is_package = path is not None and path.name == "__init__.py"
            finder = _ImportFinder(self, module, is_package)
            finder.visit(tree)
            self._imports[module] = frozenset(finder.found - {module})
        return self._imports[module]

    def closure(self, module: str) -> list[str]:
        """``module`` and every project module it imports, directly or not, sorted by name."""
        seen = {module}
        todo = [module]
        while todo:
            for dep in self.direct_imports(todo.pop()):
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        return sorted(seen)

    def files(self, module: str) -> list[str]:
        """The closure's files, relative to the root (POSIX), sorted: what ``version`` hashes."""
        return sorted(self.file_of(m).relative_to(self.root).as_posix()  # type: ignore[union-attr]
                      for m in self.closure(module))

    def version(self, module: str) -> str:
        """sha256[:16] over the relative path and bytes of every file of the closure."""
        if module not in self._versions:
            digest = hashlib.sha256()
            for relative in self.files(module):
                data = self._read(self.root / relative)
                digest.update(f"{relative}\0{len(data)}\0".encode())
                digest.update(data)
            self._versions[module] = digest.hexdigest()[:16]
        return self._versions[module]


class _ImportFinder(ast.NodeVisitor):
    """Collects the project modules one module's source imports."""

    def __init__(self, tree: SourceTree, module: str, is_package: bool) -> None:
        self.tree = tree
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.found: set[str] = set()

    def _require(self, name: str, lineno: int) -> str:
        if self.tree.file_of(name) is None:
            raise ModuleNotFoundError(
                f"{self.module} (line {lineno}) imports {name}, which is not a module of the "
                f"project under {self.tree.root}: its code version cannot be derived")
        return name

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        name = test.id if isinstance(test, ast.Name) else (
            test.attr if isinstance(test, ast.Attribute) else None)
        if name == "TYPE_CHECKING":  # never runs: only its else branch counts
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if self.tree.is_project(alias.name):
                self.found.add(self._require(alias.name, node.lineno))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            parts = self.package.split(".") if self.package else []
            if node.level - 1 > len(parts) - 1:
                raise ImportError(f"{self.module} (line {node.lineno}): relative import beyond "
                                  "the top-level package")
            parts = parts[:len(parts) - (node.level - 1)]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        else:
            base = node.module or ""
        if not self.tree.is_project(base):
            return
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            if alias.name != "*" and self.tree.file_of(submodule) is not None:
                self.found.add(submodule)
            else:
                self.found.add(self._require(base, node.lineno))

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if (isinstance(value, str) and _DOTTED.fullmatch(value) and self.tree.is_project(value)
                and self.tree.file_of(value) is not None):
            self.found.add(value)


PROJECT = SourceTree()
"""The code location's own tree, read from disk once per process (a reload re-reads it)."""


def compute_module(assets_def: dg.AssetsDefinition) -> str:
    """The module that defines the asset's compute function (the factory's module for assets
    built by a factory function)."""
    fn = assets_def.op.compute_fn
    fn = getattr(fn, "decorated_fn", fn)
    module = getattr(fn, "__module__", None)
    if not module:
        raise ValueError(f"cannot tell which module defines the compute function of "
                         f"{', '.join(k.to_user_string() for k in assets_def.keys)}")
    return module


def code_version_for(assets_def: dg.AssetsDefinition, tree: SourceTree | None = None) -> str:
    """The code version of every asset of ``assets_def``: the hash of its compute module's
    import closure within the project."""
    return (tree or PROJECT).version(compute_module(assets_def))


def code_versions(assets: Iterable[dg.AssetsDefinition],
                  tree: SourceTree | None = None) -> dict[dg.AssetKey, str]:
    """Every executable asset key's derived code version."""
    return {key: code_version_for(a, tree) for a in assets if a.is_executable
            for key in a.keys}


def with_code_versions(assets: Iterable[dg.AssetsDefinition],
                       tree: SourceTree | None = None) -> list[dg.AssetsDefinition]:
    """The assets with their code versions replaced by the derived ones (executable assets;
    external ones have no code to version)."""
    out: list[dg.AssetsDefinition] = []
    for a in assets:
        if not a.is_executable:
            out.append(a)
            continue
        version = code_version_for(a, tree)
        out.append(a.map_asset_specs(
            lambda spec, v=version: spec.replace_attributes(code_version=v)))
    return out


def code_version_of(context: dg.AssetExecutionContext) -> str:
    """The running asset's code version, the one string its stage cache keys on.

    Raises ``dg.Failure`` when the asset has none, i.e. it was not built through
    ``with_code_versions`` (``assets.automation.with_lineage``).
    """
    version = context.assets_def.code_versions_by_key.get(context.asset_key)
    if not version:
        raise dg.Failure(f"{context.asset_key.to_user_string()} has no code version: build the "
                         "assets through assets.automation.with_lineage, which derives them")
    return version
