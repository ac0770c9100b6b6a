"""Careless and hostile input, round two (issue 46): each item of the issue end to end, as the user met
it (a ``python -m run`` subprocess, the fake judge, a stub server on 127.0.0.1 only). Every test is a
row of the fault suite (``scripts/fault_suite.py``: ``ROUND_TWO`` names the row)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO
from tests.test_user_errors import SWEEP, TABLE, no_job_started, one_line, run, write, yaml_group

pytestmark = [pytest.mark.faults, pytest.mark.fault_subset]

PAIRS = [
    "dataset=table",
    "dataset.path=examples/own_judge/qa_pairs.jsonl",
    "dataset.fields.id=id",
    "dataset.fields.question=question",
    "dataset.fields.response_a=answer_a",
    "dataset.fields.response_b=answer_b",
    "dataset.fields.human=pref",
    "judge=own",
    "judge.mode=pairwise",
]
GROUP = "judge.group_file=examples/own_judge/correctness.yaml"


def judgments(tmp: Path) -> pd.DataFrame:
    files = sorted((tmp / "out").rglob("judgments.parquet"))
    assert files, "no judgments written"
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


# ------------------------------------------------------------------- item 1: text verdicts


def test_a_prose_judge_gives_exactly_its_chosen_labels_pointwise(tmp_path):
    """The hash judge chooses a label per request; in prose (no logprobs: it restates the scale,
    echoes the task's last line, numbers its points, then answers) its parsed labels are exactly the
    labels it chose, which the same judge without prose gives as its argmax."""
    plain, prose = tmp_path / "plain", tmp_path / "prose"
    for where, extra in ((plain, []), (prose, ["backbone.backend.prose=true"])):
        proc = run(where, *TABLE, GROUP, *extra)
        assert proc.returncode == 0, proc.stderr[-2000:]
    a, b = judgments(plain).set_index("item_id"), judgments(prose).set_index("item_id")
    assert len(a) == len(b) == 24
    assert b["label_probs"].isna().all() and (b["scoring_mode"] == "parsed_label").all()
    assert b["parsed_label"].notna().all()
    assert (b.loc[a.index, "parsed_label"] == a["argmax_label"]).all()
    # the old reader took the restated scale's first number: every verdict read as 1
    assert b["raw_output"].str.contains("from 1 to 5").all() and set(a["argmax_label"]) != {"1"}


def test_a_prose_judge_gives_exactly_its_chosen_labels_pairwise(tmp_path):
    """The oracle in prose over the shipped pairs, both orders: each verdict, in the pair's terms,
    is the human preference (the restated format names [[A]], [[B]] and [[C]] first)."""
    proc = run(tmp_path, *PAIRS, "backbone.backend.behaviour=oracle", "backbone.backend.prose=true")
    assert proc.returncode == 0, proc.stderr[-2000:]
    df = judgments(tmp_path)
    assert len(df) == 48 and df["label_probs"].isna().all()
    assert (df["preferred_parsed"] == df["human_preferred"]).all()
    assert (df["preferred"] == df["human_preferred"]).all()


# ------------------------------------------------- item 2: everything checkable, before the first call

BAD_TEMPLATES = {
    "include": ("{% include 'other.j2' %} {{ response }}", "{% include %} reads another template"),
    "import": ("{% import 'm.j2' as m %}{{ response }}", "{% import %} reads another template"),
    "recursive_macro": ("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }} {{ response }}", "recursed without end"),
    "sandbox_range": ("{% for i in range(10**9) %}x{% endfor %}{{ response }}", "Range too big"),
    "nested_loops": (
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}{{ response }}",
        "it ran more than 2 s",
    ),
    "huge_output": ("{{ response * 100000000 }}", "'*' would make"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_TEMPLATES))
def test_a_template_that_cannot_render_stops_the_sweep_in_one_line_before_any_job(tmp_path, case):
    """P1 renders, P2 does not: one line naming the file and P2, and no job (P1 is not judged)."""
    template, why = BAD_TEMPLATES[case]
    g = yaml_group(tmp_path / "g.yaml", {"P1": "Rate {{ response }}.", "P2": template})
    proc = run(tmp_path, "-m", *TABLE, f"judge.group_file={g}", "judge.variant=P1,P2")
    one_line(proc, str(g), "variant P2", why)
    no_job_started(tmp_path)


def test_a_user_template_that_is_not_a_string_names_the_file_and_variant(tmp_path):
    raw = '  P1:\n    user: "Rate {{ response }}"\n  P2:\n    user:\n      - Rate\n      - "{{ response }}"\n'
    g = yaml_group(tmp_path / "g.yaml", {}, raw)
    proc = run(tmp_path, "-m", *TABLE, f"judge.group_file={g}", "judge.variant=P1,P2")
    one_line(proc, str(g), "variant P2", "`user:` must be a string", "got list")
    no_job_started(tmp_path)


def _read_only_dir(tmp_path: Path) -> Path:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounts a read-only tmpfs: needs root")
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    return ro


@pytest.mark.parametrize("where", ["link", "under_a_link", "tests", "conf", "read_only"])
def test_an_output_dir_that_is_a_link_in_the_source_tree_or_read_only_is_one_line(tmp_path, where):
    real = tmp_path / "real"
    real.mkdir()
    if where == "link":
        out = tmp_path / "outlink"
        out.symlink_to(real)
    elif where == "under_a_link":
        (tmp_path / "parent").symlink_to(real)
        out = tmp_path / "parent" / "out"
    elif where in ("tests", "conf"):
        out = REPO / where / f"planted_{os.getpid()}"
    else:
        out = _read_only_dir(tmp_path) / "out"
    try:
        proc = run(tmp_path, "-m", *TABLE, GROUP, "judge.variant=P1,P2", f"paths.output_dir={out}")
        expected = {"link": "is a symbolic link", "under_a_link": "is a symbolic link", "tests": "inside the source tree",
                    "conf": "inside the source tree", "read_only": "read-only file system"}[where]  # fmt: skip
        one_line(proc, "paths.output_dir", expected)
        assert not any(real.iterdir()) and not (where in ("tests", "conf") and out.exists())
    finally:
        if where == "read_only":
            subprocess.run(["umount", "-l", str(tmp_path / "ro")])


# ------------------------------------------------------ item 3: the analysis options of a sweep


@pytest.mark.parametrize(
    "option, expected",
    [("+analysis.n_resample=7", "unknown analysis option(s) ['n_resample']"),
     ("analysis.n_resamples=0", "analysis.n_resamples=0: must be an integer >= 1")],
)  # fmt: skip
def test_analysis_options_of_a_judging_sweep_are_checked_before_any_call(tmp_path, option, expected):
    proc = run(tmp_path, *SWEEP, GROUP, option)
    one_line(proc, expected)
    no_job_started(tmp_path)


# --------------------------------------------------------------- item 8: input text


def test_a_lone_surrogate_in_the_table_is_one_line_before_any_job(tmp_path):
    row = '{{"id": "{}", "question": "Capital of France?", "gold": "Paris", "answer": "{}", "rating": 3}}\n'
    table = write(tmp_path / "t.jsonl", row.format("a", "Paris") + row.format("b", "bad \\ud800 text"))
    args = [a for a in SWEEP if not a.startswith("dataset.path=")] + [f"dataset.path={table}", GROUP]
    proc = run(tmp_path, *args)
    one_line(proc, str(table), "item 'b' field response", "lone surrogate")
    no_job_started(tmp_path)
