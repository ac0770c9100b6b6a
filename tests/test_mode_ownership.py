"""No source file outside a judge mode's own files names a mode or its order vocabulary (issue 48).

A mode's own files (docs/extending.md, "A new judge mode"; ARCHITECTURE.md): ``modes/<name>.py`` (or a
package ``modes/<name>/``) and every folder named ``<name>`` under ``analysis/`` (its report section
``analysis/lottery/sections/<name>/``, its budget analyses ``analysis/budget/<name>/``, its judge card
``analysis/card/<name>/``, the readers its analyses share ``analysis/common/<name>/``). Everywhere else
the code asks the mode (``get_mode``, ``MODES``, the mode's declared members) and never writes a mode's
name or one of its order labels as a string, nor imports a mode's module; ``modes/__init__.py`` alone
imports the built-in modes' modules (their one registration line each). A mode's own files may import
their own mode's module, never another's, and name no other mode.

The scan reads string constants (an f-string's literal parts too) and imports with the AST, so a
comment or a docstring that mentions a mode in prose is not flagged, nor is a word that contains a
mode's name (``"pairwise_abc"``, ``"budget_pairwise"``): only a string equal to a name or a label.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

SRC = REPO / "src" / "promptlottery"

#: (file, string) pairs that name a mode although the file is no mode's, each for a reason
ALLOWED = {
    ("rubrics/prompts.py", "analytic"): "the rubric kind ANALYTIC (one score per criterion, the rubric "
    "study's word), not the judge mode of the same name; every other rubric module reads the constant",
}
#: the one file that imports the built-in modes' modules: their registration lines
REGISTRATION = "modes/__init__.py"


def _modes():
    from promptlottery.modes import MODES

    return dict(MODES.items())


def owner(rel: str, names) -> str | None:
    """The mode whose own file ``rel`` (relative to src/promptlottery/) is, else None."""
    parts = rel.split("/")
    if parts[0] == "modes" and len(parts) >= 2:
        stem = parts[1].removesuffix(".py")
        return stem if stem in names else None
    if parts[0] == "analysis":
        found = [p for p in parts[1:-1] if p in names]
        return found[0] if found else None
    return None


def _imported(node, rel: str) -> list[str]:
    """The modules an import statement reads (``from a import b``: ``a`` and ``a.b``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:  # relative: resolved against the file's package
        pkg = ["promptlottery", *rel.removesuffix(".py").split("/")][: -node.level]
        base = ".".join(pkg + ([base] if base else []))
    return [base, *(f"{base}.{a.name}" for a in node.names)]


def findings(src: Path, modes: dict) -> list[tuple[str, int, str]]:
    """``(file, line, what)`` for every mode name, order label or mode import outside its owner."""
    names = set(modes)
    labels = {o: n for n, m in modes.items() for o in m.orders}
    out = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        mine = owner(rel, names)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                named = node.value if node.value in names else labels.get(node.value)
                if named is not None and named != mine and (rel, node.value) not in ALLOWED:
                    out.append((rel, node.lineno, repr(node.value)))
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                read = {m.split(".")[2] for m in _imported(node, rel) if m.startswith("promptlottery.modes.")}
                for other in sorted(read & names - {mine}):
                    if rel != REGISTRATION:
                        out.append((rel, node.lineno, f"import promptlottery.modes.{other}"))
    return out


def test_no_file_outside_a_modes_own_names_a_mode_or_its_orders():
    found = findings(SRC, _modes())
    assert found == [], "\n".join(f"{f}:{n}: {w}" for f, n, w in found)


def test_every_allowed_entry_is_still_needed():
    """An allow-list entry whose file no longer holds its string goes (the list only shrinks)."""
    for rel, value in ALLOWED:
        tree = ast.parse((SRC / rel).read_text(encoding="utf-8"))
        assert any(isinstance(n, ast.Constant) and n.value == value for n in ast.walk(tree)), (rel, value)


def test_what_a_mode_names_by_path_lies_in_its_own_files():
    """The sections, budget analyses and card a mode names are modules of its own folders (or, for
    a label-matrix mode, none at all)."""
    names = set(_modes())
    for name, mode in _modes().items():
        refs = [*mode.sections, mode.budget_full, mode.budget_sparse, mode.card]
        for ref in (r for r in refs if r):
            rel = ref.partition(":")[0].removeprefix("promptlottery.").replace(".", "/") + ".py"
            assert owner(rel, names) == name, (name, ref)


@pytest.mark.parametrize(
    ("rel", "source", "flagged"),
    [
        ("judging/x.py", 'ORDERS = ("12", "21")', ["'12'", "'21'"]),
        ("analysis/card/x.py", 'if card["judge_mode"] == "pairwise": pass', ["'pairwise'"]),
        ("analysis/card/x.py", 'x = f"{a} pairwise judges"; y = "pairwise_abc"', []),
        (
            "config.py",
            "from promptlottery.modes.pairwise import ORDERS",
            ["import promptlottery.modes.pairwise"],
        ),
        ("config.py", "from promptlottery.modes import pairwise", ["import promptlottery.modes.pairwise"]),
        ("analysis/budget/pairwise/x.py", 'from promptlottery.modes.pairwise import ORDERS; o = "12"', []),
        ("analysis/budget/pairwise/x.py", 'm = "listwise"', ["'listwise'"]),
        (
            "modes/listwise.py",
            "from promptlottery.modes.pairwise import ORDERS",
            ["import promptlottery.modes.pairwise"],
        ),
        ("modes/__init__.py", "from promptlottery.modes import listwise", []),
    ],
)
def test_the_scan_flags_what_it_should(tmp_path, rel, source, flagged):
    """The scan on toy files: a name, a label and a mode's import are flagged outside their owner."""
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source + "\n", encoding="utf-8")
    assert [w for _, _, w in findings(tmp_path, _modes())] == flagged


def test_the_card_the_schema_and_the_job_hash_ask_the_mode():
    """The judge card of a mode's rows is the one it names (the label matrix's by default; none: one
    line); the run schema's ``judge`` fields and the job hash's neutral defaults hold every mode's own
    options, in the place results.json has always had them (before ``controls``)."""
    import dataclasses

    from promptlottery.analysis.card.kind import MatrixCard, card_kind
    from promptlottery.config import JudgeConfig
    from promptlottery.judging.table import AnalysisError
    from promptlottery.tracking.jobdir import config_hash, neutral_nested

    assert isinstance(card_kind("pointwise"), MatrixCard) and isinstance(card_kind("analytic"), MatrixCard)
    assert card_kind("pairwise").key == ("variant", "item_id", "order")
    with pytest.raises(AnalysisError, match=r"^judge.mode=listwise has no judge card"):
        card_kind("listwise")
    own = {n: d for m in _modes().values() for n, d in m.options.items()}
    assert own == {"identical_pairs": "warn"}
    names = [f.name for f in dataclasses.fields(JudgeConfig)]
    assert names[-2:] == ["identical_pairs", "controls"] and "position_swap" in names
    assert neutral_nested()["judge"]["identical_pairs"] == "warn"
    job = {"judge": {"mode": "pairwise", "variant": "P1"}}
    assert config_hash({"judge": {**job["judge"], "identical_pairs": "warn"}}) == config_hash(job)
    assert config_hash({"judge": {**job["judge"], "identical_pairs": "refuse"}}) != config_hash(job)
