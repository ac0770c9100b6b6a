"""``analysis.n_jobs``: configurations analysed in worker processes write the serial run's bytes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from promptlottery.analysis.lottery.options import LotteryOptions
from promptlottery.analysis.stage import run_lottery
from tests.test_analysis_fixtures import config_a, config_b, config_c, fake_encode, judgments, write_sweep


def test_parallel_run_writes_the_serial_bytes(tmp_path):
    # five configurations: Likert and binary, with and without fixed baselines and systems
    df = judgments(config_a("bb1"), config_b("bb1"), config_c("bb2"), config_a("bb3"), config_b("bb2"))
    sweep = write_sweep(tmp_path / "grid", df)
    base = {"runs": str(sweep / "*"), "plots": False, "n_resamples": 40, "n_permutations": 40}
    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    run_lottery(LotteryOptions.from_dict({**base, "n_jobs": 1}), serial, encode=fake_encode)
    run_lottery(LotteryOptions.from_dict({**base, "n_jobs": 2}), parallel, encode=fake_encode)
    files = sorted(p.relative_to(serial) for p in (serial / "tables").iterdir())
    assert files == sorted(p.relative_to(parallel) for p in (parallel / "tables").iterdir())
    assert pd.read_csv(serial / "tables" / "agreement_collapse.csv")["config_id"].nunique() == 5
    for rel in [*files, Path("report.md")]:
        assert (serial / rel).read_bytes() == (parallel / rel).read_bytes(), rel


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_n_jobs_is_checked(bad):
    with pytest.raises(ValueError, match="analysis.n_jobs=.*: must be a positive integer or -1"):
        LotteryOptions.from_dict({"runs": "x", "n_jobs": bad})
