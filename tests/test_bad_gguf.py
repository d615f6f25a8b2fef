"""Malformed GGUF files raise GGUFError: never a crash, a hang, a huge allocation or wrong rows."""

from __future__ import annotations

import errno
import io
import os
import signal
import struct
import time
import tracemalloc

import gguf
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from muser_mlx import GGUFError, Linear, Table, check_table, embedding, gguf_io, member_bytes, memory
from muser_mlx.gguf import StringInfo, gatherable_tensors, open_gguf
from muser_mlx.gguf_header import MAX_NAME
from muser_mlx.gguf_values import MAX_ARRAY_NESTING, MAX_INLINE_STRING

from conftest import random_table_bytes, reference, write_out
from gguf_files import (
    INTERESTING_U64,
    TENSOR,
    RawGGUF,
    check_outcome,
    kv_offsets,
    mutate,
    patch,
    strings_file,
    tensor_info_offsets,
    write_gguf,
)


@pytest.fixture
def good(tmp_path):
    path = tmp_path / "good.gguf"
    write_gguf(path)
    return path


def raises_gguf_error(path, match: str | None = None) -> GGUFError:
    start = time.monotonic()
    with pytest.raises(GGUFError, match=match) as e:
        Table.from_gguf(path)
    assert time.monotonic() - start < 2, "took too long: a bogus count was believed"
    assert str(path) in str(e.value)
    return e.value


# ------------------------------------------------------------------ not a GGUF at all


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"hello, I am a text file\n",
        b"GGU",
        b"GGUF",
        pytest.param(np.random.default_rng(58).bytes(4096), id="random"),
    ],
)
def test_not_a_gguf(tmp_path, content):
    path = tmp_path / "x.gguf"
    path.write_bytes(content)
    raises_gguf_error(path, "not a readable GGUF file")


def test_missing_path_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        Table.from_gguf(tmp_path / "absent.gguf")


def test_folder_and_fifo_are_refused_without_opening(tmp_path):
    raises_gguf_error(tmp_path, "not a regular file")
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)  # opening it would block for ever
    raises_gguf_error(fifo, "not a regular file")


# ------------------------------------------------------------------ header


def test_wrong_magic(good):
    patch(good, 0, "4s", b"GGML")
    raises_gguf_error(good, "not a readable GGUF file: it starts with b'GGML'")


@pytest.mark.parametrize("version", [0, 1, 4, 2**31, 2**32 - 1])
def test_wrong_version(good, version):
    patch(good, 4, "I", version)
    raises_gguf_error(good, "version")


def test_big_endian_file_is_refused(good):
    patch(good, 4, "I", 3 << 24)  # version 3 as a big-endian writer stores it
    raises_gguf_error(good, "big-endian")


@pytest.mark.parametrize("at", [8, 16], ids=["tensor_count", "kv_count"])
@pytest.mark.parametrize("count", [2**64 - 1, 2**63, 10**6])
def test_counts_past_the_end(good, at, count):
    patch(good, at, "Q", count)
    raises_gguf_error(good)


def test_truncated_at_every_byte(good, tmp_path):
    data = good.read_bytes()
    end = max(t.data_offset + t.n_bytes for t in gguf.GGUFReader(good).tensors)  # then padding
    original = np.array(Table.from_gguf(good).data)
    cut = tmp_path / "cut.gguf"
    header = tensor_info_offsets(good)["data"]
    for n in [*range(header), *range(header, len(data), 7)]:  # every byte up to the data
        cut.write_bytes(data[:n])
        if n < end:
            raises_gguf_error(cut)
        else:
            assert np.array_equal(np.array(Table.from_gguf(cut).data), original)


# ------------------------------------------------------------------ metadata


@pytest.mark.parametrize("length", [2**64 - 1, 2**40, 5000])
def test_key_length_past_the_end(good, length):
    patch(good, kv_offsets(good, "tokenizer.ggml.tokens")["key_len"], "Q", length)
    raises_gguf_error(good)


