"""The header reader (``open_gguf``) against gguf-py's GGUFReader: metadata, arrays read on
demand, tensor infos, tensor bytes; ``tied``; one open per load; Gemma 3 270M end to end."""

from __future__ import annotations

import os
import struct

import gguf
import mlx.core as mx
import numpy as np
import pytest

from muser_mlx import Embedding, GGUFError, Table, save_gguf
from muser_mlx.cli import main
from muser_mlx.gguf import ArrayInfo, StringInfo, gatherable_tensors, open_gguf
from muser_mlx.gguf_values import MAX_INLINE_STRING

from conftest import assert_bits_equal, fixture, random_table_bytes, reference, rewrite_gguf, write_gguf, write_out
from gguf_files import RawGGUF, assert_same_header, patch

FIXTURE_FILES = [
    "tiny-llama-Q4_K_M.gguf",
    "tiny-llama-Q8_0.gguf",
    "tiny-llama-f16.gguf",
    "ollama-llama-2-tiny-random.gguf",
    "types/IQ2_XXS.gguf",
    "types/MXFP4.gguf",
]


@pytest.mark.parametrize("name", FIXTURE_FILES)
def test_header_matches_gguf_py(name):
    path = fixture(name)
    reader = gguf.GGUFReader(path)
    with open_gguf(path) as f:
        assert_same_header(f, reader)
        for t in reader.tensors:
            assert np.array_equal(f.read(t.name).reshape(-1), np.asarray(t.data).view(np.uint8).reshape(-1))


T = gguf.GGUFValueType
SCALARS = {
    "u8": (T.UINT8, 200),
    "i8": (T.INT8, -100),
    "u16": (T.UINT16, 60000),
    "i16": (T.INT16, -30000),
    "u32": (T.UINT32, 2**32 - 1),
    "i32": (T.INT32, -(2**31)),
    "u64": (T.UINT64, 2**64 - 1),
    "i64": (T.INT64, -(2**63)),
    "f32": (T.FLOAT32, 0.5),
    "f64": (T.FLOAT64, 0.1),
    "yes": (T.BOOL, True),
}


def test_every_value_type_round_trips_through_gguf_writer(tmp_path):
    path = tmp_path / "v.gguf"
    w = gguf.GGUFWriter(path, "llama")
    for key, (vtype, value) in SCALARS.items():
        w.add_key_value(key, value, vtype)
    w.add_key_value("empty", "", T.STRING)  # add_string skips empty strings
    w.add_string("long", "y" * (MAX_INLINE_STRING + 1))
    w.add_array("ints", [1, 2, 3])
    w.add_array("floats", [0.5, -1.0])
    w.add_array("bools", [True, False, True])
    w.add_array("words", ["a", "", "é", "🙂"])
    w.add_tensor("token_embd.weight", np.zeros((4, 8), np.float16))
    write_out(w)
    with open_gguf(path) as f:
        assert_same_header(f, gguf.GGUFReader(path))
        for key, (_, value) in SCALARS.items():
            assert f.get(key) == value and type(f.get(key)) is type(value), key
        assert f.get("empty") == "" and f.get("absent", 7) == 7
        assert isinstance(f.metadata["long"], StringInfo) and f.get("long") == "y" * (MAX_INLINE_STRING + 1)
        info = f.metadata["words"]
        assert isinstance(info, ArrayInfo) and (info.item_type, info.count) == (T.STRING, 4)
        assert f.array("words") == ["a", "", "é", "🙂"]
        assert f.array("bools").dtype == np.bool_ and f.array("bools").tolist() == [True, False, True]
        assert f.array("floats").dtype == np.float32 and f.array("ints").dtype == np.int32
        with pytest.raises(KeyError):
            f.array("absent")
        with pytest.raises(GGUFError, match=r"v.gguf: metadata 'u8' is not an array but int 200"):
            f.array("u8")


