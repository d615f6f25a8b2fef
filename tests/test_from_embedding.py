"""From a float MLX embedding to a Q4_K Embedding: from_embedding and quantize_embeddings."""

import gguf
import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest

from muser_mlx import Embedding, quantize, quantize_embeddings

from conftest import fixture


def test_from_embedding_reproduces_llama_cpp_bytes():
    source = np.load(fixture("tiny-llama.token_embd.f32.npy"))
    dense = nn.Embedding(*source.shape)
    dense.weight = mx.array(source)
    emb = Embedding.from_embedding(dense)
    llama_cpp = next(
        t for t in gguf.GGUFReader(fixture("tiny-llama-Q4_K_M.gguf")).tensors if t.name == "token_embd.weight"
    )
    assert np.array_equal(np.array(emb.weight), np.asarray(llama_cpp.data))
    assert emb.dtype == mx.float32 and emb.qtype == "Q4_K"


def test_from_weight_keeps_the_weight_dtype():
    weight = (mx.random.normal((8, 256), key=mx.random.key(0)) * 0.02).astype(mx.float16)
    emb = Embedding.from_embedding(weight)
    assert emb.dtype == mx.float16
    expected = gguf.quants.dequantize(quantize(np.array(weight.astype(mx.float32))), gguf.GGMLQuantizationType.Q4_K)
    assert mx.array_equal(emb(mx.arange(8)), mx.array(expected).astype(mx.float16)).item()


def test_quantize_embeddings_swaps_only_embeddings():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(16, 256)
            self.layers = [nn.Linear(256, 256)]

        def __call__(self, ids):
            return self.layers[0](self.embed(ids))

    model = Model()
    before = model(mx.array([1, 2]))
    quantize_embeddings(model)
    assert isinstance(model.embed, Embedding) and isinstance(model.layers[0], nn.Linear)
    after = model(mx.array([1, 2]))
    assert after.shape == before.shape and mx.abs(after - before).max().item() < 0.5


def test_non_multiple_of_256_is_a_clear_error():
    with pytest.raises(ValueError, match="multiple of 256"):
        Embedding.from_embedding(mx.zeros((4, 100)))
