"""Tiny random decoder LMs (Llama, GPT-2) that the decoder tests share."""

from __future__ import annotations

import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
)


def tiny_llama(tied: bool = False, layers: int = 4) -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                        tie_word_embeddings=tied, bos_token_id=None, eos_token_id=None)).eval()


def tiny_gpt2(layers: int = 4) -> GPT2LMHeadModel:
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=50, n_embd=32, n_layer=layers, n_head=4, n_positions=64,
                                      bos_token_id=None, eos_token_id=None)).eval()


