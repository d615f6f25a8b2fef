"""Each architecture's table maps a GGUF file onto mlx-lm's model: small qwen2 and qwen3 files
written with gguf-py (no llama.cpp fixture has them) load into the model whose logits equal mlx-lm's
own model holding gguf-py's dequantization of the same tensors; the gpt2 tokenizer path; the
llama Q/K permutation undone exactly."""

import gguf
import mlx.core as mx
import numpy as np
import pytest

import muser_mlx
from muser_mlx.lm.architectures import ARCHITECTURES, unpermute_rows

mlx_lm = pytest.importorskip("mlx_lm", reason="the lm extra is not installed: pip install -e .[lm]")

HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 64, 96, 4, 2, 16, 300
NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
}


def byte_level_alphabet() -> list[str]:
    """GPT-2's printable stand-in for each byte (Hugging Face's bytes_to_unicode), in byte order."""
    keep = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    extra = iter(range(256, 512))
    return [chr(b) if b in keep else chr(next(extra)) for b in range(256)]


def write_qwen(path, arch: str, tied: bool, seed: int = 0):
    """A 2-layer qwen2/qwen3 GGUF of Q8_0 projections and F32 norms and biases; returns
    {mlx-lm parameter name: float32 array} of what gguf-py dequantizes it to."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, arch)
    w.add_block_count(2)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    w.add_context_length(512)
    alphabet = byte_level_alphabet()
    tokens = alphabet + ["Ġt", "he", "Ġthe", "<|endoftext|>"]
    tokens += [f"tok{i}" for i in range(VOCAB - len(tokens))]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types([3 if t == "<|endoftext|>" else 1 for t in tokens])
    w.add_token_merges(["Ġ t", "h e", "Ġt he"])
    w.add_eos_token_id(tokens.index("<|endoftext|>"))
    reference = {}

    def matrix(name, hf, rows, cols):
        q = gguf.quants.quantize(rng.normal(0, 0.05, (rows, cols)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
        w.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        reference[hf] = gguf.quants.dequantize(q, gguf.GGMLQuantizationType.Q8_0)

    def vector(name, hf, n, offset=0.0):
        v = (offset + rng.normal(0, 0.1, n)).astype(np.float32)
        w.add_tensor(name, v)
        reference[hf] = v

    matrix("token_embd.weight", "model.embed_tokens.weight", VOCAB, HIDDEN)
    if not tied:
        matrix("output.weight", "lm_head.weight", VOCAB, HIDDEN)
    vector("output_norm.weight", "model.norm.weight", HIDDEN, 1.0)
    for i in range(2):
        for kind, rows, cols in (
            ("attn_q", HEADS * HEAD_DIM, HIDDEN),
            ("attn_k", KV_HEADS * HEAD_DIM, HIDDEN),
            ("attn_v", KV_HEADS * HEAD_DIM, HIDDEN),
            ("attn_output", HIDDEN, HEADS * HEAD_DIM),
            ("ffn_gate", FFN, HIDDEN),
            ("ffn_up", FFN, HIDDEN),
            ("ffn_down", HIDDEN, FFN),
        ):
            matrix(f"blk.{i}.{kind}.weight", f"model.layers.{i}.{NAMES[kind]}.weight", rows, cols)
            if arch == "qwen2" and kind in ("attn_q", "attn_k", "attn_v"):
                vector(f"blk.{i}.{kind}.bias", f"model.layers.{i}.{NAMES[kind]}.bias", rows)
        for kind, n in (("attn_norm", HIDDEN), ("ffn_norm", HIDDEN)) + (
            (("attn_q_norm", HEAD_DIM), ("attn_k_norm", HEAD_DIM)) if arch == "qwen3" else ()
        ):
            vector(f"blk.{i}.{kind}.weight", f"model.layers.{i}.{NAMES[kind]}.weight", n, 1.0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return reference


@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])
@pytest.mark.parametrize("tied", [True, False])
def test_qwen_files_load_as_mlx_lms_model(tmp_path, arch, tied):
    reference = write_qwen(tmp_path / f"{arch}.gguf", arch, tied)
    model, tokenizer = muser_mlx.load(tmp_path / f"{arch}.gguf", dtype=mx.float32)
    assert type(model).__module__ == f"mlx_lm.models.{arch}" and model.args.tie_word_embeddings is tied
    float_model = type(model)(model.args)
    float_model.load_weights([(k, mx.array(v)) for k, v in reference.items()], strict=True)
    ids = mx.array([[3, 77, 150, 299, 12, 5]])
    ours, theirs = np.array(model(ids)), np.array(float_model(ids))
    assert np.linalg.norm(ours - theirs) / np.linalg.norm(theirs) < 1e-5
    assert tokenizer.encode(" the the") == [tokens_index(tokenizer, "Ġthe")] * 2
    assert tokenizer.decode(tokenizer.encode("héllo wörld")) == "héllo wörld"


def tokens_index(tokenizer, token: str) -> int:
    return tokenizer.convert_tokens_to_ids(token)


def test_unpermute_undoes_llama_cpps_permute():
    """convert_hf_to_gguf.py's LlamaModel.permute, as llama.cpp writes it, then ours: the rows
    come back in order, for a weight's byte rows and for a bias."""

    def permute(weights, n_head):
        return (
            weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2)
            .reshape(weights.shape)
        )

    rows = np.arange(8 * 64 * 3).reshape(8 * 64, 3)
    assert np.array_equal(unpermute_rows(permute(rows, 8), 8), rows)
    bias = np.arange(128)
    assert np.array_equal(unpermute_rows(permute(bias, 2), 2), bias)


def test_every_table_names_its_mlx_lm_module():
    import importlib

    for arch in ARCHITECTURES.values():
        assert hasattr(importlib.import_module(f"mlx_lm.models.{arch.model_type}"), "Model")
        assert arch.dtype in ("float16", "bfloat16")


def test_a_tensor_of_the_wrong_shape_is_a_gguf_error(tmp_path):
    write_qwen(tmp_path / "q.gguf", "qwen3", tied=True)
    from muser_mlx.gguf import open_gguf

    with open_gguf(tmp_path / "q.gguf") as f:
        ffn = f.metadata["qwen3.feed_forward_length"]
    assert ffn == FFN
    # the same tensors under metadata that promises a wider feed-forward layer
    data = (tmp_path / "q.gguf").read_bytes()
    key = b"qwen3.feed_forward_length"
    at = data.index(key) + len(key) + 4  # after the key and its u32 value type
    patched = data[:at] + np.uint32(2 * FFN).tobytes() + data[at + 4 :]
    (tmp_path / "wide.gguf").write_bytes(patched)
    with pytest.raises(
        muser_mlx.GGUFError,
        match=r"tensor 'blk\.\d\.ffn_\w+\.weight' has shape \[\d+, \d+\]; the model's .*mlp.* needs \[\d+, \d+\]",
    ):
        muser_mlx.load(tmp_path / "wide.gguf")
