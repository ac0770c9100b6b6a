"""A module's private names (``_name``) stay in it: what another module imports is a public name of
its module, listed in that module's ``__all__``."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

#: importer -> the private names it still imports (the rubric study's modules, which are moving)
KNOWN: dict[str, set[str]] = {
    "promptlottery/rubrics/asap_task.py": {"_choose", "_pick_levels"},
    "promptlottery/rubrics/infobench_task.py": {"_choose", "_pick_levels", "_rank"},
    "promptlottery/rubrics/strata.py": {"_order_statistic", "_complete", "_undefined_reason"},
    "promptlottery/rubrics/tables.py": {"_answered", "_columns_tau", "_flip", "_mean_shift"},
}


def _module_of(path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = list(path.relative_to(SRC).with_suffix("").parts[: -node.level])
    return ".".join(package + ([node.module] if node.module else []))


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = _module_of(path, node)
            if module.startswith("promptlottery"):
                for alias in node.names:
                    yield module, alias.name


def test_no_module_imports_another_modules_private_name():
    found: dict[str, set[str]] = {}
    for path in sorted((SRC / "promptlottery").rglob("*.py")):
        rel = str(path.relative_to(SRC))
        private = {name for _, name in _imports(path) if name.startswith("_") and not name.startswith("__")}
        if private:
            found[rel] = private
    assert found == KNOWN


#: the modules whose helpers other modules import, held to listing them in ``__all__``
CHECKED = (
    "promptlottery.analysis.budget.simulation",
    "promptlottery.analysis.common.plots",
    "promptlottery.backends.transformers_local",
    "promptlottery.gating.encoding",
    "promptlottery.gating.item_block",
    "promptlottery.metrics._coefficients",
    "promptlottery.metrics.aggregate",
    "promptlottery.metrics.bootstrap",
    "promptlottery.metrics.preference",
    "promptlottery.metrics.sparse",
    "promptlottery.metrics.sparse_plans",
)


def test_what_other_modules_import_from_these_is_in_their_all():
    imported = {
        (module, name)
        for path in sorted((SRC / "promptlottery").rglob("*.py"))
        for module, name in _imports(path)
        if module in CHECKED
    }
    assert {m for m, _ in imported} == set(CHECKED)  # each is imported from somewhere
    missing = sorted(
        f"{m}.{n}"
        for m, n in imported
        if not n.startswith("_") and n not in importlib.import_module(m).__all__
    )
    assert missing == []
