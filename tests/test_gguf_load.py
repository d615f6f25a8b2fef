"""Loading tables from GGUF files: round trips through gguf.GGUFWriter, every load-time check,
read-only files, and the llama.cpp-made fixtures against gguf-py bit for bit."""

import gguf
import mlx.core as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from muser_mlx import Embedding, GGUFError, Table
from muser_mlx.gguf import gatherable_tensors
from muser_mlx.writer import save_gguf

from conftest import assert_bits_equal, fixture, random_table_bytes, reference, tables
from conftest import write_gguf as write


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tables())
def test_round_trip_through_gguf_writer(tmp_path, table_and_bytes):
    table, raw = table_and_bytes
    path = write(
        tmp_path / "t.gguf", {"token_embd.weight": (raw, table.qtype)}, metadata={"llama.embedding_length": table.dims}
    )
    loaded = Table.from_gguf(path)
    assert (loaded.qtype, loaded.dims, loaded.vocab) == (table.qtype, table.dims, table.vocab)
    assert np.array_equal(np.array(loaded.data), raw)
    ids = np.arange(table.vocab)
    assert_bits_equal(Embedding.from_table(loaded)(ids), reference(raw, table.qtype, ids))


def test_save_gguf_round_trip(tmp_path, q4k_table):
    table, raw = q4k_table
    path = save_gguf(
        tmp_path / "s.gguf", {"token_embd.weight": table}, {"llama.embedding_length": 512, "general.name": "t"}
    )
    reader = gguf.GGUFReader(path)
    assert np.array_equal(reader.tensors[0].data, raw) and reader.tensors[0].tensor_type.name == "Q4_K"
    assert np.array_equal(np.array(Table.from_gguf(path).data), raw)
    with pytest.raises(TypeError, match="not supported"):
        save_gguf(tmp_path / "bad.gguf", {"token_embd.weight": table}, {"x": [1, 2]})


@pytest.mark.parametrize(
    "metadata, error, message",
    [
        ({"x": 2**63}, ValueError, "does not fit a 64-bit integer"),
        ({"x": 1e300}, ValueError, "beyond float32's range"),
        ({"x": "\ud800"}, ValueError, "not valid as UTF-8"),
        ({"general.alignment": 64}, ValueError, "set by save_gguf itself"),
        ({"general.architecture": "qwen2"}, ValueError, "set by save_gguf itself"),
        ({"x": None}, TypeError, "NoneType values are not supported"),
        # gguf-py's TypeError / UnicodeEncodeError named nothing
        ({1: 2}, TypeError, "a metadata key must be a str, got int 1"),
        ({"\ud800": 1}, ValueError, "a metadata key .* is not valid as UTF-8"),
    ],
)
def test_save_gguf_leaves_the_file_there_as_it_was(tmp_path, q4k_table, metadata, error, message):
    """A value the file cannot hold raises before anything is written, and so does a table that
    is none; the file already at the path stays whole, with no partial file beside it."""
    table, raw = q4k_table
    path = save_gguf(tmp_path / "s.gguf", {"token_embd.weight": table})
    before = path.read_bytes()
    with pytest.raises(error, match=message):
        save_gguf(path, {"token_embd.weight": table}, metadata)
    with pytest.raises(TypeError, match="tensor 'other.weight' must be a muser_mlx.Table, got NoneType"):
        save_gguf(path, {"token_embd.weight": table, "other.weight": None})
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["s.gguf"]


@pytest.mark.parametrize(
    "tables, architecture, error, message",
    [
        ({7: None}, "llama", TypeError, "a tensor name must be a str, got int 7"),
        ({"\ud800": None}, "llama", ValueError, "a tensor name .* is not valid as UTF-8"),
        ({}, 5, TypeError, "the architecture must be a str, got int 5"),
        # unchecked, gguf-py writes a file without an architecture
        ({}, None, TypeError, "the architecture must be a str, got NoneType"),
    ],
)
def test_save_gguf_checks_names_and_the_architecture(tmp_path, tables, architecture, error, message):
    with pytest.raises(error, match=message):
        save_gguf(tmp_path / "s.gguf", tables, architecture=architecture)
    assert list(tmp_path.iterdir()) == []


