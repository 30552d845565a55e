"""Encoders: the models metrics run. `registry` (encoders.yaml, `EncoderRef`, a name resolved once into
a `ResolvedEncoder`), `hfcache` (local model folders and the Hugging Face cache), `runtime` (the loaded
tokenizer + model of the token-level metrics), `models` (whole models with their heads), `variants`
(early exit, int8, dtype). Layer: above data; imports foundations, statistics and data.
"""
