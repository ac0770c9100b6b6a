"""ARCHITECTURE.md and docs/extending.md say what the code does: their lists are checked here.

The stage table against ``STAGES``; the layers against the import contract in pyproject.toml; the
registry table against every ``Registry(...)`` in the source; the claim that a backend is built in
``calls/compose.py`` only; the files a judge mode needs against the modes there are; and every
source path the two documents name against the tree. A document that goes stale fails here.
"""

from __future__ import annotations

import ast
import re

import pytest
import tomllib

from tests.conftest import REPO

SRC = REPO / "src" / "promptlottery"
ARCH = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
EXT = (REPO / "docs" / "extending.md").read_text(encoding="utf-8")


def after(text: str, start: str, end: str) -> str:
    """The part of ``text`` from ``start`` up to the next ``end``."""
    a = text.index(start)
    return text[a : text.index(end, a + len(start))]


def modules() -> dict[str, ast.Module]:
    return {
        p.relative_to(SRC).as_posix(): ast.parse(p.read_text(encoding="utf-8")) for p in SRC.rglob("*.py")
    }


def test_the_stage_table_is_the_stage_registry():
    from promptlottery.stages import STAGES

    part = after(ARCH, "**Stages.**", "Each config group names its stage")
    rows = dict(re.findall(r"^\| `(\w+)` \| `([\w.]+:\w+)` \|$", part, flags=re.M))
    assert rows == dict(STAGES.items())


def _layers_of_contract() -> list[set[str]]:
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = [c["layers"] for c in cfg["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return [{m.strip().removeprefix("promptlottery.") for m in layer.split("|")} for layer in layers]


def test_the_layers_of_both_documents_are_the_import_contract():
    want = _layers_of_contract()
    line = " ".join(after(ARCH, "contracts in `pyproject.toml`):", ", with no exemption").split()[3:])
    assert [{m.strip() for m in layer.split("|")} for layer in line.split(">")] == want
    block = after(EXT, "```\npromptlottery.stages", "```\n\n")
    names = [re.split(r"\s{2,}", ln)[0] for ln in block.splitlines()[1:] if ln and not ln.startswith(" ")]
    assert [{m.strip().removeprefix("promptlottery.") for m in n.split("|")} for n in names] == want


def test_the_registry_table_is_every_registry_in_the_source():
    found = {}
    for path, tree in modules().items():
        for node in ast.walk(tree):
            value = getattr(node, "value", None)
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(value, ast.Call):
                if isinstance(value.func, ast.Name) and value.func.id == "Registry":
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    found.update({t.id: path for t in targets if isinstance(t, ast.Name)})
    table = after(EXT, "| registry | where |", "What stays outside it")
    listed = {}
    for names, where in re.findall(r"^\| (.+?) \| `([\w/.]+)` \|$", table, flags=re.M):
        listed.update({n: where for n in re.findall(r"`([A-Z_]+)`", names)})
    assert listed == found


def test_a_backend_is_built_in_calls_compose_only():
    """Both documents say so; ``hydra.utils.instantiate`` is called in that one module."""
    callers = set()
    for path, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name == "instantiate":
                    callers.add(path)
    assert callers == {"calls/compose.py"}
    assert "one place a backend is built" in ARCH and "No other module calls `instantiate`" in EXT


def test_the_files_a_mode_needs_are_there_for_every_mode_and_counted_right():
    import promptlottery.modes  # noqa: F401 - registers the built-in modes
    from promptlottery.analysis.lottery.sections.registry import SECTIONS
    from promptlottery.modes.registry import MODES

    table = after(EXT, "new mode touches:", "So a new mode is")
    files = re.findall(r"^\| `([^`]+)`( \([^)]*\))? \|", table, flags=re.M)
    src = [f for f, note in files if f.startswith("src/promptlottery/") and f.endswith((".py", "/"))]
    optional = {f for f, note in files if "if the mode names it" in note}
    for name, mode in MODES.items():
        named = [r for r in (*mode.sections, mode.budget_full, mode.budget_sparse, mode.card) if r]
        for f in src:
            path = REPO / f.replace("<mode>", name)
            if "/sections/" in f and mode.label_matrix:
                continue  # a label_matrix mode is read by the lottery analysis: no section of its own
            module = f.replace("<mode>", name).removeprefix("src/").rstrip("/").replace("/", ".")
            if f in optional and not any(r.startswith(module + ".") for r in named):
                continue  # a budget analysis or a card the mode does not name
            assert path.is_file() or path.with_suffix("").is_dir(), (name, f)
        for f in optional:  # what a mode names by path is in its optional folder, where one is listed
            module = f.replace("<mode>", name).removeprefix("src/").rstrip("/").replace("/", ".")
            assert all(
                (REPO / f.replace("<mode>", name)).is_dir() for r in named if r.startswith(module + ".")
            ), (name, f)
        assert mode.label_matrix or any(s.mode == name for s in SECTIONS), name
    always = [f for f, note in files if f in src and not note]
    assert optional and optional <= set(src), "the table lists a mode's budget and card folders"
    n_only_if = len([f for f, note in files if f in src and "only if" in note])
    n_label_matrix = len([f for f in always if "/sections/" not in f])  # no section of its own
    said = re.search(
        r"So a new mode is (\d+) source files \((\d+) with a new `FieldMap` role; (\d+) for a", EXT
    )
    assert said, "extending.md no longer counts a mode's source files"
    assert [int(g) for g in said.groups()] == [len(always), len(always) + n_only_if, n_label_matrix]


#: backticked text that names a source file or folder (relative to src/promptlottery/ or the repo)
PATH = re.compile(r"`((?:[\w.*-]+/)+[\w.*-]*\.py|(?:[\w.*-]+/)+)`")


@pytest.mark.parametrize("doc", ["ARCHITECTURE.md", "docs/extending.md"])
def test_every_source_path_the_documents_name_exists(doc):
    text = (REPO / doc).read_text(encoding="utf-8")
    missing = []
    for path in sorted(set(PATH.findall(text))):
        if "<" in path:
            continue
        roots = (
            SRC,
            REPO,
            REPO / "src",
            SRC / "analysis",
        )  # `sections/...` is named under analysis/ in running text
        if not any(list(root.glob(path.rstrip("/"))) for root in roots):
            missing.append(path)
    assert missing == []