@pytest.mark.parametrize("key", ["tokenizer.ggml.tokens", "tokenizer.ggml.scores"])
@pytest.mark.parametrize("count", [2**64 - 1, 2**62, 10**6])
def test_array_count_past_the_end(good, key, count):
    # gguf-py alone would loop `count` times over an f32 array read past the end
    patch(good, kv_offsets(good, key)["count"], "Q", count)
    raises_gguf_error(good)


def test_string_length_past_the_end(good):
    patch(good, kv_offsets(good, "general.architecture")["value"], "Q", 2**63)
    raises_gguf_error(good)


@pytest.mark.parametrize("vtype", [13, 255, 2**32 - 1])
def test_unknown_value_type(good, vtype):
    patch(good, kv_offsets(good, "tokenizer.ggml.scores")["type"], "I", vtype)
    raises_gguf_error(good, "unknown value type")


def test_duplicate_key(tmp_path):
    path = tmp_path / "dup.gguf"
    write_gguf(path)
    at = kv_offsets(path, "tokenizer.ggml.scores")["key_len"] + 8
    patch(path, at, "21s", b"tokenizer.ggml.tokens")  # both keys are 21 bytes long
    raises_gguf_error(path, "appears twice")


def test_non_utf8_name(good):
    patch(good, tensor_info_offsets(good)["n_dims"] - 1, "B", 0xFF)  # last byte of the name
    raises_gguf_error(good)


@pytest.mark.parametrize("alignment", [0, 3, 48])
def test_bad_alignment(tmp_path, alignment):
    path = tmp_path / "a.gguf"
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint32("general.alignment", alignment)
    w.add_tensor(TENSOR, np.zeros((4, 8), np.float16))
    write_out(w)
    raises_gguf_error(path)


def test_items_read_as_arrays(good):
    at = kv_offsets(good, "tokenizer.ggml.tokens")
    patch(good, at["item_type"], "I", gguf.GGUFValueType.ARRAY)  # items "t0".. now read as arrays
    raises_gguf_error(good)


@pytest.mark.parametrize("depth", [MAX_ARRAY_NESTING, MAX_ARRAY_NESTING + 1])
def test_arrays_nested_deeper_than_the_bound(tmp_path, depth):
    """Arrays of one array each, ``depth`` deep, the innermost empty: well formed, and refused past
    MAX_ARRAY_NESTING levels (each level a Python frame of the header walk)."""
    path = tmp_path / "nested.gguf"
    with RawGGUF(path, n_kv=2, n_tensors=0) as g:
        g.string("general.architecture", "llama")
        g.array_header("nested", gguf.GGUFValueType.ARRAY, 1)
        for _ in range(depth - 2):
            g.raw(struct.pack("<IQ", gguf.GGUFValueType.ARRAY, 1))
        g.raw(struct.pack("<IQ", gguf.GGUFValueType.UINT8, 0))
    if depth <= MAX_ARRAY_NESTING:
        with open_gguf(path) as f:
            assert f.metadata["nested"].count == 1
    else:
        with pytest.raises(GGUFError, match=f"nests arrays more than {MAX_ARRAY_NESTING} deep"):
            open_gguf(path)


# ------------------------------------------------------------------ tensor infos


def test_tensor_offset_past_the_end(good):
    patch(good, tensor_info_offsets(good)["offset"], "Q", 2**63)
    raises_gguf_error(good, "past the end")


