"""muser_mlx.load: GGUF files as mlx-lm's own models, checked against llama.cpp's numbers
(../shared/fixtures/llamacpp): teacher-forced argmax over each prompt and llama.cpp's greedy
continuation, and the last position's logits; and mlx-lm's conventions on the loaded model."""

import json

import mlx.core as mx
import numpy as np
import pytest
from mlx import nn
from mlx.utils import tree_flatten

import muser_mlx
from muser_mlx import Embedding, GGUFError, Linear

from conftest import fixture, rewrite_gguf, write_gguf

mlx_lm = pytest.importorskip("mlx_lm", reason="the lm extra is not installed: pip install -e .[lm]")
from mlx_lm.generate import generate_step  # noqa: E402
from mlx_lm.utils import (  # noqa: E402
    compute_bits_per_weight,
    get_total_parameters,
    save_config,
    save_model,
)

LLAMA_FILES = ["tiny-llama-Q4_K_M", "tiny-llama-Q8_0", "ollama-llama-2-tiny-random"]
MIN_ARGMAX_AGREEMENT = 0.95  # of positions, prompt and greedy continuation together
MAX_LAST_LOGITS_ERROR = 0.10  # relative L2 of the last prompt position's logits


def agreement_with_llama_cpp(model, name: str, prompts=None) -> tuple[float, float]:
    """(share of positions whose argmax is llama.cpp's, largest relative L2 error of the last
    prompt position's logits) over the fixture's prompts (all, or the indices ``prompts``)."""
    expected = json.loads(fixture(f"llamacpp/{name}.json").read_text())
    last = np.load(fixture(f"llamacpp/{name}.last_logits.npz"))
    agree = total = 0
    worst = 0.0
    for i, p in enumerate(expected["prompts"]):
        if prompts is not None and i not in prompts:
            continue
        logits = model(mx.array([p["ids"] + p["greedy"][:-1]]))[0].astype(mx.float32)
        # position k predicts token k + 1: the prompt's argmax, then each greedy token after the first
        want = np.array(p["argmax"] + p["greedy"][1:])
        agree += int((np.array(mx.argmax(logits, axis=-1)) == want).sum())
        total += len(want)
        ours, theirs = np.array(logits[len(p["ids"]) - 1]), last[f"p{i}"].astype(np.float32)
        worst = max(worst, float(np.linalg.norm(ours - theirs) / np.linalg.norm(theirs)))
    return agree / total, worst


@pytest.fixture(scope="module", params=LLAMA_FILES)
def llama(request):
    """(name, model, tokenizer) of a llama-architecture fixture, loaded once."""
    return (request.param, *muser_mlx.load(fixture(f"{request.param}.gguf")))


def test_llama_files_agree_with_llama_cpp(llama):
    name, model, _ = llama
    agreement, error = agreement_with_llama_cpp(model, name)
    assert agreement >= MIN_ARGMAX_AGREEMENT and error <= MAX_LAST_LOGITS_ERROR, (agreement, error)


def test_without_undoing_the_qk_permutation_llama_cpp_disagrees(monkeypatch):
    """The permutation is verified against llama.cpp's numbers: leave it and they disagree."""
    from muser_mlx.lm import architectures

    monkeypatch.setitem(
        architectures.ARCHITECTURES,
        "llama",
        architectures.Architecture("llama", "llama", architectures._llama, "float16", permuted_qk=False),
    )
    model, _ = muser_mlx.load(fixture("tiny-llama-Q4_K_M.gguf"))
    agreement, error = agreement_with_llama_cpp(model, "tiny-llama-Q4_K_M")
    assert agreement < 0.9 and error > 0.1


def test_every_weight_stays_in_its_gguf_bytes(llama):
    name, model, _ = llama
    from muser_mlx.gguf import open_gguf

    with open_gguf(fixture(f"{name}.gguf")) as f:
        matrices = sum(t.nbytes for t in f.tensors.values() if len(t.shape) == 2)
        values = sum(int(np.prod(t.shape)) for t in f.tensors.values())
        tied = f.tied
    held = [m for _, m in model.named_modules() if isinstance(m, (Linear, Embedding))]
    assert not [m for _, m in model.named_modules() if type(m) in (nn.Linear, nn.Embedding)]
    assert sum(m.weight.nbytes for m in held) == matrices
    assert ("lm_head" in model) is not tied and model.model.embed_tokens.tied is tied
    assert get_total_parameters(model) == values
    byte_total = sum(v.nbytes for _, v in tree_flatten(model.parameters()))
    assert compute_bits_per_weight(model) == pytest.approx(8 * byte_total / values)


def test_generate_as_mlx_lm_does(llama):
    """mlx_lm.generate, stream_generate and generate_step (greedy) continue as llama.cpp does."""
    name, model, tokenizer = llama
    expected = json.loads(fixture(f"llamacpp/{name}.json").read_text())["prompts"][0]
    steps = generate_step(mx.array(expected["ids"]), model, max_tokens=4)
    assert [int(t) for t, _ in steps] == expected["greedy"][:4]
    text = mlx_lm.generate(model, tokenizer, expected["text"], max_tokens=4)
    assert text == tokenizer.decode(expected["greedy"][:4])
    last = list(mlx_lm.stream_generate(model, tokenizer, expected["text"], max_tokens=4))[-1]
    assert last.generation_tokens == 4 and last.generation_tps > 0


