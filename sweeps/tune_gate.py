"""Optuna search for the selective-aggregation gate's classifier.

    python sweeps/tune_gate.py gate.runs='outputs/judge/multiruns/*'            # CPU default budget
    python sweeps/tune_gate.py gate.runs=... gate.tune.n_trials=8 gate.tune.metric=val/balanced_accuracy
    python sweeps/tune_gate.py +gate=paper gate.runs=... \\
        gate.tune.storage=postgresql://user@host/optuna          # the paper: 35 trials x 2 epochs, shared study

Arguments are Hydra overrides of conf/ (``+gate=selective`` is added unless a gate preset is
given); every trial is composed with Hydra's compose API. Writes best_params.json (apply it with
``python -m run +gate=selective gate.best_params=<path>``), best_overrides.txt and the trial table
(trials.csv / trials.md) to ``gate.tune.output_dir``, and logs them to W&B (``logger=none`` to skip).
"""

from __future__ import annotations

import sys
from pathlib import Path

from promptlottery.gating import tune

if __name__ == "__main__":
    tune.CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
    sys.exit(tune.main(sys.argv[1:]))
