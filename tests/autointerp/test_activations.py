"""Hook names, early-stopped reads and encoding only the chosen latents."""

from __future__ import annotations

import pytest
import torch
from sae_lens import JumpReLUSAE, JumpReLUSAEConfig, StandardSAE, StandardSAEConfig, TopKSAE, TopKSAEConfig
from transformers import AutoModel, BertConfig, BertModel, LlamaConfig, LlamaModel

from findbench.autointerp.activations import encode_latents, hook_name_for_layer, parse_hook_name, read_hook


def test_hook_names_round_trip_and_bad_names_are_named():
    assert hook_name_for_layer(6) == "blocks.6.hook_resid_post"
    assert hook_name_for_layer(2, "resid_pre") == "blocks.2.hook_resid_pre"
    assert hook_name_for_layer(3, "blocks.3.mlp.hook_post") == "blocks.3.mlp.hook_post"
    assert parse_hook_name("blocks.11.hook_resid_post") == ("block_output", 11)
    assert parse_hook_name("blocks.2.mlp.hook_post") == ("mlp_activation", 2)
    assert parse_hook_name("hook_embed") == ("embed", None)
    with pytest.raises(ValueError, match="hook_name must be"):
        parse_hook_name("blocks.1.attn.hook_z")
    with pytest.raises(ValueError, match="not layer 4"):
        hook_name_for_layer(4, "blocks.3.hook_resid_post")
    with pytest.raises(ValueError, match="layer must be"):
        hook_name_for_layer(-1)


def _llama():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=64)
    return LlamaModel(cfg).eval()


def _bert():
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
                     max_position_embeddings=64)
    return BertModel(cfg).eval()


@pytest.mark.parametrize("make", [_llama, _bert], ids=["decoder", "encoder"])
def test_read_hook_equals_hidden_states_and_stops_early(make):
    model = make()
    ids = torch.randint(0, 100, (2, 9))
    hidden = model(ids, output_hidden_states=True).hidden_states
    # Llama's last hidden state has the final norm applied; the residual stream is read before it
    for layer in range(2 if isinstance(model, LlamaModel) else 3):
        assert torch.allclose(
            read_hook(model, ids, hook_name=f"blocks.{layer}.hook_resid_post"), hidden[layer + 1], atol=1e-5
        )
    for layer in range(3):
        assert torch.allclose(
            read_hook(model, ids, hook_name=f"blocks.{layer}.hook_resid_pre"), hidden[layer], atol=1e-5
        )
    assert torch.equal(read_hook(model, ids, hook_name="hook_embed"), model.get_input_embeddings()(ids))
    # the blocks after the hooked one never run
    ran = []
    handle = model.get_submodule("layers" if isinstance(model, LlamaModel) else "encoder.layer")[
        2
    ].register_forward_hook(lambda *a: ran.append(1))
    read_hook(model, ids, hook_name="blocks.1.hook_resid_post")
    handle.remove()
    assert ran == []
    with pytest.raises(ValueError, match=r"layer must be in \[0, 3\)"):
        read_hook(model, ids, hook_name="blocks.3.hook_resid_post")


def test_mlp_hook_reads_the_mlp_activation_of_a_bare_decoder():
    model = _llama()
    ids = torch.randint(0, 100, (1, 5))
    seen = {}
    h = model.layers[1].mlp.down_proj.register_forward_pre_hook(lambda m, a: seen.setdefault("x", a[0].clone()))
    model(ids)
    h.remove()
    assert torch.allclose(read_hook(model, ids, hook_name="blocks.1.mlp.hook_post"), seen["x"])


def _saes():
    torch.manual_seed(1)
    std = StandardSAE(StandardSAEConfig(d_in=32, d_sae=48))
    topk = TopKSAE(TopKSAEConfig(d_in=32, d_sae=48, k=5))
    jump = JumpReLUSAE(JumpReLUSAEConfig(d_in=32, d_sae=48))
    for sae in (std, topk, jump):
        with torch.no_grad():
            for p in sae.parameters():
                p.normal_(0, 0.3)
    with torch.no_grad():
        jump.threshold.uniform_(0.0, 0.4)
    return {"standard": std, "topk": topk, "jumprelu": jump}


@pytest.mark.parametrize("arch", ["standard", "topk", "jumprelu"])
def test_encode_latents_equals_the_full_encode_restricted(arch):
    sae = _saes()[arch]
    x = torch.randn(4, 7, 32)
    idx = [3, 0, 47, 12]
    full = sae.encode(x)
    got = encode_latents(sae, x, idx)
    assert torch.allclose(got, full[..., idx], atol=1e-5)
    assert (got > 0).any()
    assert torch.allclose(encode_latents(sae, x), full)


def test_auto_model_of_the_embedded_encoder_reads_like_its_hidden_states():
    from findbench.lm.encoder import encoder_dir

    model = AutoModel.from_pretrained(encoder_dir("embedded")).eval()
    ids = torch.tensor([[101, 2023, 2003, 1037, 3231, 102]])
    hidden = model(ids, output_hidden_states=True).hidden_states
    assert torch.allclose(read_hook(model, ids, hook_name="blocks.3.hook_resid_post"), hidden[4], atol=1e-5)
