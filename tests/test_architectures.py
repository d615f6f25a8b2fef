"""Each architecture's table maps a GGUF file onto mlx-lm's model: a small file of each, written
with gguf-py as llama.cpp's converter lays it out (no llama.cpp fixture has them), loads into the
model whose logits equal mlx-lm's own model holding gguf-py's dequantization of the same tensors;
what a model cannot hold is refused; the gpt2 tokenizer path; the ropes; the llama Q/K
permutation undone exactly. tests/test_llamacpp_references.py holds the same files to llama.cpp."""

import math

import gguf
import mlx.core as mx
import numpy as np
import pytest

import muser_mlx
from muser_mlx.lm.architectures import ARCHITECTURES, unpermute_rows

from conftest import byte_level_alphabet, write_out

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
    "post_attention_norm": "post_attention_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}


PHI3_NAMES = {"attn_qkv": "self_attn.qkv_proj", "ffn_up": "mlp.gate_up_proj"}  # Phi-3's fused projections
GEMMA_NAMES = {"ffn_norm": "pre_feedforward_layernorm"}  # where gemma2's and gemma3_text's norms differ
GEMMA3_LAYERS, WINDOW = 6, 16  # Gemma 3: one global layer (the sixth); windows of 16 (Gemma 3, OLMo 3)