def test_tensor_data_runs_past_the_end(good):
    size = good.stat().st_size
    at = tensor_info_offsets(good)
    patch(good, at["offset"], "Q", (size - at["data"] + 64) // 32 * 32 - 64)  # aligned, 64 B before the end
    raises_gguf_error(good)


def test_misaligned_tensor(good):
    patch(good, tensor_info_offsets(good)["offset"], "Q", 8)
    raises_gguf_error(good, "alignment")


def test_overlapping_tensors(good):
    # output_norm.weight's bytes moved onto token_embd.weight's: gguf-py accepts this
    patch(good, tensor_info_offsets(good, "output_norm.weight")["offset"], "Q", 0)
    raises_gguf_error(good, "overlap")


def test_tensors_overlapping_by_one_byte(tmp_path):
    """At alignment 1 a tensor may start anywhere: one that starts at the last byte of another
    overlaps it, and one that starts right after it does not."""
    for start, overlaps in ((15, True), (16, False)):
        path = tmp_path / f"o{start}.gguf"
        with RawGGUF(path, n_kv=2, n_tensors=2) as g:
            g.string("general.architecture", "llama")
            g.key("general.alignment", gguf.GGUFValueType.UINT32)
            g.raw(struct.pack("<I", 1))
            g.tensor_info("a.weight", (4,), gguf.GGMLQuantizationType.F32, 0)
            g.tensor_info("b.weight", (4,), gguf.GGMLQuantizationType.F32, start)
            g.data(bytes(32), alignment=1)
        if overlaps:
            with pytest.raises(GGUFError, match=r"'b.weight''s bytes .* overlap tensor 'a.weight'"):
                open_gguf(path)
        else:
            with open_gguf(path) as f:
                assert f.tensors["b.weight"].offset - f.tensors["a.weight"].offset == 16


def test_names_of_at_most_64_kib(tmp_path):
    """A key of MAX_NAME bytes is read; one byte more is refused before it is read."""
    for n, ok in ((MAX_NAME, True), (MAX_NAME + 1, False)):
        path = tmp_path / f"k{n}.gguf"
        with RawGGUF(path, n_kv=2, n_tensors=0) as g:
            g.string("general.architecture", "llama")
            g.key("k" * n, gguf.GGUFValueType.UINT8)
            g.raw(b"\x01")
        if ok:
            with open_gguf(path) as f:
                assert f.metadata["k" * n] == 1
        else:
            with pytest.raises(GGUFError, match=f"is {n} bytes long; at most {MAX_NAME} are allowed"):
                open_gguf(path)


def test_duplicated_tensor_names(tmp_path):
    path = tmp_path / "dup.gguf"
    w = gguf.GGUFWriter(path, "llama")
    w.add_tensor(TENSOR, np.zeros((4, 8), np.float16))
    w.add_tensor("token_embd.weighX", np.zeros((4, 8), np.float16))
    write_out(w)
    patch(path, tensor_info_offsets(path, "token_embd.weighX")["n_dims"] - 1, "c", b"t")
    raises_gguf_error(path, "appears twice")


@pytest.mark.parametrize("vocab", [8, 5, 2**32 + 4])
def test_shape_disagrees_with_bytes(good, vocab):
    patch(good, tensor_info_offsets(good)["dims"] + 8, "Q", vocab)  # ne1 = vocab, was 4
    raises_gguf_error(good)


def test_dims_disagree_with_metadata(good):
    patch(good, tensor_info_offsets(good)["dims"], "Q", 512)
    patch(good, tensor_info_offsets(good)["dims"] + 8, "Q", 2)  # same bytes, other shape
    raises_gguf_error(good, "embedding_length")
    assert gatherable_tensors(good) == []  # it lists only what loads


@pytest.mark.parametrize("dims", [[2**40, 2**40], [2**32, 2**32], [2**63, 2], [256, 4 + 2**56]])
def test_absurd_dims(good, dims):
    # [256, 4 + 2**56]: gguf-py's uint64 element count wraps to 1024, the real tensor's
    at = tensor_info_offsets(good)["dims"]
    for i, n in enumerate(dims):
        patch(good, at + 8 * i, "Q", n)
    raises_gguf_error(good)


@pytest.mark.parametrize("dims", [[0, 4], [256, 0], [0, 0]])
def test_zero_dims(good, dims):
    at = tensor_info_offsets(good)["dims"]
    for i, n in enumerate(dims):
        patch(good, at + 8 * i, "Q", n)
    raises_gguf_error(good)


@pytest.mark.parametrize("n_dims", [0, 1, 3, 5, 2**31, 2**32 - 1])
def test_wrong_number_of_dims(good, n_dims):
    patch(good, tensor_info_offsets(good)["n_dims"], "I", n_dims)
    raises_gguf_error(good)


@pytest.mark.parametrize("ggml_type", [4, 99, 2**32 - 1, gguf.GGMLQuantizationType.I8])
def test_bad_tensor_type(good, ggml_type):
    patch(good, tensor_info_offsets(good)["type"], "I", ggml_type)
    raises_gguf_error(good)


# ------------------------------------------------------------------ files on disk


def test_read_only_file_and_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "m.gguf"
    table = write_gguf(path)
    path.chmod(0o444)
    folder.chmod(0o555)
    try:
        assert np.array_equal(np.array(Table.from_gguf(path).data), table)
    finally:
        folder.chmod(0o755)


@pytest.mark.parametrize("how", ["rewritten in place", "replaced", "deleted"])
def test_table_outlives_its_file(good, how):
    table = Table.from_gguf(good)
    original = np.array(table.data)
    ids = np.arange(table.vocab)
    if how == "rewritten in place":  # the same inode: a live mapping would see this
        with open(good, "r+b") as f:
            f.seek(tensor_info_offsets(good)["data"])
            f.write(b"\xff" * table.nbytes)
    elif how == "replaced":
        write_gguf(good, seed=1)
    else:
        good.unlink()
    assert np.array_equal(np.array(table.data), original)
    got = np.array(embedding(table, ids))
    assert np.array_equal(got.view(np.uint32), reference(original, "Q4_K", ids).view(np.uint32))


# ------------------------------------------------------------------ the file changes while it is read
# Each race is driven from a hook in a function the reader calls between two of its steps.


def bogus_u8_array(path):
    """A header whose u8 array claims 2**62 items (gguf-py alone loops for ever on it)."""
    with RawGGUF(path, n_kv=1, n_tensors=0) as g:
        g.array_header("x", gguf.GGUFValueType.UINT8, 2**62)
        g.raw(b"\0" * 64)


def test_u8_array_count_past_the_end(tmp_path):
    bogus_u8_array(tmp_path / "u8.gguf")
    raises_gguf_error(tmp_path / "u8.gguf", r"metadata 'x' \(4611686018427387904 items\)")


def hook(monkeypatch, module, name: str, before=None, after=None):
    """Replace ``module.name`` by a call of it with ``before()`` run first, ``after()`` after (once each)."""
    real, done = getattr(module, name), []

    def hooked(*args, **kwargs):
        if not done and before:
            before()
        result = real(*args, **kwargs)
        if not done and after:
            after()
        done.append(True)
        return result

    monkeypatch.setattr(module, name, hooked)


def test_file_replaced_after_open_is_not_read(good, tmp_path, monkeypatch):
    """An atomic rename onto the path between the open and the header read: the reader goes on
    with the file it opened (the old pre-scan checked one open and gguf-py read another)."""
    original = np.array(Table.from_gguf(good).data)
    bogus = tmp_path / "bogus.gguf"
    bogus_u8_array(bogus)
    hook(monkeypatch, os, "fstat", after=lambda: os.replace(bogus, good))
    assert np.array_equal(np.array(Table.from_gguf(good).data), original)
    monkeypatch.undo()
    raises_gguf_error(good, "4611686018427387904 items")  # now the bogus file is at the path


def test_fifo_swapped_in_before_open_does_not_block(good, monkeypatch):
    """A FIFO renamed onto the path just before the open: the open does not wait for a writer
    and the descriptor is refused (the old ``is_file()`` check, then an open, could be raced so)."""
    fifo = good.with_name("pipe")
    os.mkfifo(fifo)
    hook(monkeypatch, os, "open", before=lambda: os.replace(fifo, good))

    def blocked(*_):
        raise TimeoutError("the open blocked on the FIFO")

    previous = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(10)
    try:
        raises_gguf_error(good, "not a regular file")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_file_truncated_after_open(good, monkeypatch):
    """Cut to 100 bytes once the descriptor's size is known: the header reads come back short."""
    hook(monkeypatch, os, "fstat", after=lambda: os.truncate(good, 100))
    raises_gguf_error(good, "shrank after it was opened")


def test_file_truncated_before_the_table_is_read(good, monkeypatch):
    """Cut inside the table between the header read and the table read: a memory map would
    give SIGBUS here; the read into the table comes back short."""
    at = tensor_info_offsets(good)["data"]
    hook(monkeypatch, member_bytes, "check_fits", after=lambda: os.truncate(good, at + 100))
    e = raises_gguf_error(good, f"tensor '{TENSOR}': the file ends at byte {at + 100}")
    assert "shrank after it was opened" in str(e)


def test_file_truncated_while_the_table_is_read(tmp_path, monkeypatch):
    """Cut after the first of several read() calls into the table."""
    path = tmp_path / "big.gguf"
    write_gguf(path, vocab=64)
    at = tensor_info_offsets(path)["data"]
    monkeypatch.setattr(gguf_io, "READ_CHUNK", 1024)
    calls = []  # what each read() into the table returned
    hook(monkeypatch, member_bytes, "check_fits", after=lambda: calls.append("header read"))

    class CutAfterFirstRead(io.FileIO):
        def readinto(self, buffer):
            n = super().readinto(buffer)
            if calls:
                calls.append(n)
                os.truncate(path, at + 2000)
            return n

    monkeypatch.setattr(gguf_io.os, "fdopen", lambda fd, *_, **__: CutAfterFirstRead(fd, "rb"))
    raises_gguf_error(path, f"the file ends at byte {at + 2000}")
    assert calls == ["header read", 1024, 976, 0]


# ------------------------------------------------------------------ files that are costly to read naively


def traced_peak(fn):
    """(fn(), the peak bytes Python allocated while it ran)."""
    tracemalloc.start()
    try:
        return fn(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_million_empty_strings_cost_no_object_each(tmp_path):
    """gguf-py spends about 1.5 KB and 25 us per item (1.6 GB, 26.8 s for this 7.6 MB file)."""
    path = tmp_path / "strings.gguf"
    table = strings_file(path, 10**6)
    (loaded, f), peak = traced_peak(lambda: (Table.from_gguf(path), open_gguf(path)))
    assert peak < 8 * 2**20, f"opening held {peak / 2**20:.1f} MiB of Python objects"
    with f:
        assert np.array_equal(np.array(loaded.data), table)
        assert f.metadata["tokenizer.ggml.tokens"].count == 10**6
        assert f.array("tokenizer.ggml.tokens") == [""] * 10**6


def test_a_huge_metadata_string_is_not_copied(tmp_path):
    """A 1 GiB string (a hole: no disk) is stepped over, not read; ``get`` would read it."""
    path = tmp_path / "long.gguf"
    table = random_table_bytes(np.random.default_rng(0), "Q4_K", 4, 256)
    with RawGGUF(path, n_kv=2, n_tensors=1) as g:
        g.key("general.description", gguf.GGUFValueType.STRING)
        g.raw(struct.pack("<Q", 2**30))
        g.hole(2**30)
        g.string("general.name", "x" * (2 * MAX_INLINE_STRING))
        g.tensor_info(TENSOR, (256, 4), gguf.GGMLQuantizationType.Q4_K, 0)
        g.data(table.tobytes())
    (f, loaded), peak = traced_peak(lambda: (open_gguf(path), Table.from_gguf(path)))
    assert peak < 8 * 2**20, f"opening held {peak / 2**20:.1f} MiB of Python objects"
    with f:
        assert np.array_equal(np.array(loaded.data), table)
        assert f.metadata["general.description"] == StringInfo(8 + 4 + 4 + 8 + 8 + 19 + 4 + 8, 2**30)
        assert f.get("general.name") == "x" * (2 * MAX_INLINE_STRING)


@pytest.mark.parametrize("shape", [(1, 2**31), (2**30, 1)], ids=["2**31 rows", "rows of 2**31 bytes"])
def test_shapes_past_mlx_dimensions(tmp_path, shape):
    """F16, so 2**31 rows of 2 bytes (4 GiB) or one row of 2**31 bytes: both files are holes.
    Every check passed and ``mx.array`` then failed with MLX's 32-bit shape error."""
    path = tmp_path / "wide.gguf"
    with RawGGUF(path, n_kv=0, n_tensors=1) as g:
        g.tensor_info(TENSOR, shape, gguf.GGMLQuantizationType.F16, 0)
        g.data(hole=2 * shape[0] * shape[1])
    raises_gguf_error(path, r"MLX's array dimensions stop at 2\*\*31 - 1")
    assert gatherable_tensors(path) == []


def test_permission_denied_names_the_file(good, monkeypatch):
    def denied(name, *_):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), name)

    monkeypatch.setattr(os, "open", denied)
    raises_gguf_error(good, "cannot be opened \\(PermissionError: Permission denied\\)")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may search any folder: the permission is not enforced")
