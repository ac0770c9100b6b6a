"""Importing this package registers every loader."""

from promptlottery.data.loaders import (  # noqa: F401
    asap,
    autoj_pairwise,
    begin_groundedness,
    evouna_qa_eval,
    fed,
    hanna,
    infobench,
    llmbar,
    mt_bench,
    mt_bench_pairs,
    newsroom,
    pandalm,
    qa_eval_nq301,
    qags,
    squad_v2,
    stsb,
    summeval,
    table,
    topical_chat_usr,
    unieval_data2text,
)
