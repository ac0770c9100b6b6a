"""Every bad input of a run or a sweep is one line on stderr, exit status 2, printed once before any
job starts (``stages.preflight``, the ``Preflight`` callback, ``stages.check_composition``); inputs that
were accepted silently are refused or warned about."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from promptlottery.backends.base import Decoding
from promptlottery.backends.fake import FakeBackend
from promptlottery.calls.cache import CallCache
from promptlottery.data.schema import Item
from promptlottery.judging.runner import Condition, judge
from promptlottery.modes.pairwise import PairwiseError, check_pairs
from promptlottery.prompts.groups import PromptError, group_from_template, load_group_file
from tests.conftest import DATA_DIR, REPO, subprocess_env

TABLE = [
    "dataset=table",
    "dataset.path=examples/own_judge/qa_answers.jsonl",
    "dataset.fields.id=id",
    "dataset.fields.context=question",
    "dataset.fields.reference=gold",
    "dataset.fields.response=answer",
    "dataset.fields.human=rating",
    "judge=own",
]
GROUP = "judge.group_file=examples/own_judge/correctness.yaml"
#: the demo's own-judge sweep (5 wordings) on the fake judge
SWEEP = ["-m", "+experiment=own_judge", *TABLE[1:-1], "hydra.sweeper.params.backbone=fake"]
HUMAN = REPO / "tests" / "data" / "human"

# the hostile inputs of the fault suite (make test-faults), all of them in make test too
pytestmark = [pytest.mark.faults, pytest.mark.fault_subset]


def run(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "run",
        "logger=none",
        "backbone=fake",
        f"paths.output_dir={tmp / 'out'}",
        f"paths.cache_dir={tmp / 'cache'}",
        f"paths.data_dir={DATA_DIR}",
        *args,
    ]
    return subprocess.run(cmd, cwd=REPO, env=subprocess_env(tmp), capture_output=True, text=True, timeout=300)


def one_line(proc: subprocess.CompletedProcess, *expected: str) -> str:
    """rc 2, one stderr line starting ``error:`` with each of ``expected`` in it, no traceback, no job run."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


def no_job_started(tmp: Path) -> None:
    """No job directory (and so no job) under the outputs: the sweep stopped before its first job."""
    assert not list((tmp / "out").rglob("results.json")) if (tmp / "out").exists() else True
    assert not list((tmp / "out").rglob(".hydra")) if (tmp / "out").exists() else True


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


# ---------------------------------------------------------------------------------------- item 6


def test_template_syntax_error_is_one_line(tmp_path):
    t = write(tmp_path / "bad.j2", "Rate {{ response }} {% if %}\n")
    proc = run(tmp_path, *TABLE, f"judge.template={t}", "judge.scale=likert_1_5")
    one_line(proc, str(t), "template syntax error at line 1")


def test_sandbox_refusal_in_a_sweep_is_one_line_before_any_job(tmp_path):
    g = yaml_group(
        tmp_path / "g.yaml", {"P1": "Rate {{ response }}.", "P2": "{{ response.__class__.__mro__ }}"}
    )
    proc = run(tmp_path, "-m", *TABLE, f"judge.group_file={g}", "judge.variant=P1,P2")
    one_line(proc, "variant P2", "sandbox refused", "__class__")
    no_job_started(tmp_path)


def test_unknown_scale_is_one_line(tmp_path):
    t = write(tmp_path / "ok.j2", "Rate {{ response }} 1-5.\n")
    one_line(run(tmp_path, *TABLE, f"judge.template={t}", "judge.scale=likert_9"), "unknown scale 'likert_9'")


def test_typod_mode_names_the_mode_not_the_group_file(tmp_path):
    # the own-judge sweep resolves its variants from the group file: a typo'd mode is named first
    proc = run(tmp_path, *SWEEP, "judge.mode=pairwize")
    one_line(proc, "unknown judge.mode 'pairwize' (known: pointwise, pairwise, analytic, listwise)")
    no_job_started(tmp_path)


