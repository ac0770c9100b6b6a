"""The named repeat source (issue 12): repeats of one greedy request that differ by batch composition.

On a deterministic backend the five greedy repeats of the paper's fixed-prompt baseline read the same
label probabilities and agree by construction; the paper's GPU runs differed by batch composition.
``repeat_source=batch`` computes each repeat in its own batches (judging.runner.repeat_plans):

    sample  order                 batch size (backend's B = 4)
    0       by length (default)   4
    1       shuffled, seed 1      4
    2       shuffled, seed 2      2
    3       shuffled, seed 3      1
    4       shuffled, seed 4      4
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from promptlottery.analysis.lottery.analyse import analyse
from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.backends.base import Decoding, JudgeResponse
from promptlottery.backends.fake import FakeBackend
from promptlottery.calls.cache import CallCache
from promptlottery.calls.loop import BatchPlan
from promptlottery.data.schema import Item
from promptlottery.judging.grid import JudgmentGrid
from promptlottery.judging.load import load_judgments
from promptlottery.judging.runner import Condition, build_requests, judge, repeat_plans
from promptlottery.judging.table import add_verdicts, fixed_settings, paraphrase_rows
from promptlottery.prompts import load_group
from tests.test_analysis_fixtures import _row, config_a, judgments

GROUP = load_group("G12")
COND = Condition("d", "semantic_alignment", "G12", "P1", "fake", "similarity")


def _items(n: int) -> list[Item]:
    # prompts of different lengths, so the default plan's length order is visible
    return [
        Item(id=f"i{k}", dataset="d", inputs={"reference": "r" * (k + 1), "prediction": "p"})
        for k in range(n)
    ]


class BatchSizeJudge(FakeBackend):
    """A judge whose answer is the label at the position of its batch size (1 -> "1", 2 -> "2", ...):
    the extreme of a backend whose numbers move with the batch shape. Records every batch."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.batches: list[list[tuple[str, int]]] = []

    def generate(self, requests, decoding):
        self.batches.append([(r.messages[-1]["content"], r.sample_index) for r in requests])
        lab = requests[0].labels[len(requests) - 1]
        return [JudgeResponse(lab, {lab: 0.9}, 1, 1, 0.0) for _ in requests]


def _with_batch_repeats(reps: dict[str, str]) -> pd.DataFrame:
    """Config A's P1-P3 plus P1 repeated with repeat_source=batch: ``{item: labels of samples 0, 1, ...}``."""
    rows = config_a(baselines=False)
    for k, (item, labs) in enumerate(reps.items()):
        for s, lab in enumerate(labs):
            r = _row("stsb", "semantic_alignment", "G12", "likert_1_5", "bb1", "similarity", item, "ABCD"[k],
                     float(k + 1), "P1", lab, sample_index=s)  # fmt: skip
            rows.append({**r, "repeat_source": "batch"})
    return add_verdicts(load_judgments(judgments(rows)))


def test_repeat_plans_follow_the_documented_cycle():
    assert repeat_plans("none", 5, 0, 4) is None
    plans = repeat_plans("batch", 5, 0, 4)
    assert plans == {
        0: BatchPlan("length", 0, 4),
        1: BatchPlan("shuffled", 1, 4),
        2: BatchPlan("shuffled", 2, 2),
        3: BatchPlan("shuffled", 3, 1),
        4: BatchPlan("shuffled", 4, 4),
    }
    assert repeat_plans("batch", 2, 1, 1)[1] == BatchPlan("shuffled", 100004, 1)  # seed 1: 1 * 100003 + 1
    with pytest.raises(ValueError, match="repeat_source must be one of"):
        repeat_plans("dtype", 5, 0, 4)