def test_save_gguf_messages_show_a_long_bad_value_shortened(tmp_path, q4k_table):
    """A bad string or value of a megabyte is named by its ends in the message, not whole."""
    table, _ = q4k_table
    long = "a" * 2**20
    for metadata, error in (({long + "\ud800": 1}, ValueError), ({"x": long + "\ud800"}, ValueError)):
        with pytest.raises(error, match=r"'aaa.*\.\.\..*800'") as caught:
            save_gguf(tmp_path / "s.gguf", {"token_embd.weight": table}, metadata)
        assert len(str(caught.value)) < 200
    with pytest.raises(TypeError, match="must be a str, got bytes") as caught:
        save_gguf(tmp_path / "s.gguf", {long.encode(): table})
    assert len(str(caught.value)) < 200
    assert list(tmp_path.iterdir()) == []


def test_save_gguf_leaves_no_partial_file_when_the_write_fails(tmp_path, q4k_table, monkeypatch):
    """A failure while the tensors are written (a full disk, say): the file at the path is the one
    before, whole, and the partial file beside it is gone."""
    table, _ = q4k_table
    path = save_gguf(tmp_path / "s.gguf", {"token_embd.weight": table})
    before = path.read_bytes()

    def full_disk(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", full_disk)
    with pytest.raises(OSError, match="No space left"):
        save_gguf(path, {"token_embd.weight": table})
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["s.gguf"]


def test_save_gguf_metadata_types_and_limits(tmp_path, q4k_table):
    """Ints below 2**32 go as uint32, others as int64; float infinities and the ends of float32's
    range are written and read back as they are."""
    table, _ = q4k_table
    values = {"u": 2**32 - 1, "i": 2**32, "neg": -(2**63), "inf": float("inf"), "ninf": -float("inf"), "big": 3.4e38}
    path = save_gguf(tmp_path / "m.gguf", {"token_embd.weight": table}, values)
    fields = gguf.GGUFReader(path).fields
    types = {key: fields[key].types[0] for key in values}
    assert types == {
        "u": gguf.GGUFValueType.UINT32,
        "i": gguf.GGUFValueType.INT64,
        "neg": gguf.GGUFValueType.INT64,
        "inf": gguf.GGUFValueType.FLOAT32,
        "ninf": gguf.GGUFValueType.FLOAT32,
        "big": gguf.GGUFValueType.FLOAT32,
    }
    read = {key: fields[key].parts[fields[key].data[0]][0] for key in values}
    assert read["u"] == 2**32 - 1 and read["i"] == 2**32 and read["neg"] == -(2**63)
    assert read["inf"] == np.inf and read["ninf"] == -np.inf and np.isclose(read["big"], 3.4e38)


def q4k(vocab=4, dims=256):
    return random_table_bytes(np.random.default_rng(0), "Q4_K", vocab, dims), "Q4_K"


def test_missing_tensor_lists_embedding_like_ones(tmp_path):
    path = write(tmp_path / "m.gguf", {"tok_embeddings.weight": q4k(), "output.weight": q4k()})
    with pytest.raises(
        GGUFError,
        match=r"m.gguf: tensor 'token_embd.weight' is not in the file; "
        r"embedding-like tensors: tok_embeddings.weight, output.weight",
    ):
        Table.from_gguf(path)


def test_shape_must_be_two_dimensional(tmp_path):
    path = write(tmp_path / "s.gguf", {"token_embd.weight": np.zeros((2, 3, 4), np.float16)})
    with pytest.raises(GGUFError, match=r"has shape \[4, 3, 2\]; an embedding table is \[dims, vocab\]"):
        Table.from_gguf(path)


def test_dims_must_be_whole_blocks(tmp_path):
    """GGUFWriter will not write such a tensor: patch ne0 (the uint64 after the name and n_dims)."""
    path = write(tmp_path / "d.gguf", {"token_embd.weight": q4k()})
    data = bytearray(path.read_bytes())
    ne0 = data.index(b"token_embd.weight") + len("token_embd.weight") + 4
    data[ne0 : ne0 + 8] = (100).to_bytes(8, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(GGUFError, match=r"d.gguf.*(100).*(256)"):
        Table.from_gguf(path)


def test_metadata_width_must_agree(tmp_path):
    path = write(tmp_path / "w.gguf", {"token_embd.weight": q4k()}, metadata={"llama.embedding_length": 512})
    with pytest.raises(GGUFError, match="dims 256 but the metadata llama.embedding_length is 512"):
        Table.from_gguf(path)


def test_every_listed_tensor_loads():
    """Whatever gatherable_tensors lists (and ``muser-mlx inspect`` calls gatherable) loads with
    Table.from_gguf, a projection whose rows are not the model's width among them (ffn_down: the
    feed-forward length), and holds the file's bytes."""
    path = fixture("tiny-llama-Q8_0.gguf")
    listed = gatherable_tensors(path)
    assert "blk.0.ffn_down.weight" in {g.name for g in listed}
    reader = gguf.GGUFReader(path)
    raw = {t.name: np.asarray(t.data).view(np.uint8).reshape(-1) for t in reader.tensors}
    for g in listed:
        table = Table.from_gguf(path, g.name)
        assert (table.qtype, table.dims, table.vocab) == (g.qtype, g.dims, g.vocab)
        assert np.array_equal(np.asarray(table.data).reshape(-1), raw[g.name])


def test_unsupported_type_names_the_supported_ones(tmp_path):
    path = write(tmp_path / "u.gguf", {"token_embd.weight": (np.zeros((4, 292), np.uint8), "Q8_K")})
    with pytest.raises(GGUFError, match=r"has type Q8_K, not supported yet; supported: .*Q4_K"):
        Table.from_gguf(path)


def test_gguf_error_is_a_value_error():
    assert issubclass(GGUFError, ValueError)


def test_not_a_gguf_and_missing_file(tmp_path):
    (tmp_path / "x.gguf").write_bytes(b"not a gguf file at all" * 10)
    with pytest.raises(GGUFError, match="x.gguf: not a readable GGUF"):
        Table.from_gguf(tmp_path / "x.gguf")
    with pytest.raises(FileNotFoundError):
        Table.from_gguf(tmp_path / "absent.gguf")


@pytest.mark.parametrize(
    "name, tensor",
    [
        ("tiny-llama-Q4_K_M.gguf", "token_embd.weight"),
        ("tiny-llama-f16.gguf", "token_embd.weight"),
        ("tiny-llama-f16.gguf", "output.weight"),
        ("ollama-llama-2-tiny-random.gguf", "token_embd.weight"),
    ],
)
@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16])
def test_fixtures_match_gguf_py(name, tensor, dtype):
    path = fixture(name)
    raw = next(t for t in gguf.GGUFReader(path).tensors if t.name == tensor)
    emb = Embedding.from_gguf(path, tensor, dtype)
    ids = np.arange(emb.num_embeddings)
    assert_bits_equal(
        emb(ids), reference(np.asarray(raw.data).view(np.uint8).reshape(emb.num_embeddings, -1), emb.qtype, ids), dtype
    )


def test_fixture_edge_rows_against_the_float_source():
    """Rows 0-7 of the tiny llama are edge cases; Q4_K keeps them close to the float source."""
    emb = Embedding.from_gguf(fixture("tiny-llama-Q4_K_M.gguf"))
    source = np.load(fixture("tiny-llama.token_embd.f32.npy"))
    rows = np.array(emb(np.arange(8)))
    assert np.array_equal(rows[0], np.zeros(512, np.float32))
    np.testing.assert_allclose(rows[1:5], source[1:5], atol=0.02)
