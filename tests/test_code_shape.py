"""The size rules of the code: functions of at most 80 lines, source files of at most 400.

What is over a limit today is listed below with its length, and those lists only shrink: a new long
function or file fails, a listed one that grew past its recorded length fails, and a listed one
back within the limit fails until its line is removed. ``rubrics/`` is held to the same rules.

    PYTHONPATH=src .venv/bin/python tests/test_code_shape.py   # prints what is over each limit
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 400

#: "path:qualified.name" -> lines (def line to last line, decorators left out)
LONG_FUNCTIONS: dict[str, int] = {
    # block_cells and table1 grew with the significance table's row column (the rubric study's known-answer fixes)
    "promptlottery/rubrics/ci.py:block_cells": 125,
    "promptlottery/rubrics/paper_reference.py:_build": 167,
    "promptlottery/rubrics/strata.py:_stratum_cells": 82,
    "promptlottery/rubrics/tables.py:table1": 107,
}

#: path -> lines
LONG_FILES: dict[str, int] = {
    # the ledger's rows are data, one per claim of the two papers, kept in the papers' order
    "promptlottery/ledger.py": 512,
    "promptlottery/rubrics/strata.py": 448,
    "promptlottery/rubrics/tables.py": 491,
}


def _functions(tree: ast.AST, prefix: str = ""):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                yield name, node.end_lineno - node.lineno + 1
            yield from _functions(node, f"{name}.")
        else:
            yield from _functions(node, prefix)


def long_functions(src: Path = SRC) -> dict[str, int]:
    """Every function (methods and nested ones by their dotted names) over the limit."""
    found = {}
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        for name, n in _functions(ast.parse(path.read_text(encoding="utf-8"))):
            if n > MAX_FUNCTION_LINES:
                found[f"{rel}:{name}"] = n
    return found


def long_files(src: Path = SRC) -> dict[str, int]:
    found = {}
    for path in sorted(src.rglob("*.py")):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_FILE_LINES:
            found[path.relative_to(src).as_posix()] = n
    return found


def _ratchet(found: dict[str, int], allowed: dict[str, int], limit: int, what: str) -> list[str]:
    bad = [f"{k}: {n} lines, over {limit} (a new long {what})" for k, n in found.items() if k not in allowed]
    bad += [
        f"{k}: {found[k]} lines, grew past its listed {n}" for k, n in allowed.items() if found.get(k, 0) > n
    ]
    bad += [f"{k}: within {limit} lines now, remove it from the list" for k in allowed if k not in found]
    return bad


def test_functions_are_at_most_80_lines_but_the_listed_ones():
    assert _ratchet(long_functions(), LONG_FUNCTIONS, MAX_FUNCTION_LINES, "function") == []


def test_files_are_at_most_400_lines_but_the_listed_ones():
    assert _ratchet(long_files(), LONG_FILES, MAX_FILE_LINES, "file") == []


def test_the_checker_finds_a_long_nested_function(tmp_path):
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "m.py").write_text(f"class C:\n    def f(self):\n{body}\n\n\ndef g():\n    return 1\n")
    assert long_functions(tmp_path) == {"m.py:C.f": MAX_FUNCTION_LINES + 1}
    assert _ratchet({"a": 90}, {"a": 85, "b": 99}, 80, "function") == [
        "a: 90 lines, grew past its listed 85",
        "b: within 80 lines now, remove it from the list",
    ]


if __name__ == "__main__":
    for key, n in sorted({**long_functions(), **long_files()}.items(), key=lambda kv: -kv[1]):
        print(f"{n:5d}  {key}")
    sys.exit(0)