def test_folder_that_may_not_be_searched(tmp_path):
    folder = tmp_path / "closed"
    folder.mkdir()
    write_gguf(folder / "m.gguf")
    folder.chmod(0o600)
    try:
        raises_gguf_error(folder / "m.gguf", "PermissionError")
    finally:
        folder.chmod(0o755)


# ------------------------------------------------------------------ memory, NaN scales


def test_table_larger_than_memory(good, monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: 100)
    e = raises_gguf_error(good, "more than the host's available memory")
    assert "token_embd.weight" in str(e)


def test_every_tensor_read_checks_memory_first(good, monkeypatch):
    """A projection (Linear.from_gguf) and a raw read (GGUFFile.read) refuse bytes beyond the
    host's memory before reading, as Table.from_gguf does."""
    monkeypatch.setattr(memory, "available_memory", lambda: 100)
    with pytest.raises(GGUFError, match=rf"{TENSOR}.*more than the host's available memory"):
        Linear.from_gguf(good, TENSOR)
    with open_gguf(good) as f, pytest.raises(GGUFError, match="more than the host's available memory"):
        f.read(TENSOR)


def test_a_tensor_without_values_is_a_clear_error(tmp_path):
    """A tensor with a zero dimension: GGUFFile.read says so (NumPy's cast failed on it), and no
    table or projection takes it."""
    path = tmp_path / "z.gguf"
    write_gguf(path, vocab=4)
    patch(path, tensor_info_offsets(path)["dims"] + 8, "Q", 0)  # ne1, the rows
    with open_gguf(path) as f, pytest.raises(GGUFError, match=r"has shape \[256, 0\]: no values"):
        f.read(TENSOR)
    raises_gguf_error(path, "dims and vocab must both be at least 1")


