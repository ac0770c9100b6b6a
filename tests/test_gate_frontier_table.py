"""experiments/gate_frontier.py's table (gating/frontier_table.py) from a gate run's results.json."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd

from promptlottery.gating import frontier as fr
from tests.test_gate_frontier import ROWS, block

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("gate_frontier", ROOT / "experiments" / "gate_frontier.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_render_only_writes_the_table_of_a_finished_run(tmp_path, monkeypatch, capsys):
    study = tmp_path / "study"
    for c in ("cfg_a", "cfg_b"):
        (study / c / "0_P1").mkdir(parents=True)
        (study / c / "0_P1" / "judgments.parquet").write_bytes(b"")
        (study / c / "multirun.yaml").write_text("{}\n")
    (study / "cfg_c" / "0_P1").mkdir(parents=True)  # a job that never wrote judgments
    t = fr.frontier(block(ROWS, [3.0, 4.0, 5.0, 2.5]), pd.DataFrame(), {}, n_resamples=50)
    out = tmp_path / "gate"
    out.mkdir()
    rec = {
        "status": "ok",
        "frontier": t.table.to_dict("records"),
        "recommendation": t.recommendation,
        "split": {"train": 8, "validation": 2, "test": 4},
        "summary": {"configs": ["a/cfg"]},
        "transfer_configs": [],
        "frontier_unseen_configs": None,
        "frontier_heldout_group": None,
        "transfer_note": "No judgments of a held-out prompt group (G15) were found.",
    }
    (out / "results.json").write_text(json.dumps(rec, default=float))
    (out / "frontier_wall_s.json").write_text(json.dumps({"wall_s": 42.0, "command": "python -m run X"}))
    monkeypatch.chdir(ROOT)
    assert _script().main(["--runs", f"{study}/*/*", "--out", str(out), "--render-only"]) == 0
    md = (out / "frontier_table.md").read_text()
    assert "2 configuration dir(s) with judgments under the glob (cfg_a, cfg_b)" in md
    assert "python -m run X   # 42 s" in md
    assert "| P1_only |  | 1.00 [1.00, 1.00] | 80% [80%, 80%] | 75% [" in md
    assert "Held-out prompt group (G15): not evaluated. No judgments" in md
    assert "No transfer by configuration" in md and md in capsys.readouterr().out


def test_no_judgments_under_the_glob_is_an_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert _script().main(["--runs", f"{tmp_path}/*/*", "--out", str(tmp_path / "g"), "--render-only"]) == 2
    assert "no judgments.parquet under --runs=" in capsys.readouterr().err


def test_transfer_cells_carry_both_intervals_and_one_training_config_is_explained():
    """The transfer table's calls have their interval as the recovered share does; with a single
    training configuration the block says what the transfer column can and cannot show; every
    gate's MCC is listed per part with its interval and its number of verdicts."""
    from promptlottery.gating.frontier_table import frontier_markdown

    t = fr.frontier(block(ROWS, [3.0, 4.0, 5.0, 2.5]), pd.DataFrame(), {}, n_resamples=50)
    u = fr.frontier(block(ROWS[:2], [3.0, 4.0]), pd.DataFrame(), {}, n_resamples=50, label="unseen")
    rec = {
        "frontier": t.table.to_dict("records"),
        "frontier_unseen_configs": u.table.to_dict("records"),
        "frontier_heldout_group": None,
        "recommendation": t.recommendation,
        "split": {"train": 8, "validation": 2, "test": 4},
        "summary": {"configs": ["a/cfg"]},
        "transfer_configs": ["b/cfg"],
        "classifier_intervals": [
            {
                "part": "test",
                "classifier": "learned_gate",
                "mcc": 0.25,
                "mcc_lo": -0.1,
                "mcc_hi": 0.5,
                "n_rows": 20,
            },
            {
                "part": "test",
                "classifier": "confidence",
                "mcc": 0.0,
                "mcc_lo": 0.0,
                "mcc_hi": 0.0,
                "n_rows": 20,
            },
        ],
    }
    md = frontier_markdown(rec, command="python -m run X", wall_s=1.0, runs=["a", "b"])
    # P1 alone on the two unseen items: 1 call each, P1 in the cluster on item 0 only: 50% recovered
    row = next(ln for ln in md.splitlines() if ln.startswith("| P1_only | 1.00 [1.00, 1.00] / 75% ["))
    assert row.endswith("| 1.00 [1.00, 1.00] / 50% [0%, 100%] |")
    assert "With one configuration for training (a/cfg)" in md and "1 other(s) unseen (b/cfg)" in md
    assert "MCC of learned_gate (cut 0.5): test 0.250 [-0.100, 0.500] (20 verdicts)." in md
    assert "MCC of confidence (cut 0.5): test 0.000 [0.000, 0.000] (20 verdicts)." in md
