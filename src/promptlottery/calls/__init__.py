"""The call layer every stage shares: the request builder and its cache keys (:mod:`.cache`), the
call loop (:mod:`.loop`), the call stores (SQLite, PostgreSQL) and the one place a stage's backend,
cache and decoding are built (:mod:`.compose`). It sits above the backends and below every package
that asks a model something (judging, prompts, rubrics, gating)."""