def permute(rows: np.ndarray, heads: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's rows from Hugging Face's rotate-half
    pairs (i, i + d/2) to ggml's adjacent pairs (2i, 2i + 1)."""
    return rows.reshape(heads, 2, rows.shape[0] // heads // 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def write_model(
    path, arch: str, tied: bool, seed: int = 0, skip: tuple = (), more=None, pre: str = "qwen2", head_dim=HEAD_DIM
):
    """A GGUF of ``arch`` (llama, granite, qwen2, qwen3, olmo2, phi3, gemma2: 2 layers; smollm3,
    olmo3 (an olmo2 file with windows): 4; gemma3: 6) of Q8_0 projections and F32 norms and
    biases, as llama.cpp's converter lays them out (the llama family's Q and K rows permuted,
    Gemma's norms stored as 1 + w); returns {mlx-lm parameter name: float32 array} of what gguf-py
    dequantizes it to. ``skip``: tensor names left out; ``more(writer)`` adds keys or tensors;
    ``pre``: tokenizer.ggml.pre; ``head_dim``: attention.key_length (any, as Mistral Nemo's)."""
    gemma = arch.startswith("gemma")
    layers = {"gemma3": GEMMA3_LAYERS, "smollm3": 4, "olmo3": 4}.get(arch, 2)  # the fourth without rope / window
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, "olmo2" if arch == "olmo3" else arch)  # the converter writes OLMo 3 as olmo2
    w.add_block_count(layers)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    w.add_context_length(512)
    if gemma or head_dim != HEAD_DIM:
        w.add_value_length(head_dim)
    if arch == "gemma3":
        w.add_sliding_window(WINDOW)
    if arch == "olmo3":  # windows of 16 in the first three layers, as the converter writes layer_types
        w.add_sliding_window(WINDOW)
        w.add_sliding_window_pattern([True, True, True, False])
    if arch == "granite":  # Granite 3's scales, about
        w.add_float32("granite.logit_scale", 8.0)
        w.add_float32("granite.embedding_scale", 12.0)
        w.add_float32("granite.residual_scale", 0.22)
        w.add_float32("granite.attention.scale", 0.0078125)
    if arch == "gemma2":  # small enough to bend these logits (llama.cpp: 50 and 30 by default); windows of 4,096
        w.add_float32("gemma2.attn_logit_softcapping", 0.5)
        w.add_float32("gemma2.final_logit_softcapping", 1.0)
    alphabet = byte_level_alphabet()
    tokens = alphabet + ["Ġt", "he", "Ġthe", "<|endoftext|>"]
    tokens += [f"tok{i}" for i in range(VOCAB - len(tokens))]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([3 if t == "<|endoftext|>" else 1 for t in tokens])
    w.add_token_merges(["Ġ t", "h e", "Ġt he"])
    w.add_eos_token_id(tokens.index("<|endoftext|>"))
    reference = {}
    names = {**NAMES, **(GEMMA_NAMES if gemma else PHI3_NAMES if arch == "phi3" else {})}

    def matrix(name, hf, rows, cols, heads=None):
        q = gguf.quants.quantize(rng.normal(0, 0.05, (rows, cols)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
        if name not in skip:
            file_rows = permute(q, heads) if arch in ("llama", "granite", "smollm3") and heads else q  # rows move whole
            w.add_tensor(name, file_rows, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
            reference[hf] = gguf.quants.dequantize(q, gguf.GGMLQuantizationType.Q8_0)

    def vector(name, hf, n, offset=0.0):
        v = (offset + rng.normal(0, 0.1, n)).astype(np.float32)
        if name not in skip:
            w.add_tensor(name, v)
            reference[hf] = v - 1.0 if gemma and name.endswith("norm.weight") else v

    matrix("token_embd.weight", "model.embed_tokens.weight", VOCAB, HIDDEN)
    if not tied:
        matrix("output.weight", "lm_head.weight", VOCAB, HIDDEN)
    vector("output_norm.weight", "model.norm.weight", HIDDEN, 1.0)
    norms = (("attn_norm", HIDDEN), ("ffn_norm", HIDDEN))
    if arch in ("qwen3", "gemma3"):
        norms += (("attn_q_norm", head_dim), ("attn_k_norm", head_dim))
    if gemma:
        norms += (("post_attention_norm", HIDDEN), ("post_ffw_norm", HIDDEN))
    if arch in ("olmo2", "olmo3"):  # norms after attention and the MLP only; q and k normed whole
        norms = (("attn_q_norm", HEADS * head_dim), ("attn_k_norm", KV_HEADS * head_dim))
        norms += (("post_attention_norm", HIDDEN), ("post_ffw_norm", HIDDEN))
    for i in range(layers):
        projections = (
            ("attn_q", HEADS * head_dim, HIDDEN, HEADS),
            ("attn_k", KV_HEADS * head_dim, HIDDEN, KV_HEADS),
            ("attn_v", KV_HEADS * head_dim, HIDDEN, None),
            ("attn_output", HIDDEN, HEADS * head_dim, None),
            ("ffn_gate", FFN, HIDDEN, None),
            ("ffn_up", FFN, HIDDEN, None),
            ("ffn_down", HIDDEN, FFN, None),
        )
        if arch == "phi3":  # q, k and v rows in one tensor; gate then up rows in ffn_up
            projections = (
                ("attn_qkv", (HEADS + 2 * KV_HEADS) * head_dim, HIDDEN, None),
                ("attn_output", HIDDEN, HEADS * head_dim, None),
                ("ffn_up", 2 * FFN, HIDDEN, None),
                ("ffn_down", HIDDEN, FFN, None),
            )
        for kind, rows, cols, heads in projections:
            matrix(f"blk.{i}.{kind}.weight", f"model.layers.{i}.{names[kind]}.weight", rows, cols, heads)
            if arch == "qwen2" and kind in ("attn_q", "attn_k", "attn_v"):
                vector(f"blk.{i}.{kind}.bias", f"model.layers.{i}.{names[kind]}.bias", rows)
        for kind, n in norms:
            vector(f"blk.{i}.{kind}.weight", f"model.layers.{i}.{names[kind]}.weight", n, 1.0)
    if more is not None:
        more(w)
    write_out(w)
    return reference


@pytest.mark.parametrize(
    "arch, tied, head_dim",
    [
        ("qwen2", True, HEAD_DIM),
        ("qwen2", False, HEAD_DIM),
        ("qwen3", True, HEAD_DIM),
        ("qwen3", False, HEAD_DIM),
        ("granite", True, HEAD_DIM),
        ("smollm3", True, HEAD_DIM),
        ("olmo2", False, HEAD_DIM),
        ("olmo3", False, HEAD_DIM),
        ("phi3", False, HEAD_DIM),
        ("gemma2", True, HEAD_DIM),
        ("gemma3", True, HEAD_DIM),
        ("llama", False, 2 * HEAD_DIM),  # Q and K rows permuted; a head dim past hidden / heads (Mistral Nemo)
    ],
)
def test_files_load_as_mlx_lms_model(tmp_path, arch, tied, head_dim):
    reference = write_model(tmp_path / f"{arch}.gguf", arch, tied, head_dim=head_dim)
    model, tokenizer = muser_mlx.load(tmp_path / f"{arch}.gguf", dtype=mx.float32)
    model_type = "olmo3" if arch == "olmo3" else ARCHITECTURES[arch].model_type  # an olmo2 file with windows
    assert type(model).__module__ == f"mlx_lm.models.{model_type}"
    assert getattr(model.args, "tie_word_embeddings", True) is tied  # gemma3_text always ties
    float_model = type(model)(model.args)
    weights = {k: mx.array(v) for k, v in reference.items()}
    float_model.load_weights(list(getattr(float_model, "sanitize", dict)(weights).items()))
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
    write_model(tmp_path / "q.gguf", "qwen3", tied=True)
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


def no_weight_read(monkeypatch):
    """Fail any read of a 2-D tensor: an error must come before the weights are read."""

    def refuse(*args, **kwargs):
        raise AssertionError("a weight was read before the error")

    monkeypatch.setattr(muser_mlx.member_bytes, "read", refuse)


def test_tensors_the_model_has_no_place_for(tmp_path, monkeypatch):
    """A block past the block count, and a norm of another length, are GGUFErrors naming the file
    and the tensors before any weight is read; a tensor the model needs and the file lacks is one
    naming the file once the rest are read."""
    extra = lambda w: w.add_tensor("blk.2.attn_norm.weight", np.ones(HIDDEN, np.float32))  # noqa: E731
    write_model(tmp_path / "extra.gguf", "qwen3", tied=True, more=extra)
    write_model(
        tmp_path / "short.gguf",
        "qwen3",
        tied=True,
        skip=("blk.1.ffn_norm.weight",),
        more=lambda w: w.add_tensor("blk.1.ffn_norm.weight", np.ones(HIDDEN - 1, np.float32)),
    )
    write_model(tmp_path / "missing.gguf", "qwen3", tied=True, skip=("blk.1.ffn_down.weight",))
    with monkeypatch.context() as m:
        no_weight_read(m)
        with pytest.raises(muser_mlx.GGUFError, match=r"extra.gguf: tensors blk.2.attn_norm.weight have no place"):
            muser_mlx.load(tmp_path / "extra.gguf")
        with pytest.raises(
            muser_mlx.GGUFError,
            match=rf"short.gguf: .*blk.1.ffn_norm.weight \[{HIDDEN - 1}\] \(the model's .*post_attention_layernorm.weight: \[{HIDDEN}\]\)",
        ):
            muser_mlx.load(tmp_path / "short.gguf")
    with pytest.raises(
        muser_mlx.GGUFError,
        match=r"(?s)missing.gguf: its tensors do not fill mlx-lm's qwen3 model: Missing 1 parameters.*layers.1.mlp.down_proj",
    ):
        muser_mlx.load(tmp_path / "missing.gguf")


@pytest.mark.parametrize(
    "more, message",
    [
        (lambda w: w.add_tokenizer_model("bert"), "tokenizer.ggml.model is 'bert'"),
        (lambda w: w.add_uint32("tokenizer.ggml.bos_token_id", 10**6), "tokenizer.ggml.bos_token_id 1000000 is no id"),
        (lambda w: w.add_float32("tokenizer.ggml.bos_token_id", 1.0), "tokenizer.ggml.bos_token_id 1.0 is no id"),
    ],
)
def test_a_bad_vocabulary_is_refused_before_any_weight_is_read(tmp_path, monkeypatch, more, message):
    path = tmp_path / "v.gguf"
    write_model(path, "qwen3", tied=True, more=more)
    no_weight_read(monkeypatch)
    with pytest.raises(muser_mlx.GGUFError, match=f"v.gguf: {message}"):
        muser_mlx.load(path)


def test_an_unknown_pre_tokenizer_names_the_file(tmp_path, monkeypatch):
    write_model(tmp_path / "p.gguf", "qwen3", tied=True, pre="not-a-pre-tokenizer")
    no_weight_read(monkeypatch)
    with pytest.raises(muser_mlx.GGUFError, match=r"p.gguf: tokenizer.ggml.pre 'not-a-pre-tokenizer' is not supported"):
        muser_mlx.load(tmp_path / "p.gguf")


def test_llama_bpe_vocabularies_take_a_bos_unless_told_otherwise(tmp_path):
    """llama.cpp's llama-vocab.cpp: add_bos true for the pre-tokenizers of its llama3 and tekken
    types, false for the other gpt2 ones (smaug-bpe has llama3's expression but not its BOS), the
    file's add_bos_token over both."""
    from muser_mlx.gguf import open_gguf
    from muser_mlx.lm.tokenizer import Vocab

    for pre, more, bos in (
        ("llama-bpe", None, True),
        ("llama3", None, True),
        ("falcon3", None, True),
        ("tekken", None, True),
        ("qwen2", None, False),
        ("smaug-bpe", None, False),
        ("default", None, False),
        ("llama-bpe", lambda w: w.add_add_bos_token(False), False),
    ):
        path = tmp_path / f"{pre}{bos}.gguf"
        write_model(path, "qwen3", tied=True, pre=pre, more=more)
        with open_gguf(path) as f:
            assert Vocab.from_gguf(f).add_bos is bos, (pre, more)


def test_per_layer_head_counts_of_one_value_and_rope_scaling_as_llama_cpp(tmp_path):
    """head_count_kv as an array of one value per layer reads as that value; a rope scaling factor
    without a type is linear, as llama.cpp defaults it, and the older rope.scale_linear is read."""
    from muser_mlx.gguf import open_gguf
    from muser_mlx.lm.architectures import ARCHITECTURES, Metadata

    def more(w):
        w.kv_data[0].pop("qwen3.attention.head_count_kv")
        w.add_array("qwen3.attention.head_count_kv", [KV_HEADS, KV_HEADS])
        w.add_float32("qwen3.rope.scaling.factor", 4.0)

    write_model(tmp_path / "a.gguf", "qwen3", tied=True, more=more)
    write_model(tmp_path / "b.gguf", "qwen3", tied=True, more=lambda w: w.add_float32("qwen3.rope.scale_linear", 2.0))
    arch = ARCHITECTURES["qwen3"]
    with open_gguf(tmp_path / "a.gguf") as f:
        args = arch.args(Metadata(f, "qwen3"))
    assert args["num_key_value_heads"] == KV_HEADS and args["rope_scaling"] == {"type": "linear", "factor": 4.0}
    with open_gguf(tmp_path / "b.gguf") as f:
        assert arch.args(Metadata(f, "qwen3"))["rope_scaling"] == {"type": "linear", "factor": 2.0}


def test_a_group_that_splits_a_head_is_refused(tmp_path):
    """4 attention heads and 2 key-value heads over 4 members: each would hold half a KV head."""
    write_model(tmp_path / "h.gguf", "qwen3", tied=True)

    class Four:
        def size(self):
            return 4

        def rank(self):
            return 0

    with pytest.raises(ValueError, match="4 attention heads and 2 key-value heads cannot be split over 4 members"):
        muser_mlx.load(tmp_path / "h.gguf", group=Four())


def ggml_yarn_rope(x: np.ndarray, base: float, factor: float, original: int) -> np.ndarray:
    """ggml's NEOX rope with YaRN (ggml-cpu's rope_yarn, ggml_rope_yarn_corr_dims) as llama.cpp runs
    it for qwen3: beta_fast 32, beta_slow 1, ext_factor 1, attn_factor 1. x: [positions, dims]."""
    positions, dims = x.shape
    half = dims // 2

    def corr_dim(rotations):
        return dims * np.log(original / (rotations * 2 * np.pi)) / (2 * np.log(base))

    low, high = max(0.0, np.floor(corr_dim(32.0))), min(dims - 1.0, np.ceil(corr_dim(1.0)))
    i = np.arange(half)
    ramp = 1 - np.clip((i - low) / max(0.001, high - low), 0, 1)  # 1: extrapolate, 0: interpolate
    extrap = np.arange(positions)[:, None] * base ** (-2.0 * i / dims)
    theta = extrap / factor * (1 - ramp) + extrap * ramp
    mscale = 1 + 0.1 * np.log(factor)
    cos, sin = np.cos(theta) * mscale, np.sin(theta) * mscale
    x0, x1 = x[:, :half], x[:, half:]
    return np.concatenate([x0 * cos - x1 * sin, x0 * sin + x1 * cos], axis=1)


def test_yarn_rope_scaling_rotates_as_llama_cpp(tmp_path):
    """rope.scaling.type yarn (Qwen's 128K recipe): each layer's rope rotates as ggml's YaRN rope of
    the file's original context, or of the trained one where the file names none."""

    def yarn(w):
        w.add_string("qwen3.rope.scaling.type", "yarn")
        w.add_float32("qwen3.rope.scaling.factor", 4.0)
        w.add_uint32("qwen3.rope.scaling.original_context_length", 4096)

    write_model(tmp_path / "y.gguf", "qwen3", tied=True, more=yarn)
    model, _ = muser_mlx.load(tmp_path / "y.gguf", mx.float32)
    x = np.random.default_rng(0).standard_normal((300, HEAD_DIM)).astype(np.float32)
    got = np.array(model.layers[1].self_attn.rope(mx.array(x)[None, None]))[0, 0]
    assert np.allclose(got, ggml_yarn_rope(x.astype(np.float64), 1e6, 4.0, 4096), rtol=1e-4, atol=1e-4)

    write_model(
        tmp_path / "t.gguf",
        "qwen3",
        tied=True,
        more=lambda w: (yarn(w), w.kv_data[0].pop("qwen3.rope.scaling.original_context_length")),
    )
    model, _ = muser_mlx.load(tmp_path / "t.gguf", mx.float32)
    got = np.array(model.layers[0].self_attn.rope(mx.array(x)[None, None]))[0, 0]
    assert np.allclose(got, ggml_yarn_rope(x.astype(np.float64), 1e6, 4.0, 512), rtol=1e-4, atol=1e-4)


PHI3_LONG = np.linspace(1.0, 8.0, 6, dtype=np.float32)  # a rope over 12 of the 16 head dims: 6 pairs
PHI3_SHORT = np.linspace(1.0, 2.0, 6, dtype=np.float32)


def phi3_long_rope(w, original: int = 64):
    """Phi-3.5's rope as the converter writes it, small: factors for contexts past ``original``
    and within it (the file's context is 512), over 3/4 of the head dim, and the magnitude
    sqrt(1 + ln(512 / original) / ln(original))."""
    w.add_rope_dimension_count(12)
    w.add_uint32("phi3.rope.scaling.original_context_length", original)
    w.add_float32("phi3.rope.scaling.attn_factor", math.sqrt(1 + math.log(512 / original) / math.log(original)))
    w.add_tensor("rope_factors_long.weight", PHI3_LONG)
    w.add_tensor("rope_factors_short.weight", PHI3_SHORT)


def hf_phi3_rope(x: np.ndarray, factors: np.ndarray, magnitude: float) -> np.ndarray:
    """Hugging Face's Phi-3 long rope on x [positions, 16], base 1e6, over its first 12 dims (rotate
    half), the rest as they are: the angle of pair i at position p is p / (factors[i] base^(2i/12))."""
    inv_freq = 1.0 / (factors * 1e6 ** (np.arange(0, 12, 2) / 12))
    angle = np.arange(x.shape[0])[:, None] * inv_freq
    cos, sin = np.cos(angle) * magnitude, np.sin(angle) * magnitude
    x0, x1, rest = x[:, :6], x[:, 6:12], x[:, 12:]
    return np.concatenate([x0 * cos - x1 * sin, x1 * cos + x0 * sin, rest], axis=1)


def test_phi3_rope_factors_rotate_as_hugging_faces_phi3(tmp_path):
    """Phi-3.5-style rope factors: each layer's rope rotates 3/4 of the head as Hugging Face's
    Phi-3 does, the short factors while the positions stay within the original context (64) and
    the long ones past it, q and k scaled by the file's magnitude; the logits those of mlx-lm's
    phi3 given the same rope."""
    reference = write_model(tmp_path / "p.gguf", "phi3", tied=False, more=phi3_long_rope)
    model, _ = muser_mlx.load(tmp_path / "p.gguf", dtype=mx.float32)
    rope = model.layers[0].self_attn.rope
    magnitude = math.sqrt(1 + math.log(8) / math.log(64))
    x = np.random.default_rng(0).standard_normal((100, HEAD_DIM)).astype(np.float32)
    for n, factors in ((64, PHI3_SHORT), (100, PHI3_LONG)):
        got = np.array(rope(mx.array(x[:n])[None, None]))[0, 0]
        assert np.allclose(got, hf_phi3_rope(x[:n].astype(np.float64), factors, magnitude), rtol=1e-4, atol=1e-4), n
    float_model = type(model)(model.args)
    float_model.load_weights([(k, mx.array(v)) for k, v in reference.items()])
    for layer in float_model.layers:
        layer.self_attn.rope = rope
    ids = mx.array([list(range(3, 103))])
    ours, theirs = np.array(model(ids)), np.array(float_model(ids))
    assert np.linalg.norm(ours - theirs) / np.linalg.norm(theirs) < 1e-5


@pytest.mark.parametrize(
    "replace, message",
    [
        ({"rope_factors_long.weight": np.ones(5, np.float32)}, r"rope_factors_long.weight \[5\] is not 6 finite"),
        ({"rope_factors_short.weight": None}, r"rope_factors_short.weight missing is not 6 finite"),
        ({"rope_factors_long.weight": None}, r"rope_factors_long.weight missing is not 6 finite"),
        (
            {"rope_factors_long.weight": np.full(6, np.nan, np.float32)},
            r"rope_factors_long.weight \[6\] is not 6 finite",
        ),
    ],
)
def test_phi3_rope_factors_not_one_positive_factor_a_pair_are_refused(tmp_path, replace, message):
    def more(w):
        phi3_long_rope(w)
        for name, values in replace.items():
            w.tensors[0].pop(name)
            if values is not None:
                w.add_tensor(name, values)

    write_model(tmp_path / "p.gguf", "phi3", tied=False, more=more)
    with pytest.raises(muser_mlx.GGUFError, match=message):
        muser_mlx.load(tmp_path / "p.gguf")


def set_key(w, key: str, value) -> None:
    """The writer's own value of ``key`` dropped, then ``value`` written (None: none)."""
    w.kv_data[0].pop(key, None)
    adders = {bool: w.add_bool, int: w.add_int32, float: w.add_float32, str: w.add_string}
    if value is not None:
        adders[type(value)](key, value)


@pytest.mark.parametrize(
    "arch, key, value, message",
    [
        ("qwen3", "qwen3.attention.head_count", 0, r"qwen3.attention.head_count is 0; a positive integer"),
        ("qwen3", "qwen3.block_count", -1, r"qwen3.block_count is -1; a positive integer"),
        ("qwen3", "qwen3.feed_forward_length", 1.5, r"qwen3.feed_forward_length is 1.5; a positive integer"),
        (
            "qwen3",
            "qwen3.rope.scaling.attn_factor",
            0.8,
            r"qwen3.rope.scaling.attn_factor 0.8\d* is not supported \(1 is: mlx-lm's rope has no other\)",
        ),
        (
            "phi3",
            "phi3.rope.scaling.attn_factor",
            1.0,
            r"phi3.rope.scaling.attn_factor 1.0 is not supported \(1.224745 is",
        ),
        ("phi3", "phi3.rope.scaling.factor", 2.0, r"phi3 with linear rope scaling is not supported"),
        ("phi3", "phi3.attention.key_length", 32, r"phi3.attention.key_length 32 is not embedding_length / head_count"),
        ("qwen2", "qwen2.attention.key_length", 32, r"qwen2.attention.key_length 32 is not embedding_length / head_"),
        ("granite", "granite.attention.key_length", 32, r"granite.attention.key_length 32 is not embedding_length"),
        (
            "gemma2",
            "gemma2.rope.scaling.factor",
            8.0,
            r"gemma2 with rope scaling is not supported \(mlx-lm's gemma2 has none\)",
        ),
        ("gemma2", "gemma2.rope.freq_base_swa", 1e4, r"gemma2.rope.freq_base_swa 10000.0 is not supported"),
        ("gemma2", "gemma2.final_logit_softcapping", 0.0, r"final_logit_softcapping is 0.0; a finite positive number"),
        ("gemma2", "gemma2.attn_logit_softcapping", float("inf"), r"attn_logit_softcapping is inf; a finite positive"),
        ("granite", "granite.logit_scale", None, r"metadata granite.logit_scale is missing"),
        ("granite", "granite.residual_scale", float("inf"), r"granite's residual_multiplier is inf; a finite non-zero"),
        (
            "granite",
            "granite.rope.scaling.finetuned",
            False,
            r"granite.rope.scaling.finetuned false \(no rope\) is not",
        ),
        ("olmo3", "olmo2.rope.freq_base_swa", 1e4, r"olmo2.rope.freq_base_swa 10000.0 is not supported"),
        # numbers that gave NaN logits, and keys of another type that gave a TypeError
        ("qwen3", "qwen3.rope.freq_base", 0.0, r"qwen3.rope.freq_base is 0.0; a finite positive number"),
        ("qwen3", "qwen3.rope.freq_base", float("nan"), r"qwen3.rope.freq_base is nan; a finite positive"),
        ("qwen3", "qwen3.rope.freq_base", "1e6", r"qwen3.rope.freq_base is '1e6'; a finite positive"),
        ("qwen3", "qwen3.attention.layer_norm_rms_epsilon", float("nan"), r"epsilon is nan; a finite positive"),
        ("qwen3", "qwen3.rope.scaling.factor", float("nan"), r"factor is nan; a finite number of at least 0"),
        ("qwen3", "qwen3.rope.scaling.factor", -2.0, r"factor is -2.0; a finite number of at least 0"),
        ("qwen3", "qwen3.rope.scaling.attn_factor", "1", r"attn_factor is '1'; a finite positive"),
        ("qwen3", "qwen3.context_length", 0, r"qwen3.context_length is 0; a positive integer"),
        # sizes the file's tensors do not have: mlx-lm's model was built at them first
        ("qwen3", "qwen3.block_count", 100000, r"block_count is 100000, but the file's tensors hold blocks 0 to 1, 2"),
        ("qwen3", "qwen3.feed_forward_length", 2**30, r"feed_forward_length 1073741824 is larger than any tensor's"),
        ("qwen3", "qwen3.attention.head_count_kv", 3, r"head_count 4 is not whole groups of its 3 kv heads"),
        (
            "qwen3",
            "qwen3.embedding_length",
            2 * HIDDEN,
            rf"token_embd.weight' has dims {HIDDEN} but the metadata qwen3.embedding_length is {2 * HIDDEN}",
        ),
    ],
)
def test_what_mlx_lms_model_cannot_hold_is_refused(tmp_path, arch, key, value, message):
    """Sizes that are no positive integers, and what the architecture's mlx-lm model has no place
    for (phi3: with Phi-3.5's rope factors, a magnitude other than its rope's)."""

    def more(w):
        if arch == "phi3":
            phi3_long_rope(w)
        set_key(w, key, value)

    write_model(tmp_path / "m.gguf", arch, tied=arch != "phi3", more=more)
    with pytest.raises(muser_mlx.GGUFError, match=message):
        muser_mlx.load(tmp_path / "m.gguf")