def test_table_larger_than_a_device_buffer(good, monkeypatch):
    monkeypatch.setattr(memory, "device_limits", lambda: {"max_buffer_size": 200})
    raises_gguf_error(good, "largest buffer")


def test_check_at_load_names_the_bad_rows(good):
    at = tensor_info_offsets(good)["data"]
    patch(good, at + 2 * 144 + 3, "B", 0x7C)  # row 2's dmin: f16 exponent all ones (Inf)
    Table.from_gguf(good)  # the default: no check
    with pytest.raises(GGUFError, match=r"1 blocks in 1 rows .*first bad rows: 2$") as e:
        Table.from_gguf(good, check=True)
    assert str(good) in str(e.value) and TENSOR in str(e.value)
    report = check_table(Table.from_gguf(good))
    assert not report.ok and report.bad_rows == [2] and report.bad_blocks == [(2, 0)]


# ------------------------------------------------------------------ any corruption


def ops(size_hint: int):
    """Corruptions, mostly in the first ``size_hint`` bytes (header, metadata, tensor infos)."""
    pos = st.one_of(st.integers(0, size_hint), st.integers(0, 4 * size_hint))
    return st.lists(
        st.one_of(
            st.tuples(st.just("flip"), pos, st.integers(0, 7)),
            st.tuples(st.just("byte"), pos, st.integers(0, 255)),
            st.tuples(
                st.sampled_from(["u32", "u64"]),
                pos,
                st.one_of(st.sampled_from(INTERESTING_U64), st.integers(0, 2**64 - 1)),
            ),
            st.tuples(st.just("truncate"), st.integers(0, 4 * size_hint)),
        ),
        min_size=1,
        max_size=4,
    )


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(qtype=st.sampled_from(["Q4_K", "F16"]), vocab=st.integers(1, 5), ops=ops(400))
def test_any_corruption_is_an_error_or_a_faithful_table(tmp_path, qtype, vocab, ops):
    path = tmp_path / "m.gguf"
    write_gguf(path, qtype, vocab, 256 if qtype == "Q4_K" else 8)
    path.write_bytes(mutate(path.read_bytes(), ops))
    check_outcome(path)
