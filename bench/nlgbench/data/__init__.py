"""Human-judgment data: the data model (`items`: `Item`, `Dataset`), the catalogue and its sha256-checked download cache
(`catalogue`), the loaders of catalogue datasets and of the user's own files (`loaders`, `userfile`),
their text parsing (`text`), the importers of public releases (`importers`), and a distilled student's record
of its training texts (`training_texts`, written by distillation, read by the leakage guard).
Imports only foundations and statistics.
"""
