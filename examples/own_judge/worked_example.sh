#!/usr/bin/env bash
# From your prompt to the verdict, on a table the project does not ship (JUDGE-BENCH CoLA grammaticality):
# (0) the table and the annotators' prompt, (1) 4 generated paraphrases, (2) the table judged with P1-P5,
# (3) the verdict. See examples/own_judge/README.md.
#   bash examples/own_judge/worked_example.sh                  # Qwen2.5-Coder-1.5B (`make setup-panel`)
#   BACKBONE=fake EXTRA="+backbone.backend.replies_file=examples/own_judge/cola_rewordings.yaml" \
#     bash examples/own_judge/worked_example.sh                # rehearsal: no model, canned rewordings
set -euo pipefail
BACKBONE=${BACKBONE:-qwen25_coder_15b}
N_ITEMS=${N_ITEMS:-20}
OUT=${OUT:-outputs/worked_example}
PY=${PY:-python}
DATA_DIR=${DATA_DIR:-../shared/data}
read -r -a EXTRA_ARGS <<< "${EXTRA:-}"  # more overrides for steps 1 and 2 (paths.*, paraphrase.*, ...)
mkdir -p "$OUT"

# 0. a seeded sample of N_ITEMS CoLA sentences (label 1 = grammatical) and the annotators' prompt
$PY examples/own_judge/judge_bench_to_table.py "$DATA_DIR/judge_bench_dmg_illc/cola/cola.json" grammaticality \
  "$OUT/cola.jsonl" "$OUT/cola.j2" --limit "$N_ITEMS"
TABLE=(dataset.path="$OUT/cola.jsonl" dataset.fields.id=id dataset.fields.response=text
  dataset.fields.human=label "dataset.human_range=[0,1]" logger=none)

# 1. four paraphrases: the model rewords the instruction sentence, the rest is kept; checked ones only
$PY -m run +paraphrase=generate paraphrase.template="$OUT/cola.j2" paraphrase.scale=binary_yes_no \
  paraphrase.n=4 paraphrase.out="$OUT/cola_group.yaml" backbone="$BACKBONE" "${TABLE[@]}" \
  hydra.run.dir="$OUT/paraphrase" "${EXTRA_ARGS[@]}"

# 2. every variant of the group (P1 = your prompt, P2-P5 the paraphrases) on the table, then the analysis
$PY -m run -m +experiment=own_judge judge.group_file="$OUT/cola_group.yaml" backbone="$BACKBONE" \
  "${TABLE[@]}" hydra.sweep.dir="$OUT/sweep" "${EXTRA_ARGS[@]}"

# 3. the headline table and the verdict sentence (report: $OUT/sweep/lottery/report.md)
$PY -m promptlottery.analysis.lottery.verdict "$OUT/sweep/lottery"