def test_unknown_variant_in_a_sweep_is_one_line(tmp_path):
    proc = run(tmp_path, "-m", *TABLE, GROUP, "judge.variant=P1,P9")
    one_line(proc, "no variant 'P9'", "P5")
    no_job_started(tmp_path)


def test_a_sweep_over_template_files_names_the_group_file_to_set(tmp_path):
    # each template would be a group of one wording: no lottery; the one line says what to set instead
    a = write(tmp_path / "a.j2", "Rate {{ response }} 1-5.\n")
    b = write(tmp_path / "b.j2", "Score {{ response }} from 1 to 5.\n")
    proc = run(tmp_path, *SWEEP, f"judge.template={a},{b}", "judge.scale=likert_1_5")
    one_line(proc, "judge.group_file=PATH is required", "a sweep over judge.template=A,B")
    no_job_started(tmp_path)


def test_unknown_backend_argument_is_one_line(tmp_path):
    one_line(
        run(tmp_path, *TABLE, GROUP, "+backbone.backend.bogus=1"), "backbone.backend", "'bogus'", "valid:"
    )


@pytest.mark.parametrize("sweep", [False, True])
def test_wrong_type_is_one_line(tmp_path, sweep):
    args = ["-m", "n_samples=1,abc"] if sweep else ["n_samples=abc"]
    one_line(run(tmp_path, *TABLE, GROUP, *args), "n_samples=abc", "could not be converted to Integer")
    no_job_started(tmp_path)


def test_bad_table_in_a_five_wording_sweep_is_printed_once(tmp_path):
    bad = write(
        tmp_path / "t.jsonl", b'{"id": "a", "answer": "x", "rating": 3}\n{"id": "b", "answer": "\xff"}\n'
    )
    proc = run(tmp_path, *SWEEP, GROUP, f"dataset.path={bad}")
    one_line(proc, f"{bad}:2", "not valid utf-8")
    no_job_started(tmp_path)


def test_non_utf8_label_studio_export_is_one_line(tmp_path):
    export = write(tmp_path / "export.json", b'[{"id": 1, "data": {"item_id": "\xe9"}}]')
    proc = run(tmp_path, "+human=import", f"human.campaign={HUMAN}", f"human.export={export}")
    one_line(proc, str(export), "not valid utf-8")


def test_string_annotation_is_one_line(tmp_path):
    tasks = json.loads((HUMAN / "export_a01.json").read_text())
    tasks[0]["annotations"] = "5"
    export = write(tmp_path / "export.json", json.dumps(tasks))
    proc = run(tmp_path, "+human=import", f"human.campaign={HUMAN}", f"human.export={export}")
    one_line(proc, str(export), f"task {tasks[0]['id']}", "'annotations' is not a list")


# ---------------------------------------------------------------------------------------- item 7


def yaml_group(path: Path, variants: dict[str, str], raw: str | None = None) -> Path:
    head = "id: g\njudge_family: answer_correctness\nscale: likert_1_5\nversion: 1\nvariants:\n"
    body = raw or "".join(f"  {k}:\n    user: {json.dumps(v)}\n" for k, v in variants.items())
    return write(path, head + body)


def test_duplicate_yaml_keys_are_refused(tmp_path):
    raw = '  P1:\n    user: "Rate {{ response }}"\n  P2:\n    user: "Score {{ response }}"\n  P1:\n    user: "x"\n'
    with pytest.raises(PromptError, match=r"key 'P1' appears twice \(lines 6 and 10\)"):
        load_group_file(yaml_group(tmp_path / "g.yaml", {}, raw))


def test_keys_1_and_quoted_1_are_refused(tmp_path):
    raw = '  1:\n    user: "Rate {{ response }}"\n  "1":\n    user: "Score {{ response }}"\n'
    with pytest.raises(PromptError, match="key '1' appears twice"):
        load_group_file(yaml_group(tmp_path / "g.yaml", {}, raw))


