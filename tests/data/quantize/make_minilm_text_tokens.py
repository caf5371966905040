"""Tokenize real English sentences (Python stdlib docstrings) with the all-MiniLM-L6-v2 tokenizer."""

import importlib
import inspect
import re
import sys

import numpy as np
from tokenizers import Tokenizer

tok = Tokenizer.from_file("/tmp/q/minilm_hf/tokenizer.json")
tok.enable_padding(length=128)
tok.enable_truncation(max_length=128)
sents = []
for modname in [
    "argparse",
    "json",
    "os",
    "pathlib",
    "subprocess",
    "collections",
    "itertools",
    "functools",
    "logging",
    "email",
    "http.client",
    "unittest",
    "asyncio",
    "shutil",
    "tempfile",
    "textwrap",
    "random",
    "statistics",
    "decimal",
    "fractions",
    "datetime",
    "calendar",
    "csv",
    "sqlite3",
    "zipfile",
    "tarfile",
    "threading",
    "queue",
    "socket",
    "ssl",
]:
    m = importlib.import_module(modname)
    for _, obj in inspect.getmembers(m):
        doc = inspect.getdoc(obj) or ""
        for para in doc.split("\n\n"):
            text = " ".join(para.split())
            if 60 < len(text) < 600 and re.match(r"^[A-Z][a-z]", text) and ">>>" not in text:
                sents.append(text)
sents = sorted(set(sents))
rng = np.random.default_rng(0)
rng.shuffle(sents)
sents = sents[: int(sys.argv[1])]
enc = tok.encode_batch(sents)
ids = np.array([e.ids for e in enc], np.int64)
mask = np.array([e.attention_mask for e in enc], np.int64)
print(len(sents), ids.shape, mask.sum(1).mean(), mask.sum(1).min(), mask.sum(1).max())
np.savez_compressed(sys.argv[2], input_ids=ids, attention_mask=mask)