def test_cache_keys_sample_zero_shared_repeats_keyed_by_their_plan():
    items = _items(2)

    def keys(source, backend=None):
        b = backend or FakeBackend(max_concurrency=4)
        return [
            r.key
            for _, r in build_requests(items, COND, GROUP, b, Decoding(), n_samples=3, repeat_source=source)
        ]

    none, batch = keys("none"), keys("batch")
    # per item: samples 0, 1, 2; sample 0 keeps the ordinary key (shared with the paraphrase grid)
    assert none[0::3] == batch[0::3]
    assert not set(none) & (set(batch) - set(batch[0::3]))
    # the plan's batch size is part of a repeat's key: another B is another computation
    other = keys("batch", FakeBackend(max_concurrency=2))
    assert other[0::3] == batch[0::3] and other[1] != batch[1]


def test_each_repeat_is_computed_in_its_own_batches(tmp_path):
    items = _items(4)
    cache = CallCache(tmp_path / "c.sqlite")
    none, _ = judge(items, COND, GROUP, BatchSizeJudge(max_concurrency=4), cache, Decoding(), n_samples=5)
    # all 20 requests in batches of 4: every repeat says "4", so the repeats agree
    assert set(none["argmax_label"]) == {"4"} and set(none["repeat_source"]) == {"none"}

    backend = BatchSizeJudge(max_concurrency=4)
    df, stats = judge(
        items,
        COND,
        GROUP,
        backend,
        CallCache(tmp_path / "d.sqlite"),
        Decoding(),
        n_samples=5,
        repeat_source="batch",
    )
    # by the table in the module docstring: batch sizes 4, 4, 2, 1, 4
    by_sample = df.groupby("sample_index")["argmax_label"].agg(set).to_dict()
    assert by_sample == {0: {"4"}, 1: {"4"}, 2: {"2"}, 3: {"1"}, 4: {"4"}}
    assert set(df["repeat_source"]) == {"batch"}
    assert df.loc[df["sample_index"] == 3, "batch_plan"].iloc[0] == "shuffled seed 3, batch 1"
    assert df.loc[df["sample_index"] == 0, "batch_plan"].iloc[0] == "length order, batch 4"
    # one sample per batch, 1 + 1 + 2 + 4 + 1 batches; each sample answers every item once
    assert all(len({s for _, s in b}) == 1 for b in backend.batches) and len(backend.batches) == 9
    assert stats.total == 20 and stats.cache_misses == 20
    first = [t for t, _ in backend.batches[0]]
    assert first == sorted(first, key=len)  # sample 0: length order
    # samples 1 and 4 (one full batch each): the same items; shuffled, so not both in length order
    full = [[t for t, _ in b] for b in backend.batches if b[0][1] in (1, 4)]
    assert len(full) == 2 and all(sorted(f) == sorted(first) for f in full) and any(f != first for f in full)


def test_batch_repeats_are_measured_not_by_construction():
    # config A (items i1-i4, P1-P3 at T=1e-5) plus P1 repeated 3 times with repeat_source=batch;
    # the repeats' labels (items x samples):
    #   i1  1 1 1      i2  1 2 1      i3  2 2 2      i4  2 2 2
    # Fleiss, 3 raters: P_i = 1, 1/3, 1, 1 -> P-bar = 10/12; label 1: 5 of 12, label 2: 7 of 12
    # P_e = (25 + 49) / 144 = 37/72 -> kappa = (60/72 - 37/72) / (35/72) = 23/35
    d = _with_batch_repeats({"i1": "111", "i2": "121", "i3": "222", "i4": "222"})
    (f,) = fixed_settings(d)
    assert (f.temperature, f.repeat_source, f.name) == (1e-5, "batch", "fixed T=1e-05 batch")
    # the paraphrase setting keeps P1's ordinary row, not the repeat job's sample 0
    para = paraphrase_rows(d)
    assert len(para) == 12 and set(para.loc[para["variant"] == "P1", "repeat_source"]) == {"none"}
    opts = {"runs": "unused", "n_resamples": 20, "n_permutations": 20, "plots": False, "embeddings": "none"}
    h = analyse(JudgmentGrid.from_frame(d), LotteryOptions.from_dict(opts))["tables"]["headlines"].set_index(
        "key"
    )
    row = h.loc["fixed_kappa_T1e-05_batch"]
    assert row["ours"] == pytest.approx(23 / 35)
    assert "repeat_source=batch" in row["note"] and "by construction" not in row["note"]
    # the weighted score equals the label here: i2's repeats 1, 2, 1 range over 1
    assert "moved by at most 1 between repeats" in row["note"]
    # Cohen per pair of repeats: (s0, s1) agree on 3 of 4, p_o 3/4, marginals s0 1,1,2,2 and s1 1,2,2,2
    # p_e = (2*1 + 2*3) / 16 = 1/2 -> 1/2; (s0, s2) identical -> 1; (s1, s2) = (s0, s1) -> 1/2; mean 2/3
    assert h.loc["fixed_kappa_cohen_T1e-05_batch", "ours"] == pytest.approx(2 / 3)