def test_identical_variants_are_refused(tmp_path):
    g = yaml_group(tmp_path / "g.yaml", {"P1": "Rate {{ response }}.", "P2": "Rate {{ response }}.\n"})
    with pytest.raises(PromptError, match="variants P1 and P2 have the same text"):
        load_group_file(g)


def test_a_template_with_no_variable_is_refused(tmp_path):
    # /etc/passwd given as the template would be one identical prompt for every item
    t = write(tmp_path / "passwd", "root:x:0:0:root:/root:/bin/bash\n")
    proc = run(tmp_path, *TABLE, f"judge.template={t}", "judge.scale=likert_1_5")
    one_line(proc, "uses no item variable", "same prompt")


def test_reversed_human_range_is_refused(tmp_path):
    one_line(
        run(tmp_path, *TABLE, GROUP, "dataset.human_range=[5,1]"), "dataset.human_range=[5.0, 1.0]", "lo < hi"
    )


def _pair(i: str, a: str, b: str) -> Item:
    return Item(
        id=i, dataset="t", inputs={"question": "q", "response_a": a, "response_b": b}, human={"p": 1.0}
    )


def test_identical_pair_answers_are_counted_in_a_warning_or_refused(caplog):
    items = [_pair("p1", "x", "x "), _pair("p2", "x", "y"), _pair("p3", "z", "z")]
    with caplog.at_level(logging.WARNING, logger="promptlottery.modes.pairwise"):
        check_pairs(items, where="table t.jsonl")
    assert "t.jsonl: 2 of 3 pairs have response_a == response_b (first: 'p1')" in caplog.text
    with caplog.at_level(logging.WARNING, logger="promptlottery.judging.pairs"):
        check_pairs(items, where="table t.jsonl")  # the same table again (the next job of a sweep)
    assert caplog.text.count("response_a == response_b") == 1
    with pytest.raises(PairwiseError, match="2 of 3 pairs have response_a == response_b"):
        check_pairs(items, where="table t.jsonl", identical_pairs="refuse")


