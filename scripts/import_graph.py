"""The import graph's counts the layer contracts are about, from grimp (what lint-imports reads).

    PYTHONPATH=src .venv/bin/python scripts/import_graph.py

Prints: arrows up a layer (module imports from a lower layer of pyproject.toml's layers contract to a
higher one, with the exemptions counted as arrows too), the ignored imports the contracts list, the
circles between modules (strongly connected components of more than one module, imports under
``if TYPE_CHECKING:`` left out as the contracts leave them out) with their modules, and the share of
internal imports made inside functions. The dataset loaders' registry (importlib by name) is a
circle the graph cannot see: it is named, not counted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp
import tomllib

REPO = Path(__file__).resolve().parents[1]


def _layers(contracts: list[dict]) -> list[list[str]]:
    spec = next(c for c in contracts if c["type"] == "layers")
    return [[m.strip() for m in layer.split("|")] for layer in spec["layers"]]


def _layer_of(module: str, layers: list[list[str]]) -> int | None:
    for i, layer in enumerate(layers):
        if any(module == m or module.startswith(m + ".") for m in layer):
            return i
    return None


def _indented(module: str, line: int) -> bool:
    base = REPO / "src" / Path(*module.split("."))
    path = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
    text = path.read_text(encoding="utf-8").splitlines()[line - 1]
    return text[:1].isspace()


def _circles(graph, modules: set[str]) -> list[list[str]]:
    """Tarjan's strongly connected components of the module graph (iterative), size > 1."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in modules:
                    continue
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def main() -> int:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts = config["contracts"]
    layers = _layers(contracts)
    graph = grimp.build_graph("promptlottery", exclude_type_checking_imports=True)
    modules = set(graph.modules)
    up, inside, total = [], 0, 0
    for importer in sorted(modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            total += 1
            details = graph.get_import_details(importer=importer, imported=imported)
            inside += any(_indented(importer, d["line_number"]) for d in details)
            a, b = _layer_of(importer, layers), _layer_of(imported, layers)
            if a is not None and b is not None and a > b:
                up.append(f"{importer} -> {imported}")
    ignored = sorted({i for c in contracts for i in c.get("ignore_imports", [])})
    circles = _circles(graph, modules)
    full = grimp.build_graph("promptlottery", exclude_type_checking_imports=False)
    typed_circles = [c for c in _circles(full, set(full.modules)) if c not in circles]
    print(f"modules: {len(modules)}, internal imports (module pairs): {total}")
    print(f"arrows up a layer: {len(up)}")
    for arrow in up:
        print(f"  {arrow}")
    print(f"ignored imports in the contracts: {len(ignored)}")
    for imp in ignored:
        print(f"  {imp}")
    print(
        f"circles between modules: {len(circles)} (+1 the graph cannot see: data.registry imports the loaders by name)"
    )
    for comp in circles:
        print(f"  {' <-> '.join(comp)}")
    print(f"more circles when imports under TYPE_CHECKING count: {len(typed_circles)}")
    for comp in typed_circles:
        print(f"  {' <-> '.join(comp)}")
    print(
        f"module pairs with an import inside a function: {inside} of {total} ({inside / max(total, 1):.0%})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