def test_compiled_equals_eager(llama):
    _, model, _ = llama
    ids = mx.array([[1, 5, 9, 2, 7]])
    assert mx.allclose(mx.compile(model)(ids), model(ids), atol=1e-3, rtol=1e-3).item()


def test_set_dtype_sets_the_lookup_and_logits(llama):
    _, model, _ = llama
    ids = mx.array([[1, 5, 9]])
    model.set_dtype(mx.bfloat16)
    try:
        assert model.model.embed_tokens(ids).dtype == mx.bfloat16 and model(ids).dtype == mx.bfloat16
    finally:
        model.set_dtype(mx.float16)
    assert model(ids).dtype == mx.float16


def test_saved_weights_reload_identically(llama, tmp_path):
    """mlx_lm.utils.save_model writes the GGUF bytes under the module names; a model loaded again
    through the package takes them back with load_weights(strict=True)."""
    name, model, _ = llama
    save_model(tmp_path, model)
    again, _ = muser_mlx.load(fixture(f"{name}.gguf"))
    saved = mx.load(str(tmp_path / "model.safetensors"))
    assert saved["model.embed_tokens.weight"].dtype == mx.uint8
    again.load_weights(list(saved.items()), strict=True)
    ids = mx.array([[1, 5, 9, 2]])
    assert mx.array_equal(again(ids), model(ids)).item()


def test_stock_mlx_lm_rejects_the_saved_bytes(llama, tmp_path):
    """Stock mlx-lm builds nn.Linear / nn.Embedding of float [out, in] and refuses the bytes."""
    _, model, _ = llama
    save_model(tmp_path, model)
    save_config(dict(vars(model.args)), tmp_path / "config.json")
    with pytest.raises(ValueError, match="parameters not in model|Expected shape"):
        mlx_lm.utils.load_model(tmp_path)


def test_unsupported_architecture_names_the_supported_ones(tmp_path):
    path = write_gguf(tmp_path / "falcon.gguf", {"token_embd.weight": np.zeros((4, 32), np.float32)}, arch="falcon")
    with pytest.raises(
        GGUFError,
        match="architecture 'falcon' is not supported; supported: llama, granite, smollm3, qwen2, qwen3, olmo2, phi3, gemma2, gemma3",
    ):
        muser_mlx.load(path)


ON_GPU = muser_mlx.backends.select("auto") in muser_mlx.backends.KERNEL_BACKENDS
# Gemma 3 270M on the CPU's ops backend: about 12 s per prompt of 40 tokens on a 2-core machine,
# so the CPU runs the first two of the eight prompts; a GPU all eight.
CPU_PROMPTS = {0, 1}


@pytest.fixture(scope="module")
def gemma(gemma_path):
    """Gemma 3 270M in float32 (llama.cpp computes in float32; in bfloat16, the family's default,
    all eight prompts agree at 95.5%, in float32 at 96.8%)."""
    return muser_mlx.load(gemma_path, dtype=mx.float32)


def test_gemma_agrees_with_llama_cpp(gemma):
    model, _ = gemma
    agreement, error = agreement_with_llama_cpp(model, "gemma-3-270m-q4_k_m", prompts=None if ON_GPU else CPU_PROMPTS)
    assert agreement >= MIN_ARGMAX_AGREEMENT and error <= MAX_LAST_LOGITS_ERROR, (agreement, error)


def test_gemma_holds_its_file_bytes(gemma, gemma_path):
    from muser_mlx.gguf import open_gguf

    model, _ = gemma
    with open_gguf(gemma_path) as f:
        file_bytes = sum(t.nbytes for t in f.tensors.values())
    held = sum(v.nbytes for _, v in tree_flatten(model.parameters()))
    assert held <= 1.15 * file_bytes, (held, file_bytes)
    assert model.tie_word_embeddings and "lm_head" not in model


def test_gemma_generates_with_its_sliding_window_cache(gemma):
    model, _ = gemma
    expected = json.loads(fixture("llamacpp/gemma-3-270m-q4_k_m.json").read_text())["prompts"][0]
    cache = model.make_cache()
    assert {type(c).__name__ for c in cache} == {"KVCache", "RotatingKVCache"}
    steps = generate_step(mx.array(expected["ids"]), model, max_tokens=4, prompt_cache=cache)
    assert [int(t) for t, _ in steps] == expected["greedy"][:4]


