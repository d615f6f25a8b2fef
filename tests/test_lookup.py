"""Lookups on the portable path (and on the machine's GPU kernel where there is one) against
gguf-py's dequantization: bit for bit, any shape, any id dtype, any output dtype."""

import mlx.core as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from muser_mlx import embedding

from conftest import OUTPUT_DTYPES, assert_bits_equal, reference, tables

ID_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


@st.composite
def ids_for(draw, vocab, max_shape=(3, 5)):
    shape = draw(st.sampled_from([(), (max_shape[1],), max_shape, (1,), (2, 1, 3)]))
    n = int(np.prod(shape))
    values = draw(st.lists(st.integers(0, vocab - 1), min_size=n, max_size=n))
    return np.array(values, dtype=np.int64).reshape(shape)


@settings(max_examples=60, deadline=None)
@given(st.data(), tables(), OUTPUT_DTYPES)
def test_host_ids_match_gguf_py(data, table_and_bytes, dtype):
    table, raw = table_and_bytes
    ids = data.draw(ids_for(table.vocab))
    out = embedding(table, ids.tolist() if ids.ndim else int(ids), dtype, backend="ops")
    assert_bits_equal(out, reference(raw, table.qtype, ids), dtype)


@settings(max_examples=40, deadline=None)
@given(st.data(), tables(), st.sampled_from(ID_DTYPES))
def test_every_integer_dtype(data, table_and_bytes, id_dtype):
    table, raw = table_and_bytes
    top = min(table.vocab - 1, np.iinfo(id_dtype).max)
    ids = np.array(data.draw(st.lists(st.integers(0, top), min_size=1, max_size=9)), dtype=id_dtype)
    expected = reference(raw, table.qtype, ids)
    assert_bits_equal(embedding(table, ids, backend="ops"), expected)
    assert_bits_equal(embedding(table, mx.array(ids), backend="ops"), expected)


@settings(max_examples=40, deadline=None)
@given(st.data(), tables())
def test_lazy_ids_clamp_like_the_kernel(data, table_and_bytes):
    table, raw = table_and_bytes
    ids = np.array(data.draw(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=12)), np.int32)
    out = embedding(table, mx.array(ids), backend="ops")
    clamped = np.minimum(ids.astype(np.int64).astype(np.uint64), table.vocab - 1)
    assert_bits_equal(out, reference(raw, table.qtype, clamped))
    negative_or_high = (ids < 0) | (ids >= table.vocab)
    expected_last = reference(raw, table.qtype, [table.vocab - 1])[0]
    assert all(np.array_equal(np.array(out[i]), expected_last) for i in np.flatnonzero(negative_or_high))


@settings(max_examples=40, deadline=None)
@given(st.data(), tables())
def test_host_check_names_the_bad_id(data, table_and_bytes):
    table, _ = table_and_bytes
    good = data.draw(st.lists(st.integers(0, table.vocab - 1), max_size=5))
    bad = data.draw(st.one_of(st.integers(table.vocab, 2**62), st.integers(-(2**62), -1)))
    at = data.draw(st.integers(0, len(good)))
    ids = good[:at] + [bad] + good[at:]
    with pytest.raises(IndexError) as e:
        embedding(table, np.array(ids, np.int64))
    assert f"token id {bad} at position {at}" in str(e.value) and str(table.vocab) in str(e.value)
    with pytest.raises(IndexError):
        embedding(table, mx.array(ids, mx.int64), check_ids=True)


@pytest.mark.parametrize("ids", [np.array([1.0]), mx.array([1.0]), [0.5], np.array([True]), mx.array([True])])
def test_non_integer_ids_are_a_type_error(ids, q4k_table):
    table, _ = q4k_table
    with pytest.raises(TypeError, match="integers"):
        embedding(table, ids)


def test_output_dtype_must_be_floating(q4k_table):
    table, _ = q4k_table
    with pytest.raises(ValueError, match="float32, float16 or bfloat16"):
        embedding(table, [0], mx.int32)


def test_empty_ids_give_empty_rows(q4k_table):
    table, _ = q4k_table
    for ids in ([], np.zeros((2, 0), np.int32), mx.zeros((0,), mx.int32)):
        out = embedding(table, ids)
        assert out.shape == (*np.shape(ids), table.dims) and out.dtype == mx.float32
