"""The sections of the lottery report (:mod:`.base`: what a section declares; :mod:`.registry`:
the sections in report order): the lottery's analyses 1-8 (:mod:`.lottery`), the pairwise judges
(:mod:`.pairwise`) and the human baseline (:mod:`.human`)."""
