"""Every correlation statistic of nlgbench, one engine for the worker, import-scores, report and compare:
correlation methods (`correlation`), levels and quality (`levels`), a cell's summary (`summary`), the
seeded bootstrap (`bootstrap`), significance tests (`significance`) and the speed-up (`speedup`).
Imports only foundations.
"""