def test_arrays_gguf_writer_will_not_write(tmp_path):
    """Empty arrays, arrays of arrays."""
    path = tmp_path / "n.gguf"
    with RawGGUF(path, n_kv=3, n_tensors=0) as g:
        g.array_header("no words", T.STRING, 0)
        g.array_header("no floats", T.FLOAT32, 0)
        g.array_header("pairs", T.ARRAY, 2)
        g.raw(struct.pack("<IQ2i", T.INT32, 2, 1, 2) + struct.pack("<IQ", T.STRING, 1) + struct.pack("<Q", 2) + b"ab")
    with open_gguf(path) as f:
        assert f.array("no words") == [] and f.array("no floats").shape == (0,)
        first, second = f.array("pairs")
        assert first.tolist() == [1, 2] and second == ["ab"]


def test_an_array_changed_after_the_open(tmp_path):
    """The header is walked once; an array rewritten in place or cut before it is read no longer
    frames its items: GGUFError, not garbage."""
    path = tmp_path / "c.gguf"
    w = gguf.GGUFWriter(path, "llama")
    w.add_array("words", ["a", "b"])
    w.add_array("pairs", [[1, 2], [3, 4]])
    w.write_header_to_file(), w.write_kv_data_to_file(), w.close()
    with open_gguf(path) as f:
        at = f.metadata["pairs"].offset  # the first inner array: its item type, then its count
        patch(path, at + 4, "Q", 2**40)
        with pytest.raises(GGUFError, match="metadata 'pairs': its items no longer fit its bytes"):
            f.array("pairs")
        patch(path, at, "I", 99)  # an item type no array has
        with pytest.raises(GGUFError, match="metadata 'pairs': its items no longer fit its bytes"):
            f.array("pairs")
        patch(path, f.metadata["words"].offset, "Q", 2**40)  # the first string's length
        with pytest.raises(GGUFError, match="metadata 'words': its items no longer fit its bytes; the file changed"):
            f.array("words")
        os.truncate(path, f.metadata["words"].offset)
        with pytest.raises(GGUFError, match="metadata 'words': the file ends at byte .* it shrank after it was opened"):
            f.array("words")


def test_read_and_read_into(tmp_path, q4k_table):
    table, raw = q4k_table
    path = save_gguf(tmp_path / "s.gguf", {"token_embd.weight": table})
    with open_gguf(path) as f:
        t = f.tensors["token_embd.weight"]
        assert (t.qtype, t.ggml_type, t.shape, t.rows, t.row_bytes, t.nbytes) == (
            "Q4_K",
            12,
            (512, 11),
            11,
            288,
            raw.nbytes,
        )
        assert np.array_equal(f.read("token_embd.weight"), raw)
        out = bytearray(raw.nbytes)
        f.read_into("token_embd.weight", out)
        assert bytes(out) == raw.tobytes()
        for wrong in (bytearray(10), bytes(raw.nbytes), np.zeros((22, 288), np.uint8)[::2]):
            with pytest.raises(ValueError, match=f"needs a writable contiguous buffer of {raw.nbytes} bytes"):
                f.read_into("token_embd.weight", wrong)
        with pytest.raises(KeyError):
            f.read("output.weight")
    with pytest.raises(ValueError, match="the GGUF file is closed"):
        f.read("token_embd.weight")


# ------------------------------------------------------------------ tied


def q4k(vocab=4, dims=256):
    return random_table_bytes(np.random.default_rng(0), "Q4_K", vocab, dims), "Q4_K"


@pytest.mark.parametrize(
    "tensors, metadata, tied",
    [
        (["token_embd.weight"], {}, None),  # tables only, as save_gguf writes
        (["token_embd.weight", "output.weight"], {}, None),
        (["token_embd.weight", "blk.0.ffn_down.weight"], {}, True),  # a model, no head of its own
        (["token_embd.weight"], {"llama.block_count": 1}, True),
        (["token_embd.weight", "blk.0.ffn_down.weight", "output.weight"], {}, False),
        (["token_embd.weight", "output.weight"], {"llama.block_count": 1}, False),
    ],
)
def test_tied(tmp_path, tensors, metadata, tied):
    path = write_gguf(tmp_path / "m.gguf", {name: q4k() for name in tensors}, metadata=metadata)
    with open_gguf(path) as f:
        assert f.tied is tied
    assert Embedding.from_gguf(path).tied is tied
    other = Embedding.from_gguf(path, tensors[-1]).tied
    assert other is (tied if len(tensors) == 1 else None if tied is None else False)