def test_identical_pairs_are_warned_once_per_sweep(tmp_path):
    pairs = (REPO / "examples" / "own_judge" / "qa_pairs.jsonl").read_text().splitlines()[:4]
    same = '{"id": "same", "question": "Q?", "answer_a": "Yes.", "answer_b": "Yes.", "pref": "tie"}'
    table = write(tmp_path / "pairs.jsonl", "\n".join([*pairs, same]) + "\n")
    fields = ["response_a=answer_a", "response_b=answer_b", "id=id", "question=question", "human=pref"]
    proc = run(
        tmp_path, "-m", "+experiment=own_judge", "hydra.sweeper.params.backbone=fake", "judge.mode=pairwise",
        f"dataset.path={table}", *(f"dataset.fields.{f}" for f in fields), "analysis.plots=false",
        "analysis.embeddings=none", "analysis.n_resamples=50", f"hydra.sweep.dir={tmp_path / 'sweep'}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(list((tmp_path / "sweep").glob("*/judgments.parquet"))) == 5  # G17's five wordings
    said = [line for line in proc.stdout.splitlines() if "response_a == response_b" in line]
    assert len(said) == 1 and "1 of 5 pairs have response_a == response_b (first: 'same')" in said[0], said


def test_identical_pairs_option_is_checked(tmp_path):
    one_line(
        run(tmp_path, *TABLE, GROUP, "judge.identical_pairs=drop"), "judge.identical_pairs='drop'", "refuse"
    )


#: the judge options added last release (judging/sparse_job.py sparse_design, config.py check_config): a bad
#: value, and what its one line must name
NEW_OPTIONS = {
    "design": (["judge.design=bogus"], ["judge.design='bogus': must be one of", "sparse", "adaptive"]),
    "budget_above_1": (["judge.design=sparse", "judge.budget=1.5"], ["judge.budget", "(0, 1]", "1.5"]),
    "budget_negative": (["judge.design=sparse", "judge.budget=-0.1"], ["judge.budget", "(0, 1]", "-0.1"]),
    "anchor": (["judge.design=sparse", "judge.anchor=P9"], ["judge.anchor='P9'", "'P5'"]),
    "full_share": (["judge.design=sparse", "judge.full_share=2"], ["judge.full_share", "[0, 1]", "2.0"]),
    "identical_pairs": (["judge.identical_pairs=maybe"], ["judge.identical_pairs='maybe'", "refuse"]),
}


@pytest.mark.parametrize("case", sorted(NEW_OPTIONS))
def test_a_bad_value_of_the_new_judge_options_in_a_sweep_is_one_line_before_any_job(tmp_path, case):
    overrides, named = NEW_OPTIONS[case]
    one_line(run(tmp_path, *SWEEP, GROUP, *overrides), *named)
    no_job_started(tmp_path)


def test_import_missing_an_annotator_says_its_coverage(tmp_path):
    exports = ",".join(str(HUMAN / f"export_a0{i}.json") for i in (1, 2))
    proc = run(tmp_path, "+human=import", f"human.campaign={HUMAN}", f"human.export=[{exports}]")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "no rating from ['a03']" in proc.stdout + proc.stderr  # a warning, not silence
    (res,) = (tmp_path / "out").rglob("results.json")
    cov = json.loads(res.read_text())["checks"]["coverage"]
    # 6 items x 2 wordings x 3 annotators planned (campaign.json), a03's export left out: 12 never rated
    assert cov["planned"] == 36 and cov["annotators_missing"] == ["a03"]
    assert cov["rated"] + cov["skipped"] + cov["not_done"] == 36 and cov["not_done"] >= 12


def test_an_over_long_item_is_one_failed_item_the_rest_of_its_batch_judged(tmp_path):
    group = group_from_template(write(tmp_path / "t.j2", "Rate {{ response }} from 1 to 5."), "likert_1_5")
    items = [Item(id=f"i{k}", dataset="table", inputs={"response": f"short {k}"}) for k in range(3)]
    items.append(Item(id="long-one", dataset="table", inputs={"response": " ".join(["word"] * 60)}))
    cond = Condition("table", "custom", group.id, "P1", "fake", "human")
    # all four requests fit one batch (max_concurrency 16). The fake counts the words of the chat
    # messages' JSON: '[{"content":' '"Rate' word x60 'from' '1' 'to' '5.",' '"role":' '"user"}]' = 68
    # for the long item (10 for "short 0"); a context of 40 less max_new_tokens 8 leaves 32
    backend = FakeBackend(max_length=40)
    df, stats = judge(
        items, cond, group, backend, CallCache(tmp_path / "c.sqlite"), Decoding(max_new_tokens=8)
    )
    by_id = df.set_index("item_id")
    assert by_id.loc["long-one", "missing_reason"] == "prompt longer than the context: 68 > 32 tokens"
    assert by_id.loc[["long-one"], "score"].isna().all()
    assert by_id.loc[["i0", "i1", "i2"], "score"].notna().all()
    assert backend.calls == 3 and stats.counts() == {
        "total": 4,
        "cache_hits": 0,
        "cache_misses": 3,
        "over_long": 1,
    }


def test_the_fake_refuses_a_request_longer_than_its_context():
    """The hook the test above relies on: without the runner's check, the long item fails its batch."""
    from promptlottery.backends.base import BackendError, JudgeRequest

    req = JudgeRequest(key="k", labels=("1",), messages=[{"role": "user", "content": "a b c d e"}])
    with pytest.raises(BackendError, match="exceeds max_length=3"):
        FakeBackend(max_length=3).generate([req], Decoding())
