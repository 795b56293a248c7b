"""Tiny random models and a word-level tokenizer for the neuron-explanation tests
(no download, no embedded model)."""

from __future__ import annotations

import re

import torch


def word_tokenizer(texts):
    """A fast word-level tokenizer (offsets supported) whose vocabulary covers ``texts``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t)})
    vocab = {"[UNK]": 0, "[PAD]": 1}
    for w in words:
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]")


def tiny_llama(vocab_size: int, seed: int = 0, layers: int = 3):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=48, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
    )
    return LlamaForCausalLM(cfg).eval()


def tiny_gpt2(vocab_size: int, seed: int = 0, layers: int = 3):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(
        vocab_size=vocab_size, n_embd=32, n_layer=layers, n_head=4, n_positions=128, n_inner=40,
    )
    return GPT2LMHeadModel(cfg).eval()
