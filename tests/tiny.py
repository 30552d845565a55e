"""Tiny randomly initialised BERT models for testing mechanics (never for correlations)."""

from __future__ import annotations

import json
import os
import re
import shutil
import string
from collections.abc import Iterable
from pathlib import Path

import numpy as np

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


# Eight short English texts: the data of the tests' tiny sweeps (written to a user data file).
TEXTS = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "it is raining today",
    "the sun is shining",
    "birds sing in the morning",
    "we went to the market",
    "she reads a book",
    "he plays the piano",
]


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
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=num_layers,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=512,
    )
    BertModel(config).save_pretrained(folder)
    return folder


def _byte_bpe(folder: Path, texts: Iterable[str], vocab_size: int = 400) -> tuple[Path, Path]:
    """A small byte-level BPE (the GPT-2 / BART tokenizer type) trained on `texts`."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        list(texts),
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        show_progress=False,
    )
    bpe.save_model(str(folder))
    return folder / "vocab.json", folder / "merges.txt"


def make_tiny_bart(folder: Path, texts: Iterable[str], seed: int = 0) -> Path:
    """Save a tiny random BartForConditionalGeneration with a byte-level BPE tokenizer into `folder`."""
    import torch
    from transformers import BartConfig, BartForConditionalGeneration, BartTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab, merges = _byte_bpe(folder, texts)
    tokenizer = BartTokenizerFast(vocab_file=str(vocab), merges_file=str(merges))
    tokenizer.save_pretrained(folder)
    torch.manual_seed(seed)
    config = BartConfig(
        vocab_size=len(tokenizer),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=37,
        decoder_ffn_dim=37,
        max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.eos_token_id,
        forced_eos_token_id=None,
    )
    BartForConditionalGeneration(config).save_pretrained(folder)
    return folder


def make_tiny_gpt2(folder: Path, texts: Iterable[str], seed: int = 0) -> Path:
    """Save a tiny random GPT2LMHeadModel with a byte-level BPE tokenizer into `folder`."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab, merges = _byte_bpe(folder, texts)
    tokenizer = GPT2TokenizerFast(
        vocab=str(vocab), merges=str(merges), bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>"
    )
    tokenizer.save_pretrained(folder)
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_embd=32,
        n_layer=2,
        n_head=2,
        n_positions=256,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    GPT2LMHeadModel(config).save_pretrained(folder)
    return folder


def same_stat_other_bytes(src: Path, dst: Path) -> Path:
    """`cp -rp src dst`, then bytes of dst's model.safetensors changed (same size) and its times put back
    (`touch -r`): what stat sees of the two folders is the same, their weights are not."""
    shutil.copytree(src, dst)  # copy2: modification times kept, as cp -p, rsync -a and tar do
    weights = dst / "model.safetensors"
    data = bytearray(weights.read_bytes())
    start = 8 + int.from_bytes(data[:8], "little")
    for name, info in json.loads(data[8:start]).items():  # every float32 tensor doubled, the header kept
        if name != "__metadata__" and info["dtype"] == "F32":
            begin, end = info["data_offsets"]
            values = np.frombuffer(bytes(data[start + begin : start + end]), dtype="<f4")
            data[start + begin : start + end] = (values * 2).astype("<f4").tobytes()
    weights.write_bytes(bytes(data))
    stat = (src / "model.safetensors").stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    return dst
