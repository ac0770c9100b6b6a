"""The lottery report's "Listwise judges" section (:mod:`.section`), its measures (:mod:`.measures`)."""
