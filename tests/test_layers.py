"""The house is one-way: every ``arenabench`` module imports only its own layer or lower ones, and
no two modules import each other round a cycle.

The layers (bottom first) are the table below, the same as ARCHITECTURE.md's "Layers". Data flows
judges → engine → constructors → advantages → trainers; a layer may import any layer of a lower
rank, and its own, never a layer of its own rank or above (siblings such as judges and
constructors, or the TRL and verl adapters, meet only through plain data from ``types.py`` or
through a layer above both). Every import counts, those inside functions included: a deferred
import is still an arrow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import arenabench

PACKAGE = Path(arenabench.__file__).parent

# (rank, layer, module prefixes): a module belongs to the layer of its longest matching prefix
LAYERS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (
        0,
        "core",
        (
            "arenabench",
            "arenabench.types",
            "arenabench.registry",
            "arenabench.asyncrun",
            "arenabench.metrics",
            "arenabench.stats",
            "arenabench.reporting",
            "arenabench.order",
            "arenabench.advantages",
            "arenabench.aggregation",
            "arenabench.verifiers",
            "arenabench.diagnostics",
            "arenabench.kinds",
        ),
    ),
    (1, "judges", ("arenabench.judges",)),
    (1, "constructors", ("arenabench.rewards",)),
    (1, "simulation", ("arenabench.sim",)),
    (1, "tracking", ("arenabench.tracking",)),
    (2, "engine", ("arenabench.engine",)),
    (2, "calibration", ("arenabench.calibration",)),
    (2, "test models", ("arenabench.tiny_model",)),
    (3, "studies", ("arenabench.fidelity",)),
    (3, "trainer kit", ("arenabench.trainers", "arenabench.trainers.losses", "arenabench.trainers.scoring")),
    (4, "local trainer", ("arenabench.trainers.local",)),
    (4, "TRL adapter", ("arenabench.trainers.trl",)),
    (4, "verl adapter", ("arenabench.trainers.verl",)),
    (
        5,
        "app and CLI",
        (
            "arenabench.train",
            "arenabench.sweep",
            "arenabench.cli",
            "arenabench.compare",
            "arenabench.__main__",
        ),
    ),
)

# arrows the house still has (each goes with the commit that removes it); must stay empty
KNOWN: set[str] = set()


def layer_of(module: str) -> tuple[int, str]:
    best = max(
        (
            (len(p), rank, name)
            for rank, name, prefixes in LAYERS
            for p in prefixes
            if module == p or module.startswith(p + ".")
        ),
        default=None,
    )
    assert best is not None, f"{module} is in no layer: add it to LAYERS (and ARCHITECTURE.md)"
    return best[1], best[2]


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("arenabench", *path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The arenabench modules ``module`` imports, anywhere in its file: ``from a import b`` counts
    as ``a.b`` when that is a module, and the package's lazy names (``from arenabench import
    Engine``) as the module behind them."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            targets = []
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in known:
                    targets.append(sub)
                elif source == "arenabench" and alias.name in arenabench._LAZY:
                    targets.append(arenabench._LAZY[alias.name])
                else:
                    targets.append(source)
        else:
            continue
        for target in targets:
            if target == "arenabench" or target.startswith("arenabench."):
                while target not in known:  # `import arenabench.x.y` names a module or its attribute
                    target = target.rpartition(".")[0]
                if target != module:
                    out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {m: imports(m, p, known) for m, p in known.items()}


def upward(graph: dict[str, set[str]]) -> set[str]:
    found = set()
    for module, targets in graph.items():
        rank, layer = layer_of(module)
        for target in targets:
            trank, tlayer = layer_of(target)
            if tlayer != layer and trank >= rank:
                found.add(f"{module} -> {target} ({layer} -> {tlayer})")
    return found


def cycles(graph: dict[str, set[str]]) -> set[str]:
    """Strongly connected components of more than one module (Tarjan), as one line each. A package's
    ``__init__`` re-exporting its own modules is not an arrow back from them, so the edges from a
    package to the modules inside it are left out."""
    edges = {m: {t for t in ts if not t.startswith(m + ".")} for m, ts in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add("cycle: " + " <-> ".join(sorted(component)))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


# heavy third-party packages and the modules allowed to import them (their adapters; the app
# layer for a launcher's own dependency)
HEAVY: dict[str, tuple[str, ...]] = {
    "vllm": ("arenabench.judges.vllm_offline", "arenabench.trainers.verl"),
    "verl": ("arenabench.trainers.verl",),
    "ray": ("arenabench.trainers.verl",),
    "trl": ("arenabench.trainers.trl",),
    "submitit": ("arenabench.sweep", "arenabench.train"),
}


def heavy_imports() -> set[str]:
    found = set()
    for module, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                allowed = HEAVY.get(top)
                if allowed and not any(module == a or module.startswith(a + ".") for a in allowed):
                    found.add(f"{module} imports {top}")
    return found


def test_heavy_dependencies_only_inside_their_adapters():
    assert heavy_imports() == set()


def test_every_module_has_a_layer():
    for module in modules():
        layer_of(module)


def test_imports_point_down_and_never_round():
    graph = import_graph()
    found = upward(graph) | cycles(graph)
    assert found - KNOWN == set(), "new upward arrows or cycles:\n" + "\n".join(sorted(found - KNOWN))
    assert KNOWN - found == set(), "gone (drop them from KNOWN):\n" + "\n".join(sorted(KNOWN - found))


def test_checker_sees_deferred_and_relative_imports(tmp_path):
    """An import inside a function and a relative one are arrows like the others."""
    pkg = tmp_path / "arenabench"
    (pkg / "judges").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "judges" / "__init__.py").write_text("")
    (pkg / "judges" / "x.py").write_text("def f():\n    from ..engine import Engine\n    from . import y\n")
    (pkg / "judges" / "y.py").write_text("")
    (pkg / "engine.py").write_text("")
    known = {
        "arenabench": pkg / "__init__.py",
        "arenabench.judges": pkg / "judges" / "__init__.py",
        "arenabench.judges.x": pkg / "judges" / "x.py",
        "arenabench.judges.y": pkg / "judges" / "y.py",
        "arenabench.engine": pkg / "engine.py",
    }
    got = imports("arenabench.judges.x", known["arenabench.judges.x"], known)
    assert got == {"arenabench.engine", "arenabench.judges.y"}
    assert upward({"arenabench.judges.x": got, "arenabench.engine": set(), "arenabench.judges.y": set()}) == {
        "arenabench.judges.x -> arenabench.engine (judges -> engine)"
    }
