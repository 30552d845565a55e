"""Importers (`nlgbench datasets import`): turn a local copy of a public human-judgment release into
nlgbench's own-data JSONL, one module per layout (summeval, wmt_da, table), the output and its summary
in `output`, the command in `command`. Part of the data layer: imports foundations, statistics, data.
"""
