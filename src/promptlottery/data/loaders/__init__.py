"""Importing this package registers every loader."""

from promptlottery.data.loaders import (  # noqa: F401
    asap,
    begin_groundedness,
    evouna_qa_eval,
    fed,
    hanna,
    infobench,
    llmbar,
    mt_bench,
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
