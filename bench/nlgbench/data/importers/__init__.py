"""Importers (`nlgbench datasets import`): turn a local copy of a public human-judgment release into
nlgbench's own-data JSONL, one module per layout (summeval, wmt_da, table), the output and its summary
in `output`; the command's argparse and run live in nlgbench.cli. Part of the data layer: imports
foundations, statistics, data.
"""

FORMATS = ("summeval", "wmt-da", "table")  # `nlgbench datasets import FORMAT`: one module each