def test_from_gguf_opens_the_file_once(tmp_path, monkeypatch, capsys):
    path = write_gguf(tmp_path / "m.gguf", {"token_embd.weight": q4k(), "blk.0.ffn_down.weight": q4k()})
    real, opens = os.open, []
    monkeypatch.setattr(os, "open", lambda name, *a, **k: opens.append(name) or real(name, *a, **k))
    assert Embedding.from_gguf(path).tied is True
    assert opens == [path]
    with open_gguf(path) as f:
        Table.from_gguf(f), Embedding.from_gguf(f), gatherable_tensors(f)
    assert opens == [path, path]
    assert main(["inspect", str(path)]) == 0 and "tied head      yes" in capsys.readouterr().out
    assert opens == [path] * 3


def test_the_package_does_not_use_gguf_py_reader(monkeypatch, capsys):
    def refused(*_):
        raise AssertionError("gguf.GGUFReader used by the package")

    path = fixture("tiny-llama-Q4_K_M.gguf")
    for module in (gguf, gguf.gguf_reader):
        monkeypatch.setattr(module, "GGUFReader", refused)
    Embedding.from_gguf(path), gatherable_tensors(path)
    assert main(["inspect", str(path)]) == 0


# ------------------------------------------------------------------ Gemma 3 270M


def test_gemma_against_gguf_py(gemma_path):
    """Gemma 3 270M Q4_K_M: every key (the 262,144 tokens read in full), every tensor info and
    the Q8_0 token_embd [640, 262144] bytes as gguf-py reads them; every row gathered
    bit-identically to gguf-py's dequantization, in float32, float16 and bfloat16."""
    reader = gguf.GGUFReader(gemma_path)  # about 15-40 s: a NumPy view per token
    with open_gguf(gemma_path) as f:
        assert (f.architecture, f.tied, f.get("gemma3.embedding_length")) == ("gemma3", True, 640)
        assert len(f.array("tokenizer.ggml.tokens")) == 262144
        assert_same_header(f, reader)
        emb = Embedding.from_gguf(f)
    raw = np.asarray(next(t for t in reader.tensors if t.name == "token_embd.weight").data)
    assert (emb.qtype, emb.dims, emb.num_embeddings, emb.tied) == ("Q8_0", 640, 262144, True)
    assert np.array_equal(np.array(emb.weight), raw)
    for start in range(0, 262144, 32768):
        ids = np.arange(start, start + 32768)
        assert_bits_equal(emb(mx.array(ids)), reference(raw, "Q8_0", ids))
    ids = np.random.default_rng(0).integers(0, 262144, 4096)
    for dtype in (mx.float16, mx.bfloat16):
        assert_bits_equal(Embedding.from_table(emb.table, dtype)(ids), reference(raw, "Q8_0", ids), dtype)


def test_gemma_inspect(gemma_path, capsys):
    assert main(["inspect", str(gemma_path)]) == 0
    out = capsys.readouterr().out
    assert "token_embd.weight: Q8_0, ggml shape [640, 262144]" in out and "170.0 MiB" in out
    assert "tied head      yes" in out


@pytest.fixture
def split_llama(tmp_path):
    """tiny-llama-Q8_0 (12 tensors) split by gguf-py's writer into parts of 5: the first part's path."""
    return rewrite_gguf(fixture("tiny-llama-Q8_0.gguf"), tmp_path / "tiny.gguf", split_max_tensors=5)


