"""Shared by the measurement-protocol tests (tests/test_protocol_*.py): whether CUDA is here, and
the texts of their tiny model (lengths from one character to a long sentence, one duplicate).
"""

from __future__ import annotations

import pytest
import torch

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")

TEXTS = [
    "the cat sat on the mat .",
    "a dog barked at the postman for a very long time , then it slept",
    "hi",
    "colourless green ideas sleep furiously while the committee deliberates",
    "one two three four five six seven eight nine ten eleven twelve thirteen",
    "short one",
    "the quick brown fox jumps over the lazy dog",
    "an unusually long sentence with many words that keeps going on and on past the others in length",
    "x",
    "the cat sat on the mat .",  # a duplicate: encoded once
]
