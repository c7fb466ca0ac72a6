"""The package's import graph: no cycle between modules, and every import goes down the data flow's
layers (DESIGN.md), module-level and function-level imports alike. Imports under `if TYPE_CHECKING:` are
left out: they never run."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "strata_bench"
# Bottom to top: a module may import its own package and the packages listed before it.
LAYERS = ("errors", "literals", "files", "formats", "numerics", "kernels", "data", "cases", "toml_abi", "kit", "families", "ggml",
          "gpu", "checks", "timing", "stats", "results", "runs", "ab", "engine", "report", "workloads", "cli",
          "__main__")


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING"


def _imported(node: ast.AST, package: str, modules: dict[str, Path]) -> set[str]:
    """The strata_bench modules an import statement names (a name that is a submodule counts as it)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in modules}
    if not isinstance(node, ast.ImportFrom):
        return set()
    if node.level:
        base = package.split(".")[:len(package.split(".")) - node.level + 1]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    named = {f"{module}.{a.name}" for a in node.names}
    return {m for m in named if m in modules} | ({module} if module in modules and not named <= set(modules) else set())


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:
                    walk_one(other)
                continue
            walk_one(child)

    def walk_one(child: ast.AST) -> None:
        found.update(_imported(child, package, modules))
        walk(child)

    walk(ast.parse(path.read_text()))
    return found - {module}


def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _imports(m, p, modules) for m, p in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 else -1


def upward(edges: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(a, b) for a, targets in edges.items() for b in targets if _layer(b) > _layer(a)}


def test_no_module_imports_itself_back():
    assert cycles(graph()) == []


def test_every_import_goes_down_the_layers():
    assert upward(graph()) == set()


def test_every_package_has_a_layer():
    assert {m.split(".")[1] for m in graph() if "." in m} <= set(LAYERS)


def test_a_cycle_and_an_upward_arrow_are_found():
    """The checks themselves can fail: a two-module cycle, and timing importing report."""
    edges = {"strata_bench.timing.a": {"strata_bench.report.b"}, "strata_bench.report.b": {"strata_bench.timing.a"}}
    assert cycles(edges) == [["strata_bench.report.b", "strata_bench.timing.a"]]
    assert upward(edges) == {("strata_bench.timing.a", "strata_bench.report.b")}