def test_batch_repeats_that_agree_are_a_measurement_of_1():
    d = _with_batch_repeats({"i1": "111", "i2": "111", "i3": "222", "i4": "222"})
    opts = {"runs": "unused", "n_resamples": 20, "n_permutations": 20, "plots": False, "embeddings": "none"}
    h = analyse(JudgmentGrid.from_frame(d), LotteryOptions.from_dict(opts))["tables"]["headlines"].set_index(
        "key"
    )
    assert h.loc["fixed_kappa_T1e-05_batch", "ours"] == pytest.approx(1.0)
    assert "fixed_kappa_T1e-05" not in h.index  # no ordinary greedy repeats in this table


def test_old_tables_without_the_column_read_as_none():
    d = load_judgments(judgments(config_a()))
    assert set(d["repeat_source"]) == {"none"}
    assert [(f.temperature, f.repeat_source) for f in fixed_settings(add_verdicts(d))] == [
        (1e-5, "none"),
        (0.7, "none"),
    ]
    assert isinstance(pd.Series(d["batch_plan"]).iloc[0], str) and np.all(d["batch_plan"] == "")


def test_the_judging_job_takes_the_option_and_records_it(tmp_path):
    import json

    from promptlottery.stages import run_stage as run
    from tests.conftest import compose

    cfg = compose(
        ["backbone=fake", "dataset.limit=4", "judge.variant=P1", "n_samples=3", "repeat_source=batch"],
        tmp_path=tmp_path,
    )
    run(cfg, tmp_path / "job")
    df = pd.read_parquet(tmp_path / "job" / "judgments.parquet")
    assert set(df["repeat_source"]) == {"batch"} and sorted(df["sample_index"].unique()) == [0, 1, 2]
    assert sorted(df["batch_plan"].unique()) == [
        "length order, batch 16",
        "shuffled seed 1, batch 16",
        "shuffled seed 2, batch 8",
    ]
    assert json.loads((tmp_path / "job" / "results.json").read_text())["config"]["repeat_source"] == "batch"


def test_tables_write_small_values_with_significant_digits(tmp_path):
    from promptlottery.analysis.common.report import write_table

    df = pd.DataFrame(
        {"setting": ["fixed T=1e-05 batch"], "temperature": [1e-5], "cont_range_max": [4.1e-6], "x": [0.5]}
    )
    paths = write_table(df, "t", tmp_path)
    assert paths["csv"].read_text().splitlines()[1] == "fixed T=1e-05 batch,1e-05,4.1e-06,0.5000"
    assert paths["md"].read_text().splitlines()[2] == "| fixed T=1e-05 batch | 1e-05 | 4.1e-06 | 0.500 |"


def test_the_option_at_its_default_keeps_an_older_job_dir_resumable():
    from promptlottery.tracking.jobdir import config_hash

    older = {"task_name": "judge", "n_samples": 5, "judge": {"variant": "P1"}}
    assert config_hash({**older, "repeat_source": "none"}) == config_hash(older)
    assert config_hash({**older, "repeat_source": "batch"}) != config_hash(older)
