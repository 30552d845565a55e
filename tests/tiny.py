"""Tiny randomly initialised BERT models for testing mechanics (never for correlations)."""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Iterable

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def make_tiny_bert(folder: Path, texts: Iterable[str], num_layers: int = 4, seed: int = 0) -> Path:
    """Save a tiny random BertModel with a WordPiece vocabulary built from `texts` into `folder`."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})
    chars = sorted(set(string.ascii_lowercase + string.digits + string.punctuation))
    vocab = list(dict.fromkeys(SPECIALS + chars + [f"##{c}" for c in chars] + words))
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast.from_pretrained(folder, do_lower_case=True)
    tokenizer.save_pretrained(folder)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=num_layers, num_attention_heads=2,
        intermediate_size=37, max_position_embeddings=512,
    )
    BertModel(config).save_pretrained(folder)
    return folder
