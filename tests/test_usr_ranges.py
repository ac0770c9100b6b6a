"""Each USR experiment carries its criterion's own human range (the loader's table, from the USR
data: understandable 0-1, natural and maintains context 1-3, engaging 1-3, overall 1-5), not the
dataset config's 'overall' 1-5: the oracle's label and few-shot examples' labels are mapped from it."""

from pathlib import Path

import pytest

from promptlottery.data.loaders.topical_chat_usr import CRITERIA
from tests.conftest import compose

EXPERIMENTS = sorted(
    p.stem
    for p in (Path(__file__).parents[1] / "conf" / "experiment").glob("[tp]c_usr_*.yaml")
    if "listwise" not in p.stem
)
RANGES = {criterion: [lo, hi] for criterion, lo, hi in CRITERIA.values()}


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_usr_experiment_range_is_its_criterion_range(experiment, tmp_path):
    cfg = compose([f"+experiment={experiment}", "backbone=fake"], tmp_path=tmp_path)
    assert list(cfg.dataset.human_range) == RANGES[cfg.judge.criterion], experiment


def test_engaging_moved_from_one_to_five_to_one_to_three():
    assert len(EXPERIMENTS) == 8 and RANGES["engaging"] == [1.0, 3.0] and RANGES["overall"] == [1.0, 5.0]
