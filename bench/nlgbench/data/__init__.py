"""Human-judgment data: the data model (`items`: `Item`, `Dataset`), the catalogue and its sha256-checked download cache
(`catalogue`), the loaders of catalogue datasets and of the user's own files (`loaders`, `userfile`),
their text parsing (`text`), and the importers of public releases (`importers`).
Imports only foundations and statistics.
"""
