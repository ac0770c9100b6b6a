#!/usr/bin/env bash
# The prompt-lottery CPU grid (issue 6): three configurations (one binary, two Likert) x the two CPU
# backbones x five prompt variants, the fixed-prompt baselines (P1 sampled 5 times, the sample
# index in the cache key, at T = 1e-5 and at T = 0.7), SQuAD v2 for the rank-reversal headline,
# then the analysis (which never calls a judge model).
#
#   bash experiments/lottery_cpu_grid.sh                       # the real grid (smollm2, gemma3_270m)
#   BACKBONES=fake SQUAD=0 LIMIT=16 OUT=/tmp/grid bash experiments/lottery_cpu_grid.sh   # rehearsal
#
# Environment: BACKBONES (comma list, default smollm2,gemma3_270m), LIMIT (dataset.limit for every
# configuration: items, or groups where the dataset config says sample_by: group; default: each
# dataset config's own sample), SQUAD (1 = also the SQuAD v2 experiment: 5 candidate systems answer 20 questions,
# then every judge judges the 100 answers; default 1), OUT (default outputs/lottery_cpu_grid),
# LOGGER (none | wandb, default none), EXTRA (more Hydra overrides for every judging job),
# PY (default .venv/bin/python). Every call is cached: re-running resumes where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
BACKBONES=${BACKBONES:-smollm2,gemma3_270m}
LIMIT=${LIMIT:+dataset.limit=$LIMIT}
SQUAD=${SQUAD:-1}
OUT=${OUT:-outputs/lottery_cpu_grid}
LOGGER=${LOGGER:-none}
EXTRA=${EXTRA:-}

# binary + subjective (6 systems: rank reversals), Likert + objective, Likert + subjective (16 systems)
EXPERIMENTS=(tc_usr_engaging stsb_alignment summeval_coherence)

for exp in "${EXPERIMENTS[@]}"; do
  # 1) the five paraphrases (P1-P5, from the experiment config) on every backbone, T = 1e-5
  # shellcheck disable=SC2086
  $PY -m run -m +experiment="$exp" $LIMIT backbone="$BACKBONES" logger="$LOGGER" $EXTRA \
    hydra.sweep.dir="$OUT/grid/$exp/paraphrases"
  # 2) the fixed-prompt baselines: P1 sampled 5 times at T = 1e-5 and at T = 0.7
  # shellcheck disable=SC2086
  $PY -m run -m +experiment="$exp" $LIMIT backbone="$BACKBONES" logger="$LOGGER" $EXTRA \
    judge.variant=P1 n_samples=5 decoding.temperature=1e-5,0.7 \
    hydra.sweep.dir="$OUT/grid/$exp/fixed"
done

if [ "$SQUAD" = "1" ]; then
  # 3) SQuAD v2: candidate systems answer first (predict stage, cached), then the judges judge them
  # shellcheck disable=SC2086
  $PY -m run -m +experiment=squad_v2 backbone="$BACKBONES" logger="$LOGGER" $EXTRA \
    hydra.sweep.dir="$OUT/grid/squad_v2/paraphrases"
fi

# 4) the analysis over every sweep of the grid: report.md, tables/, figures/ in $OUT/analysis
$PY -m run +analysis=lottery analysis.runs="$OUT/grid/*" logger="$LOGGER" hydra.run.dir="$OUT/analysis"
echo "report: $OUT/analysis/report.md"
