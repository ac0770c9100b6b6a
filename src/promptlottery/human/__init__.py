"""The human baseline under rewording: annotation campaigns (Label Studio), rating import, and the
human-versus-judge agreement degradation (the prompt-lottery paper's §3.2 user study and Abstract).

* :mod:`.assignment` -- who rates which (item, wording) task, in what order (the paper's constraints)
* :mod:`.campaign`, :mod:`.labelstudio` -- the campaign's files and Label Studio projects (SDK lazily)
* :mod:`.ratings` -- a Label Studio export or a plain table -> ``human_ratings.parquet``
* :mod:`.agreement`, :mod:`.analysis`, :mod:`.per_rater` -- the measures (pure functions)
* :mod:`.report` -- the report section; :mod:`.stage` -- the ``human_*`` stages
"""
