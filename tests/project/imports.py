"""The import graph of a package, read from its source with :mod:`ast` (nothing is imported), and
the two rules ``ropekit`` keeps: no cycle, and no import from a lower stage to a higher one.

Every import counts, wherever it is written: at the top, inside a function (a lazy import), or
under ``if TYPE_CHECKING:`` (a type-only import still ties the two modules together).
``from . import name`` is an edge to the submodule ``name`` when there is one, else to the
package itself (its ``__init__``), which is how ``from . import __version__`` once tied every
module to the whole package.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

Graph = dict[str, set[str]]

STAGES: tuple[frozenset[str], ...] = (
    frozenset({"ropekit.errors", "ropekit._version"}),
    frozenset({"ropekit.contract"}),
    frozenset({"ropekit.config", "ropekit.host"}),
    frozenset({"ropekit.tables"}),
    frozenset({"ropekit.loader", "ropekit.positions"}),
    # the artifacts wing, lowest first: the values, the neutral comparison and diagnosis, the format
    # protocol, the formats (each its own room: none imports another), then the dispatchers
    frozenset({"ropekit.artifacts.served"}),
    frozenset({"ropekit.artifacts.report", "ropekit.artifacts.compare", "ropekit.artifacts.rules",
               "ropekit.artifacts.fixing", "ropekit.artifacts.files"}),
    frozenset({"ropekit.artifacts.diagnose"}),
    frozenset({"ropekit.artifacts.judge"}),
    frozenset({"ropekit.artifacts.format"}),
    frozenset({"ropekit.artifacts.formats", "ropekit.artifacts.formats.onnx", "ropekit.artifacts.formats.gguf",
               "ropekit.artifacts.formats.pte", "ropekit.artifacts.formats.arrays",
               "ropekit.artifacts.formats.safetensors", "ropekit.artifacts.formats.openvino",
               "ropekit.artifacts.formats.genie"}),
    frozenset({"ropekit.artifacts.read", "ropekit.artifacts.audit"}),
    frozenset({"ropekit.artifacts.repair", "ropekit.artifacts"}),
    frozenset({"ropekit.engines", "ropekit.tools"}),
    frozenset({"ropekit.cli"}),
    frozenset({"ropekit", "ropekit.__main__", "ropekit.torch", "ropekit.mlx", "ropekit.testing", "ropekit.families",
               "ropekit.discovery", "ropekit.registry"}),
    frozenset({"ropekit.plugins"}),
)
"""ropekit's stages, lowest first: a module may import from its own room or from a lower stage.
The artifacts wing (docs/architecture.md's stage 5) has a ladder of its own: the formats stand above
the format-neutral comparison and diagnosis, and ``read``, ``audit`` and ``repair`` above the formats,
which they reach only through ``artifacts.format``'s lazy table (no import).
Rooms that share a stage (``config`` and ``host``; ``engines`` and ``tools``) are independent and
import neither each other. The last two stages are the public faces (the package, ``python -m``
and the import paths kept stable) and the built-in plugins, which use only the public API."""


def modules_under(root: Path, package: str, *, skip: Iterable[str] = ()) -> dict[str, Path]:
    """Every module of ``package`` whose source is under ``root``, by dotted name (a package's
    ``__init__.py`` is the package's name). Folders named in ``skip`` are left out."""
    found: dict[str, Path] = {}
    skipped = set(skip)
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders if name not in skipped and name != "__pycache__"
                               and (Path(folder) / name / "__init__.py").exists())
        relative = Path(folder).relative_to(root).parts
        for name in files:
            if not name.endswith(".py"):
                continue
            parts = (package, *relative) if name == "__init__.py" else (package, *relative, name[:-3])
            found[".".join(parts)] = Path(folder) / name
    return found


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name a relative ``from`` import in ``module`` points at."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def import_graph(sources: Mapping[str, Path], prefix: str) -> Graph:
    """Edges between the modules in ``sources`` (imports of anything not starting with ``prefix``
    are left out)."""
    graph: Graph = {name: set() for name in sources}

    def add(module: str, target: str) -> None:
        if target == prefix or target.startswith(prefix + "."):
            while target not in sources and "." in target:  # a name inside a module: the module
                target = target.rsplit(".", 1)[0]
            if target in sources and target != module:
                graph[module].add(target)

    for module, path in sources.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(module, alias.name)
            elif isinstance(node, ast.ImportFrom):
                origin = _resolve(module, is_package, node.level, node.module) if node.level else node.module or ""
                for alias in node.names:
                    submodule = f"{origin}.{alias.name}"
                    add(module, submodule if submodule in sources else origin)
    return graph


def find_cycle(graph: Graph) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target):], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def room_of(module: str, stages: Sequence[frozenset[str]]) -> tuple[int, str] | None:
    """``(stage index, room)`` for the longest room name that ``module`` is, or is inside (the top
    package's own room holds only its ``__init__``)."""
    best: tuple[int, str] | None = None
    for index, rooms in enumerate(stages):
        for room in rooms:
            inside = "." in room and module.startswith(room + ".")
            if (module == room or inside) and (best is None or len(room) > len(best[1])):
                best = (index, room)
    return best


def upward_imports(graph: Graph, stages: Sequence[frozenset[str]]) -> list[str]:
    """Every edge that breaks the stage order, and every module in no declared room, as lines."""
    problems = []
    for module in sorted(graph):
        here = room_of(module, stages)
        if here is None:
            problems.append(f"{module}: in no declared stage")
            continue
        for target in sorted(graph[module]):
            there = room_of(target, stages)
            if there is None:
                continue  # reported as its own line
            if there[0] > here[0] or (there[0] == here[0] and there[1] != here[1]):
                problems.append(f"{module} (stage {here[0]}, {here[1]}) imports {target} "
                                f"(stage {there[0]}, {there[1]})")
    return problems


def private_imports(sources: Mapping[str, Path], prefix: str) -> list[str]:
    """Every place a module uses a private name (``_x``, not ``__x__``) of another module of the
    package: ``from other import _x``, and ``other._x`` where ``other`` names an imported module."""
    found = []
    for module, path in sorted(sources.items()):
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        modules: dict[str, str] = {}  # local name -> the package module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(prefix + ".") and alias.asname:
                        modules[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                origin = _resolve(module, is_package, node.level, node.module) if node.level else node.module or ""
                if not (origin == prefix or origin.startswith(prefix + ".")):
                    continue
                for alias in node.names:
                    name = alias.name
                    if f"{origin}.{name}" in sources:
                        modules[alias.asname or name] = f"{origin}.{name}"
                    elif name.startswith("_") and not name.startswith("__") and origin != module:
                        found.append(f"{module} (line {node.lineno}) imports {name} from {origin}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                    and node.attr.startswith("_") and not node.attr.startswith("__")
                    and modules[node.value.id] != module):
                found.append(f"{module} (line {node.lineno}) uses {modules[node.value.id]}.{node.attr}")
    return found
