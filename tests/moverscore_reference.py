"""Load the published `moverscore_v2` (PyPI moverscore==1.0.3) with only its environment lines adapted.

Adapted, nothing else: the model and tokenizer (a given local/cached model instead of
DistilBERT from the Hub at import), the device (CPU), `tokenizer.max_len` (removed from
transformers) -> `model_max_length`, tuple model outputs -> hidden states by name, and
`np.float` (removed from NumPy) -> `np.float64`. The scoring functions run as published.
"""

from __future__ import annotations

import importlib.util
import sys
import types


def load_moverscore_v2(model_name: str) -> types.ModuleType:
    spec = importlib.util.find_spec("moverscore_v2")
    if spec is None or spec.origin is None:
        raise ImportError("moverscore_v2 (PyPI moverscore==1.0.3) is not installed")
    source = open(spec.origin, encoding="utf-8").read()
    replacements = [
        ("from transformers import *", "from transformers import AutoModel, AutoTokenizer"),
        ("model_name = 'distilbert-base-uncased'", f"model_name = {model_name!r}"),
        ("device = 'cuda:0'", "device = 'cpu'"),
        (
            "config = DistilBertConfig.from_pretrained(model_name, output_hidden_states=True, output_attentions=True)",
            "",
        ),
        (
            "tokenizer = DistilBertTokenizer.from_pretrained(model_name, do_lower_case=True)",
            "tokenizer = AutoTokenizer.from_pretrained(model_name)",
        ),
        (
            "model = DistilBertModel.from_pretrained(model_name, config=config)",
            "model = AutoModel.from_pretrained(model_name)",
        ),
        ("tokenizer.max_len", "tokenizer.model_max_length"),
        (
            "output, x_encoded_layers, _ = model(input_ids = x, attention_mask = attention_mask)",
            "x_encoded_layers = model(input_ids = x, attention_mask = attention_mask, "
            "output_hidden_states=True).hidden_states",
        ),
        ("np.float)", "np.float64)"),
        ("import matplotlib.pyplot as plt", ""),
    ]
    for old, new in replacements:
        if old not in source:
            raise AssertionError(f"moverscore_v2 source changed: {old!r} not found")
        source = source.replace(old, new)
    module = types.ModuleType("moverscore_v2_adapted")
    module.__file__ = spec.origin
    sys.modules[module.__name__] = module  # so multiprocessing can pickle its functions
    exec(compile(source, spec.origin, "exec"), module.__dict__)
    return module
