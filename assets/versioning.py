"""Code versions derived from the source each asset actually imports.

An asset's code version is a hash of the source files of every project module its compute
function's module imports, directly or transitively, so editing a module changes the version of
exactly the assets that import it, and the stage caches (``assets/_stages.open_store``) key on
that same string. grimp (``grimp.build_graph``) reads the import graph from the source. Counted:

- every ``import`` and ``from ... import`` anywhere in the module, inside functions too,
  resolved to a module or package of ``saturated_dag``, ``assets``, ``resources`` or ``jobs``
  (``from pkg import name`` counts ``pkg.name`` when that is a module, else ``pkg``; a missing
  module counts its nearest existing package), except under ``if TYPE_CHECKING:``;
- (ours, ``string_imports``) a string literal that is the dotted name of a project module
  (``PRELOADED = ["jobs.step_server"]``, a ``python -m`` argument): another process runs it.

A package's ``__init__`` counts only when the package itself is imported by name (``import
resources``, ``from saturated_dag.tasks import TASKS``), not for an import of a submodule below
it: ``assets/__init__.py`` imports every asset module to build the graph, so counting it would
make every asset depend on every other asset module. The price: a side effect of a parent
``__init__`` that a submodule relies on is not tracked (the project's packages have none).
"""

from __future__ import annotations

import ast
import hashlib
import re
import sys
from collections.abc import Callable, Iterable
from functools import cached_property
from pathlib import Path

import dagster as dg
import grimp

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROJECT_PACKAGES = ("saturated_dag", "assets", "resources", "jobs")

SourceReader = Callable[[Path], bytes]


def string_imports(source: bytes, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that a string literal of ``source`` names exactly (dotted
    names only, so the word "assets" is not the package ``assets``).

    The one rule grimp lacks: a module named in a string is imported by another process (the
    step fork server's ``PRELOADED``, ``python -m``), so its code is the asset's code too.
    """
    quoted = {m.decode() for m in re.findall(rb"[\"']([\w.]+)[\"']", source)}
    if not quoted & modules:  # most files: no parse
        return set()
    return {node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and "." in node.value and node.value in modules}


class SourceTree:
    """The project's packages under ``root``: their import graph and their source hashes.

    The graph is grimp's, read from the files on disk, plus ``string_imports``' edges; ``read``
    returns the bytes that are hashed (tests pass their own to simulate an edit without touching
    the file). The graph and the versions are memoised per tree.
    """

    def __init__(self, root: Path = PROJECT_ROOT,
                 packages: Iterable[str] = PROJECT_PACKAGES,
                 read: SourceReader = Path.read_bytes) -> None:
        self.root = Path(root)
        self.packages = tuple(packages)
        self._read = read
        self._versions: dict[str, str] = {}

    @cached_property
    def graph(self) -> grimp.ImportGraph:
        """grimp's graph of the packages (found under ``root``, put first on ``sys.path`` while
        it is built; no cache folder), with an edge for every string that names a module."""
        sys.path.insert(0, str(self.root))
        try:
            graph = grimp.build_graph(*self.packages, exclude_type_checking_imports=True,
                                      cache_dir=None)
        finally:
            sys.path.remove(str(self.root))
        modules = set(graph.modules)
        for module in modules:
            for named in string_imports(self._read(self.file_of(module)), modules) - {module}:
                graph.add_import(importer=module, imported=named)
        return graph

    def file_of(self, module: str) -> Path:
        """The file of a project module (``pkg/mod.py`` or ``pkg/__init__.py``)."""
        base = self.root.joinpath(*module.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        raise FileNotFoundError(f"{module} has no file under {self.root} (was its package "
                                "found elsewhere on sys.path?)")

    def closure(self, module: str) -> list[str]:
        """``module`` and every project module it imports, directly or not, sorted by name."""
        if module not in self.graph.modules:
            raise ModuleNotFoundError(f"{module} is not a module of the project under "
                                      f"{self.root} (packages: {', '.join(self.packages)})")
        return sorted({module, *self.graph.find_upstream_modules(module)})

    def files(self, module: str) -> list[str]:
        """The closure's files, relative to the root (POSIX), sorted: what ``version`` hashes."""
        return sorted(self.file_of(m).relative_to(self.root).as_posix()
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