def test_adapters_load_as_mlx_lm_saves_them(tmp_path):
    """adapter_path: an mlx-lm LoRA adapter folder (adapter_config.json, adapters.safetensors) is
    applied to the loaded model through Linear.to_lora, as mlx_lm.load applies it."""
    from mlx_lm.tuner.utils import linear_to_lora_layers

    path = fixture("tiny-llama-Q8_0.gguf")
    config = {"num_layers": 1, "fine_tune_type": "lora", "lora_parameters": {"rank": 4, "scale": 10.0, "dropout": 0.0}}
    trained, _ = muser_mlx.load(path)
    trained.freeze()
    linear_to_lora_layers(trained, config["num_layers"], config["lora_parameters"])
    adapters = {
        k: mx.random.normal(v.shape, key=mx.random.key(i)).astype(v.dtype) * 0.01
        for i, (k, v) in enumerate(tree_flatten(trained.trainable_parameters()))
    }
    trained.load_weights(list(adapters.items()), strict=False)
    mx.save_safetensors(str(tmp_path / "adapters.safetensors"), adapters)
    (tmp_path / "adapter_config.json").write_text(json.dumps(config))
    model, _ = muser_mlx.load(path, adapter_path=tmp_path)
    ids = mx.array([[1, 5, 9, 2]])
    assert mx.array_equal(model(ids), trained(ids)).item()
    assert not mx.array_equal(model(ids), muser_mlx.load(path)[0](ids)).item()


LLAMA3_SCALING = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}


def llama3_rope_factors(dims: int, base: float, s: dict) -> np.ndarray:
    """convert_hf_to_gguf.py's rope_freqs.weight for a "llama3" rope scaling (LlamaModel)."""
    wavelen = 2 * np.pi * base ** (np.arange(0, dims, 2, dtype=np.float64) / dims)
    old, low, high = s["original_max_position_embeddings"], s["low_freq_factor"], s["high_freq_factor"]
    smooth = (old / wavelen - low) / (high - low)
    medium = 1 / ((1 - smooth) / s["factor"] + smooth)
    return np.where(wavelen < old / high, 1.0, np.where(wavelen > old / low, s["factor"], medium)).astype(np.float32)


def test_rope_factors_rotate_as_mlx_lms_llama3_rope(tmp_path):
    """A Llama 3.1-style file (rope_freqs.weight, no scaling keys) gives the logits of the same
    model with mlx-lm's own Llama3RoPE of the settings the factors were written from."""
    from mlx_lm.models.rope_utils import initialize_rope

    src = fixture("tiny-llama-Q8_0.gguf")
    head_dim, base = 128, 10000.0  # the fixture's (no rope.freq_base key)
    factors = llama3_rope_factors(head_dim, base, LLAMA3_SCALING)
    assert set(np.unique(factors)) > {1.0, LLAMA3_SCALING["factor"]}  # pairs kept, scaled and smoothed
    scaled, _ = muser_mlx.load(rewrite_gguf(src, tmp_path / "rope.gguf", {"rope_freqs.weight": factors}), mx.float32)
    theirs, _ = muser_mlx.load(src, mx.float32)
    for layer in theirs.layers:
        layer.self_attn.rope = initialize_rope(head_dim, base, False, LLAMA3_SCALING, max_position_embeddings=128)
    ids = mx.array([list(range(3, 67))])
    ours, want = scaled(ids), theirs(ids)
    assert mx.allclose(ours, want, rtol=1e-4, atol=1e-4).item()
    assert not mx.allclose(ours, muser_mlx.load(src, mx.float32)[0](ids), rtol=1e-2, atol=1e-2).item()  # they count


@pytest.mark.parametrize("values", [np.ones(63, np.float32), np.full(64, np.inf, np.float32), np.zeros(64, np.float32)])
def test_rope_factors_not_one_positive_factor_a_pair_are_refused(tmp_path, values):
    path = rewrite_gguf(fixture("tiny-llama-Q8_0.gguf"), tmp_path / "bad.gguf", {"rope_freqs.weight": values})
    with pytest.raises(GGUFError, match=r"rope_freqs.weight \[\d+\] is not 64 finite positive factors"):
        muser_mlx.load(path)


def test_a_split_file_loads_from_its_first_part(tmp_path):
    """gguf-py's writer splitting tiny-llama in three parts (as llama.cpp's gguf-split does): the
    model of the first part's path computes what the whole file's does."""
    src = fixture("tiny-llama-Q8_0.gguf")
    first = rewrite_gguf(src, tmp_path / "tiny.gguf", split_max_tensors=5)
    assert first.name == "tiny-00001-of-00003.gguf"
    ids = mx.array([[1, 5, 9, 2, 300, 7]])
    assert mx.array_equal(muser_mlx.load(first)[0](ids), muser_mlx.load(src)[0](ids)).item()


def test_rope_factors_under_yarn_are_refused(tmp_path):
    def yarn(w):
        w.add_string("llama.rope.scaling.type", "yarn")
        w.add_float32("llama.rope.scaling.factor", 4.0)

    path = rewrite_gguf(
        fixture("tiny-llama-Q8_0.gguf"), tmp_path / "y.gguf", {"rope_freqs.weight": np.ones(64, np.float32)}, yarn
    )
    with pytest.raises(GGUFError, match=r"rope_freqs.weight with yarn rope scaling is not supported \(linear is\)"):
        muser_mlx.load(path)
