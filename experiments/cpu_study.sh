#!/usr/bin/env bash
# The CPU study (issue 15; sizes of issue 34): the four-backbone CPU judge panel (SmolLM2-135M, gemma-3-270m base,
# Qwen2.5-Coder-0.5B and -1.5B Instruct) x the five prompt variants P1-P5 on one configuration of each
# judge family, plus the configurations with systems for the rank rows, the fixed-prompt baseline, and
# the analysis (which never calls a judge model):
#
#   family / purpose                 experiment            sample (default: >= 100 items a configuration)
#   Likert, objective                stsb_alignment        STSB=100 pairs
#   binary, subjective               tc_usr_engaging       TC=100 responses
#   binary, objective + ranks        squad_v2              SQUAD=20 questions x 5 candidate systems
#   Likert, subjective + ranks       summeval_coherence    SUMMEVAL=7 articles x 16 systems (RANK_BACKBONES)
#   Likert 1-10, subjective + ranks  mt_bench_quality      MTBENCH=17 questions x 6 models (RANK_BACKBONES)
#   fixed-prompt baseline            stsb_alignment P1 sampled 5 times at T = 0.7 (FIXED_BACKBONES=qwen25_coder_05b)
#                                    and repeated 5 times at T = 1e-5, each repeat in its own batch composition
#                                    (repeat_source=batch, GREEDY_BACKBONES=qwen25_coder_05b and the 1.5B)
#
#   make setup-panel && bash experiments/cpu_study.sh            # the study (wall time: experiments/README.md)
#   STSB=24 TC=12 SQUAD=4 SUMMEVAL=1 MTBENCH=1 bash experiments/cpu_study.sh     # the first look (2026-12-01 sizes)
#   BACKBONES=fake OUT=/tmp/study STSB=24 TC=12 SQUAD=4 SUMMEVAL=1 MTBENCH=1 bash experiments/cpu_study.sh  # rehearsal
#
# Each backbone runs as its own multirun into $OUT/grid/<experiment>/<kind>_<backbone> (kind: paraphrases,
# fixed_t07, fixed_greedy_batch). Where /proc/cpuinfo lists amx_bf16 the 1.5B is the fast OpenVINO bf16 judge
# and the 0.5B runs in torch bfloat16 (Q05_EXTRA): both are other judges than the float32 ones, and the
# report names each backbone's dtype. Cost grows linearly with every size above (and with the number of
# backbones). Every call is cached: re-running resumes where it stopped. Environment: the sizes above,
# BACKBONES (comma list, default the panel), OUT (default outputs/cpu_study), LOGGER (none | wandb, default
# none), FIXED_BACKBONES and GREEDY_BACKBONES (the backbones of the sampled and the greedy fixed-prompt
# baselines), RANK_BACKBONES and MT_SYSTEMS (the two rank configurations), Q05_EXTRA (Hydra overrides of the
# 0.5B's jobs), EXTRA (more Hydra overrides for every judging job), PY (default .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
GIVEN=${BACKBONES:-}  # a BACKBONES given (e.g. fake for the rehearsal) is the default of every *_BACKBONES below
# the 1.5B judge: the fast OpenVINO bf16 one where the CPU has AMX, the float32 one elsewhere (bf16 without AMX
# measured slower than float32: docs/benchmarks.md); QWEN15=... picks one by hand
QWEN15=${QWEN15:-$($PY -c "from promptlottery.backends.transformers_local import fast_judge_backbone as f; print(f())")}
echo "cpu_study: the 1.5B judge is backbone=$QWEN15"
BACKBONES=${BACKBONES:-smollm2,gemma3_270m,qwen25_coder_05b,$QWEN15}
STSB=${STSB:-100}
TC=${TC:-100}
SQUAD=${SQUAD:-20}
SUMMEVAL=${SUMMEVAL:-7}
MTBENCH=${MTBENCH:-17}
# the 0.5B in torch bfloat16 where the fast 1.5B is chosen (fast_judge_backbone's AMX rule), float32 elsewhere
Q05_EXTRA=${Q05_EXTRA-$([ "$QWEN15" = qwen25_coder_15b_fast ] && echo backbone.backend.dtype=bfloat16 || true)}
OUT=${OUT:-outputs/cpu_study}
LOGGER=${LOGGER:-none}
EXTRA=${EXTRA:-}
FIXED_BACKBONES=${FIXED_BACKBONES:-${GIVEN:-qwen25_coder_05b}}
GREEDY_BACKBONES=${GREEDY_BACKBONES:-${GIVEN:-qwen25_coder_05b,$QWEN15}}
# gemma-3-270m base reads three solved examples before each item: with a full article or an MT-Bench
# answer that is 3,000+ tokens an item, so it sits out the two rank configurations
RANK_BACKBONES=${RANK_BACKBONES:-${GIVEN:-smollm2,qwen25_coder_05b,$QWEN15}}
MT_SYSTEMS=${MT_SYSTEMS:-[alpaca-13b,claude-v1,gpt-3.5-turbo,gpt-4,llama-13b,vicuna-13b-v1.3]}
start=$(date +%s)

sweep() {  # sweep <experiment>/<kind> <hydra overrides...>: a multirun per backbone into $OUT/grid/<experiment>/<kind>_<backbone>
  local name=$1; shift
  local b
  for b in ${BACKBONES//,/ }; do
    local own=""
    [ "$b" = qwen25_coder_05b ] && own=$Q05_EXTRA
    echo "== ${name}_$b ($(( $(date +%s) - start )) s)"
    # shellcheck disable=SC2086
    $PY -m run -m backbone="$b" $own logger="$LOGGER" "$@" $EXTRA hydra.sweep.dir="$OUT/grid/${name}_$b"
  done
}

sweep stsb_alignment/paraphrases +experiment=stsb_alignment dataset.limit="$STSB"
sweep tc_usr_engaging/paraphrases +experiment=tc_usr_engaging dataset.limit="$TC"
sweep squad_v2/paraphrases +experiment=squad_v2 predict.limit="$SQUAD"
BACKBONES=$RANK_BACKBONES sweep summeval_coherence/paraphrases +experiment=summeval_coherence dataset.limit="$SUMMEVAL"
BACKBONES=$RANK_BACKBONES sweep mt_bench_quality/paraphrases +experiment=mt_bench_quality dataset.limit="$MTBENCH" \
  "dataset.options.systems=$MT_SYSTEMS"
BACKBONES=$FIXED_BACKBONES sweep stsb_alignment/fixed_t07 +experiment=stsb_alignment dataset.limit="$STSB" \
  judge.variant=P1 n_samples=5 decoding.temperature=0.7
# greedy repeats agree by construction on a deterministic backend: repeat_source=batch makes them differ
# as the paper's GPU runs did (batch composition), see README "The fixed-prompt baseline's repeats"
BACKBONES=$GREEDY_BACKBONES sweep stsb_alignment/fixed_greedy_batch +experiment=stsb_alignment dataset.limit="$STSB" \
  judge.variant=P1 n_samples=5 repeat_source=batch

echo "== judging done ($(( $(date +%s) - start )) s); analysis"
$PY -m run +analysis=lottery analysis.runs="$OUT/grid/*/*" logger="$LOGGER" hydra.run.dir="$OUT/analysis"
echo "study wall time: $(( $(date +%s) - start )) s; report: $OUT/analysis/report.md"
