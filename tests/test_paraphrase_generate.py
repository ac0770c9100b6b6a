"""Generated paraphrases (`+paraphrase=generate`): the four checks, the group it writes, the clear
message when too few candidates pass. The template, the table and the candidates are written here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from promptlottery.data.schema import Item
from promptlottery.prompts.generate import generate_group
from promptlottery.prompts.groups import group_from_template, load_group_file
from promptlottery.prompts.paraphrase_checks import (
    ParaphraseOptions,
    check_same_variables,
    check_scale,
    extreme_items,
    polarity,
)
from promptlottery.prompts.scales import get_scale
from promptlottery.prompts.template_parts import clean
from tests.conftest import MODEL_CACHE, REPO, subprocess_env

TEMPLATE = """\
Rate the helpfulness of the answer to the question on a scale from 1 (useless) to 5 (perfect).

Question: {{ context }}
Answer: {{ response }}

Reply with a single number from 1 to 5.
"""
# the model rewords only the instruction sentence; these are its replies (candidates 0-4)
SOURCE = "Rate the helpfulness of the answer to the question on a scale from 1 (useless) to 5 (perfect)."
GOOD_1 = "Score how helpful the given answer is for the question, where 1 means useless and 5 means perfect."
TAGGED = "Score the answer to {{ context }} from 1 (useless) to 5 (perfect)."
LABEL_LOST = "Judge how useful the reply is for the question asked."
NEAR_COPY = "Please " + SOURCE[0].lower() + SOURCE[1:]
GOOD_2 = "Assess the answer's helpfulness with respect to the question: give 1 if it is useless and 5 if it is perfect."
REPLIES = [GOOD_1, TAGGED, LABEL_LOST, NEAR_COPY, GOOD_2]
NO_CONTEXT = "Judge the answer from 1 to 5.\n\nAnswer: {{ response }}\n\nReply with a number from 1 to 5."
NO_FORMAT = TEMPLATE.replace("Reply with a single number from 1 to 5.", "Respond with a single word.")


def filled(rewording: str) -> str:
    """TEMPLATE with its instruction sentence replaced (what a candidate is)."""
    return TEMPLATE.replace(SOURCE, rewording)


ROWS = [
    {"q": f"question {i}", "a": f"answer {i}", "stars": s} for i, s in enumerate([1, 2, 3, 4, 5, 1, 5, 3])
]


def test_checks_by_hand():
    assert check_same_variables(TEMPLATE, filled(GOOD_1))["passed"]
    bad = check_same_variables(TEMPLATE, NO_CONTEXT)
    assert not bad["passed"] and bad["missing"] == ["context"] and bad["extra"] == []
    assert not check_same_variables(TEMPLATE, "{{ response ")["passed"]  # syntax error
    scale = get_scale("likert_1_5")
    assert check_scale(TEMPLATE, filled(GOOD_2), scale)["passed"]
    lost = check_scale(TEMPLATE, NO_FORMAT, scale)
    # the labels are still named in the instruction, but not in the answer-format line
    assert not lost["passed"] and lost["missing_labels"] == [] and lost["missing_in_format"] == ["1", "5"]
    assert polarity(np.array([1.0, 2, 3, 4]), np.array([2.0, 2, 3, 5]))["passed"]
    inverted = polarity(np.array([1.0, 2, 3, 4]), np.array([4.0, 3, 2, 1]))
    assert not inverted["passed"] and inverted["r"] == -1.0
    assert polarity(np.array([1.0, 2, 3]), np.array([2.0, 2, 2]))["r"] is None
    assert clean("```\nText {{ x }}\n```\n") == "Text {{ x }}"


def test_extreme_items_take_the_lowest_and_highest_labels():
    items = [
        Item(str(i), "t", {"response": "r"}, human={"human": h}) for i, h in enumerate([3, 1, 5, 2, 4, 1])
    ]
    items.append(Item("nolabel", "t", {"response": "r"}))
    assert sorted(it.id for it in extreme_items(items, 4)) == sorted(["1", "5", "2", "4"])
    assert [it.id for it in extreme_items(items, 3)] == ["1", "5", "2"]  # ceil(3/2) lowest, floor highest


def test_generate_group_keeps_only_candidates_passing_all_four_checks(tmp_path):
    tpl = tmp_path / "mine.j2"
    tpl.write_text(TEMPLATE, encoding="utf-8")
    original = group_from_template(tpl, "likert_1_5")
    opts = ParaphraseOptions(
        template=str(tpl), scale="likert_1_5", out="x.yaml", n=2, batch=5, max_candidates=5
    )
    asked = []

    def ask(text, idx):
        asked.append(list(idx))
        return [REPLIES[i] for i in idx]

    def score(group):  # GOOD_2 (candidate 4) anti-correlates with the original on the extreme items
        base = np.array([1.0, 2.0, 4.0, 5.0])
        return {
            vid: (-base if vid == "C4" else base + 0.5) if vid != "P1" else base for vid in group.variants
        }

    passing, rejected, tried = generate_group(original, opts, ask=ask, score=score, encode=_encoder())
    assert asked == [[0, 1, 2, 3, 4]] and tried == 5  # one instruction block: one request per candidate
    assert [c.index for c in passing] == [0] and passing[0].text == filled(GOOD_1)
    why = {c.index: sorted(k for k, v in c.checks.items() if not v["passed"]) for c in rejected}
    assert why == {1: ["polarity", "rewording", "similarity"], 2: ["polarity", "rewording", "similarity"],
                   3: ["polarity", "similarity"], 4: ["polarity"]}  # fmt: skip
    assert "names the scale labels [], the source ['1', '5']" in rejected[1].checks["rewording"]["reason"]
    assert rejected[2].checks["similarity"]["overlap"] > 0.5  # the near copy
    assert rejected[-1].checks["polarity"]["r"] == -1.0


def _encoder():
    from promptlottery.embeddings import encode

    return encode


def _run(tmp_path: Path, *overrides: str, backbone: str = "fake") -> subprocess.CompletedProcess:
    cmd = [
        sys.executable, "-m", "run", "+paraphrase=generate", f"backbone={backbone}", "logger=none",
        f"paths.model_dir={MODEL_CACHE}", f"paths.cache_dir={tmp_path / 'cache'}",
        f"hydra.run.dir={tmp_path / 'run'}", *overrides,
    ]  # fmt: skip
    env = subprocess_env(tmp_path)
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, env=env)


def _inputs(tmp_path: Path) -> list[str]:
    (tmp_path / "mine.j2").write_text(TEMPLATE, encoding="utf-8")
    (tmp_path / "replies.yaml").write_text(yaml.safe_dump(REPLIES), encoding="utf-8")
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return [
        f"paraphrase.template={tmp_path / 'mine.j2'}", "paraphrase.scale=likert_1_5",
        f"dataset.path={tmp_path / 't.jsonl'}", "dataset.fields.context=q", "dataset.fields.response=a",
        "dataset.fields.human=stars", f"+backbone.backend.replies_file={tmp_path / 'replies.yaml'}",
        "paraphrase.batch=5", "paraphrase.max_candidates=5", "paraphrase.polarity_items=6",
    ]  # fmt: skip


def test_paraphrase_command_writes_a_reviewable_group_that_own_judge_runs(tmp_path):
    out = tmp_path / "generated.yaml"
    proc = _run(tmp_path, *_inputs(tmp_path), "paraphrase.n=1", f"paraphrase.out={out}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"paraphrase out={out} kept=1 tried=5" in proc.stdout
    raw = yaml.safe_load(out.read_text())
    assert raw["reviewed"] is False and raw["candidates_tried"] == 5
    assert raw["variants"]["P1"]["user"].strip() == TEMPLATE.strip()
    p2 = raw["variants"]["P2"]
    assert set(p2["checks"]) == {"rewording", "variables", "scale", "similarity", "polarity"}
    assert all(c["passed"] for c in p2["checks"].values()) and len(p2["scores"]["extreme_items"]) == 6
    assert p2["user"] in (filled(GOOD_1), filled(GOOD_2))
    assert {r["candidate"] for r in raw["rejected"]} >= {1, 2, 3}  # the three that fail (a)-(c)
    group = load_group_file(out)
    assert list(group.variants) == ["P1", "P2"] and group.scale.name == "likert_1_5"
    # the generated group goes straight into the own-judge command
    from tests.test_own_judge import own_judge

    fields = ["dataset.fields.context=q", "dataset.fields.response=a", "dataset.fields.human=stars"]
    judged = own_judge(tmp_path, f"dataset.path={tmp_path / 't.jsonl'}", *fields, f"judge.group_file={out}")
    assert judged.returncode == 0, judged.stderr[-3000:]
    assert (tmp_path / "sweep" / "lottery" / "unstable_items.csv").exists()


def test_too_few_passing_candidates_is_a_clear_message(tmp_path):
    out = tmp_path / "generated.yaml"
    proc = _run(tmp_path, *_inputs(tmp_path), "paraphrase.n=3", f"paraphrase.out={out}")
    assert proc.returncode != 0 and not out.exists()
    assert (
        "paraphrase.template=" + str(tmp_path / "mine.j2") + ": only" in proc.stderr
        and "of 5 candidates passed the checks, paraphrase.n=3 needed" in proc.stderr
    )
    rejected = yaml.safe_load((tmp_path / "generated.rejected.yaml").read_text())
    assert rejected["candidates_tried"] == 5 and rejected["reviewed"] is False


def test_unknown_variable_in_the_template_fails_before_generation(tmp_path):
    args = _inputs(tmp_path)
    (tmp_path / "mine.j2").write_text(TEMPLATE.replace("{{ context }}", "{{ query }}"), encoding="utf-8")
    proc = _run(tmp_path, *args, "paraphrase.n=1", f"paraphrase.out={tmp_path / 'g.yaml'}")
    assert proc.returncode != 0 and "unknown template variable(s) ['query']" in proc.stderr
    assert not (tmp_path / "cache" / "calls.sqlite").exists()  # no call was made, not even cached


@pytest.mark.slow
def test_paraphrase_generation_with_a_real_cpu_chat_model(tmp_path):
    out = tmp_path / "generated.yaml"
    args = [a for a in _inputs(tmp_path) if "replies_file" not in a]
    proc = _run(
        tmp_path, *args, "paraphrase.n=1", "paraphrase.batch=4", "paraphrase.max_candidates=4",
        "paraphrase.max_new_tokens=120", "backbone.backend.dtype=float32", f"paraphrase.out={out}",
        backbone="smollm2",
    )  # fmt: skip
    written = out if proc.returncode == 0 else tmp_path / "generated.rejected.yaml"
    assert written.exists(), proc.stderr[-3000:]
    raw = yaml.safe_load(written.read_text())
    assert raw["candidates_tried"] == 4
    cands = [raw["variants"].get("P2")] if proc.returncode == 0 else raw["rejected"]
    assert all(c["user"].strip() for c in cands)  # SmolLM2 wrote text for each candidate
    if proc.returncode != 0:
        assert "candidates passed the checks" in proc.stderr


def test_check_d_reads_a_named_dataset_by_its_one_criterion_or_judge_criterion():
    """`dataset=stsb dataset.options.split=test`: check (d) needs no table; the criterion is the items'
    one human criterion, or `judge.criterion` among several, and a wrong one is named."""
    from omegaconf import OmegaConf

    from promptlottery.prompts.groups import PromptError
    from promptlottery.stages.paraphrase import _criterion

    def item(i, human):
        return Item(id=f"x{i}", dataset="d", inputs={"response": "r"}, human=human)

    one = [item(0, {"similarity": 1.0}), item(1, {"similarity": 4.0})]
    two = [item(0, {"engaging": 1.0, "overall": 2.0})]
    named = OmegaConf.create({"dataset": {"name": "stsb"}, "judge": {"criterion": None}})
    assert _criterion(named, one) == "similarity"
    assert _criterion(OmegaConf.create({"dataset": {"name": "table"}}), one) == "human"
    with pytest.raises(
        PromptError, match=r"human criteria \['engaging', 'overall'\]; name one with judge.criterion"
    ):
        _criterion(named, two)
    chosen = OmegaConf.create({"dataset": {"name": "tc"}, "judge": {"criterion": "overall"}})
    assert _criterion(chosen, two) == "overall"