def test_a_split_file_is_its_parts_as_one(split_llama):
    """The first part opens the whole file: its own metadata, every part's tensors in part order,
    each read from its part; as gguf-py reads the unsplit file."""
    whole = gguf.GGUFReader(fixture("tiny-llama-Q8_0.gguf"))
    with open_gguf(split_llama) as f:
        assert {k: v for k, v in f.metadata.items() if not k.startswith("split.")}.keys() == {
            k for k in whole.fields if not k.startswith("GGUF.")
        }
        assert f.metadata["split.count"] == 3
        assert list(f.tensors) == [t.name for t in whole.tensors]
        for t in whole.tensors:
            assert np.array_equal(f.read(t.name).reshape(-1), np.asarray(t.data).view(np.uint8).reshape(-1))
    assert [i.name for i in gatherable_tensors(split_llama)][-1] == "blk.0.ffn_up.weight"  # in the third part


def test_split_parts_are_checked(split_llama):
    second, third = (split_llama.with_name(f"tiny-0000{i}-of-00003.gguf") for i in (2, 3))
    with pytest.raises(GGUFError, match=r"part 2 of 3 of a split GGUF; open its first part, \*-00001-of-00003.gguf"):
        open_gguf(second)
    renamed = split_llama.rename(split_llama.with_name("tiny.gguf"))
    with pytest.raises(GGUFError, match=r"the first of 3 parts of a split GGUF, named <prefix>-00001-of-00003.gguf"):
        open_gguf(renamed)
    renamed.rename(split_llama)
    third.rename(third.with_name("elsewhere.gguf"))
    with pytest.raises(GGUFError, match=r"part 3 of 3, tiny-00003-of-00003.gguf, is not beside it"):
        open_gguf(split_llama)
    third.write_bytes(second.read_bytes())  # another part in its place
    with pytest.raises(GGUFError, match=r"split.count and split.no are \(3, 1\); part 3 of 3 needs \(3, 2\)"):
        open_gguf(split_llama)


def test_a_split_key_that_is_no_count_is_refused(tmp_path):
    w = gguf.GGUFWriter(tmp_path / "s.gguf", "llama")
    w.add_int32("split.count", -2)
    w.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    write_out(w)
    with pytest.raises(GGUFError, match=r"metadata split.count is -2; an integer of at least 1 is needed"):
        open_gguf(tmp_path / "s.gguf")


def test_split_files_as_llama_cpp_names_and_counts_them(tmp_path):
    """A first part named by its suffix alone is one (llama.cpp's prefix is then the folder); a
    split without split.tensors.count, or whose later part's split.no is no integer, is refused."""
    src = fixture("tiny-llama-Q8_0.gguf")
    rewrite_gguf(src, tmp_path / "x.gguf", split_max_tensors=6)
    for i in (1, 2):
        (tmp_path / f"x-0000{i}-of-00002.gguf").rename(tmp_path / f"-0000{i}-of-00002.gguf")
    with open_gguf(tmp_path / "-00001-of-00002.gguf") as f:
        assert len(f.tensors) == 12

    def drop_count(w):
        w.add_shard_kv_data = lambda: (type(w).add_shard_kv_data(w), w.kv_data[0].pop("split.tensors.count"))

    first = rewrite_gguf(src, tmp_path / "a.gguf", more=drop_count, split_max_tensors=6)
    with pytest.raises(GGUFError, match=r"metadata split.tensors.count is None; an integer of at least 1"):
        open_gguf(first)

    def float_no(w):
        def shard_keys():
            type(w).add_shard_kv_data(w)
            w.kv_data[1]["split.no"] = gguf.GGUFValue(1.0, gguf.GGUFValueType.FLOAT32)

        w.add_shard_kv_data = shard_keys

    first = rewrite_gguf(src, tmp_path / "b.gguf", more=float_no, split_max_tensors=6)
    with pytest.raises(GGUFError, match=r"b-00002-of-00002.gguf: metadata split.no is 1.0; an integer of at least 0"):
        open_gguf(first)
