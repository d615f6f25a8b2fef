"""GGUF files, opened once: ``open_gguf(path)`` reads the header and keeps the one descriptor that
every later read goes through.

The path is opened once, non-blocking (a FIFO cannot block the open), and the descriptor is
refused unless ``fstat`` says it is a regular file; nothing is looked up by path again, so a file
renamed or swapped in afterwards is never read (:mod:`muser_mlx.gguf_io`). The header is walked
once (:mod:`muser_mlx.gguf_header`); tensors and arrays are read on demand from the same
descriptor, so a file that shrinks underneath ends in ``GGUFError`` (a short read), never in
SIGBUS as a memory map would. gguf-py supplies the type constants; its ``GGUFReader`` is the
tests' reference, not used here (it builds a NumPy view per array item: docs/performance.md,
"Our own header reader"; docs/gguf_reader.md).

A split file (``split.count`` parts, as llama.cpp's ``gguf-split`` and gguf-py write them:
``<prefix>-00001-of-0000N.gguf`` and its siblings) is opened by its first part: the other parts
are opened alongside it, the first part's metadata is the file's and every part's tensors are
its tensors, as llama.cpp's model loader takes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .errors import GGUFError
from .formats import FORMATS, Format
from .gguf_header import TensorInfo, read_header
from .gguf_io import FileBytes, open_regular
from .gguf_values import ArrayInfo, StringInfo, file_changed, is_integer, parse_array
from .memory import check_fits

__all__ = [
    "ArrayInfo",
    "GGUFFile",
    "StringInfo",
    "TensorInfo",
    "gatherable_tensors",
    "matrix_tensor",
    "open_gguf",
    "opened",
    "table_tensor",
]

MLX_MAX_DIM = 2**31 - 1  # MLX's shapes are int32
SPLIT_NAME = "{prefix}-{no:05d}-of-{count:05d}.gguf"  # llama.cpp's llama_split_path, part no from 1


class GGUFFile:
    """An open GGUF file: its header, read once, and its descriptor, for reading tensors and
    arrays on demand. A context manager (``with open_gguf(path) as f``); ``close()`` releases
    the descriptor.

    ``metadata`` maps each key to its value: an int, float, bool or str; an :class:`ArrayInfo`
    for an array (read it with :meth:`array`); a :class:`StringInfo` for a string over 1 MiB
    (:meth:`get` reads it). ``tensors`` maps each tensor's name to its :class:`TensorInfo`, in
    file order (a split file's: every part's, part by part; its ``version``, ``alignment`` and
    ``data_offset`` are the first part's). Raises ``FileNotFoundError`` where nothing is at
    ``path``, else ``GGUFError`` naming the file and the problem.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._bytes = open_regular(self.path)
        self._others: list[FileBytes] = []  # a split file's parts after the first
        self._part_of: dict[str, FileBytes] = {}  # the part of each tensor in those
        try:
            header = read_header(self._bytes)
            self.version, self.alignment, self.data_offset = header.version, header.alignment, header.data_offset
            self.metadata: dict = header.metadata
            self.tensors: dict[str, TensorInfo] = header.tensors
            self._open_parts()
        except BaseException:
            self.close()
            raise

    def _open_parts(self) -> None:
        """Open the parts after this first one of a split file and take their tensors;
        ``GGUFError`` for a part other than the first, a name not llama.cpp's, a part missing,
        not of this split or repeating a tensor, or a tensor count other than ``split.tensors.count``."""
        count = _split_key(self.metadata, "split.count", self.path, 1)
        if count == 1:
            return
        first = SPLIT_NAME.format(prefix="", no=1, count=count)
        no = _split_key(self.metadata, "split.no", self.path)
        if no != 0:
            raise GGUFError(f"{self.path}: part {no + 1} of {count} of a split GGUF; open its first part, *{first}")
        if not self.path.name.endswith(first):
            raise GGUFError(
                f"{self.path}: the first of {count} parts of a split GGUF, named <prefix>{first} by llama.cpp"
            )
        prefix = self.path.name[: -len(first)]
        for i in range(1, count):
            path = self.path.with_name(SPLIT_NAME.format(prefix=prefix, no=i + 1, count=count))
            try:
                part = open_regular(path)
            except FileNotFoundError:
                raise GGUFError(f"{self.path}: part {i + 1} of {count}, {path.name}, is not beside it") from None
            self._others.append(part)
            header = read_header(part)
            keys = tuple(_split_key(header.metadata, key, path) for key in ("split.count", "split.no"))
            if keys != (count, i):
                raise GGUFError(
                    f"{path}: split.count and split.no are {keys}; part {i + 1} of {count} needs ({count}, {i})"
                )
            for name, info in header.tensors.items():
                if name in self.tensors:
                    raise GGUFError(f"{path}: tensor {name!r} is in an earlier part too")
                self.tensors[name] = info
                self._part_of[name] = part
        total = _split_key(self.metadata, "split.tensors.count", self.path)
        if total != len(self.tensors):
            raise GGUFError(
                f"{self.path}: split.tensors.count is {total} but the {count} parts hold {len(self.tensors)}"
            )

    @property
    def size(self) -> int:
        """Bytes of the file (a split file's first part) when it was opened."""
        return self._bytes.size

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None

    def get(self, key: str, default=None):
        """``key``'s value (a str over 1 MiB is read now), or ``default`` where it is absent."""
        value = self.metadata.get(key, default)
        if isinstance(value, StringInfo):
            return self._read(value.offset, value.nbytes, f"metadata {key!r}").decode("utf-8", errors="replace")
        return value

    def array(self, key: str):
        """Read the metadata array ``key`` now: numbers as an ``np.ndarray`` of their type, strings
        as ``list[str]`` (invalid UTF-8 replaced), arrays of arrays as lists. ``KeyError`` where
        ``key`` is absent, ``GGUFError`` where it is not an array or the file has changed."""
        info = self.metadata[key]
        where = f"{self.path}: metadata {key!r}"
        if not isinstance(info, ArrayInfo):
            raise GGUFError(f"{where} is not an array but {type(info).__name__} {info!r}")
        items, end = parse_array(
            self._read(info.offset, info.nbytes, f"metadata {key!r}"), 0, info.item_type, info.count, where
        )
        if end != info.nbytes:
            raise file_changed(where)
        return items

    @property
    def tied(self) -> bool | None:
        """Whether this file is a model whose LM head is its token embedding. True for a model
        file (one with blocks: a ``<arch>.block_count`` key or ``blk.*`` tensors) without
        ``output.weight`` (llama.cpp then uses ``token_embd.weight`` as the head); False for a
        model file with its own ``output.weight``; None for a file that holds only tables (as
        :func:`muser_mlx.save_gguf` writes)."""
        arch = self.architecture
        model = (arch is not None and f"{arch}.block_count" in self.metadata) or any(
            name.startswith("blk.") for name in self.tensors
        )
        return ("output.weight" not in self.tensors) if model else None

    def read(self, name: str) -> np.ndarray:
        """Tensor ``name``'s bytes, read now: ``uint8 [rows, row_bytes]`` (``KeyError`` where
        absent; ``GGUFError`` where it holds no bytes or they would not fit in memory). For a
        norm's or a bias's few values: a table's bytes go into MLX memory by ``member_bytes.read``."""
        t = self.tensors[name]
        where = f"{self.path}: tensor {name!r}"
        if t.nbytes == 0:
            raise GGUFError(f"{where} has shape {list(t.shape)}: no values")
        check_fits(t.nbytes, where)
        out = np.empty((t.rows, t.row_bytes), np.uint8)
        self.read_into(name, out)
        return out

    def read_into(self, name: str, out, rows: tuple[int, int] | None = None) -> None:
        """Fill ``out`` (any writable, C-contiguous buffer of exactly tensor ``name``'s bytes: a
        ``bytearray``, a NumPy array, an evaluated ``mx.array``) with them; with ``rows`` =
        ``(start, stop)``, with the bytes of those rows only (``uint8 [stop - start, row_bytes]``,
        one range of the file: a 2-D tensor's rows are contiguous)."""
        t = self.tensors[name]
        start, stop = (0, t.rows) if rows is None else rows
        if not 0 <= start < stop <= t.rows:
            raise ValueError(f"tensor {name!r} has rows [0, {t.rows}); asked for [{start}, {stop})")
        nbytes = (stop - start) * t.row_bytes
        out = memoryview(out)
        if out.readonly or not out.c_contiguous or out.nbytes != nbytes:
            raise ValueError(f"tensor {name!r} needs a writable contiguous buffer of {nbytes} bytes, got {out.nbytes}")
        self._check_open()
        self._part_of.get(name, self._bytes).read_into(
            t.offset + start * t.row_bytes, out.cast("B"), f"tensor {name!r}"
        )

    def _read(self, offset: int, nbytes: int, what: str) -> bytearray:
        self._check_open()
        return self._bytes.read(offset, nbytes, what)

    def _check_open(self) -> None:
        if self._bytes.closed:
            raise ValueError(f"{self.path}: the GGUF file is closed")

    def close(self) -> None:
        for part in (self._bytes, *self._others):
            part.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"GGUFFile({str(self.path)!r}, architecture={self.architecture!r}, "
            f"{len(self.metadata)} keys, {len(self.tensors)} tensors)"
        )


def _split_key(metadata: dict, key: str, path: Path, default: int | None = None) -> int:
    """A ``split.*`` count or index of ``metadata`` (``default`` where absent and given);
    ``GGUFError`` unless an integer of at least 1 (``split.no``: 0)."""
    value, low = metadata.get(key, default), 0 if key == "split.no" else 1
    if not is_integer(value) or value < low:
        raise GGUFError(f"{path}: metadata {key} is {value!r}; an integer of at least {low} is needed")
    return int(value)


def open_gguf(path: str | Path) -> GGUFFile:
    """Open the GGUF at ``path`` and read its header once (see :class:`GGUFFile`)."""
    return GGUFFile(path)


@contextmanager
def opened(source: str | Path | GGUFFile) -> Iterator[GGUFFile]:
    """``source`` if it is an open :class:`GGUFFile` (left open), else the file at that path,
    opened for the ``with`` block and closed after it."""
    if isinstance(source, GGUFFile):
        yield source
        return
    with open_gguf(source) as f:
        yield f


def _table_problem(t: TensorInfo, layout: str = "an embedding table is [dims, vocab]") -> str | None:
    """Why tensor ``t`` cannot be a Table (None where it can); ``layout`` says what its shape
    should be."""
    if t.qtype not in FORMATS:
        return f"has type {t.qtype}, not supported yet; supported: {', '.join(FORMATS)}"
    if len(t.shape) != 2:
        return f"has shape {list(t.shape)}; {layout} in ggml order"
    if min(t.shape) < 1:
        return f"has shape {list(t.shape)}; dims and vocab must both be at least 1"
    if t.rows > MLX_MAX_DIM or t.row_bytes > MLX_MAX_DIM:
        return f"is {t.rows} rows of {t.row_bytes} bytes; MLX's array dimensions stop at 2**31 - 1 ({MLX_MAX_DIM})"
    return None


def matrix_tensor(f: GGUFFile, name: str, layout: str = "a projection is [in, out]") -> TensorInfo:
    """Tensor ``name`` of ``f``, checked to be a table: 2-D, a supported type, a shape MLX can
    hold (``GGUFError`` naming the file, the tensor and the rule; ``layout`` as the shape's)."""
    t = f.tensors.get(name)
    if t is None:
        raise GGUFError(f"{f.path}: tensor {name!r} is not in the file")
    problem = _table_problem(t, layout)
    if problem:
        raise GGUFError(f"{f.path}: tensor {name!r} {problem}")
    return t


# The tensors whose rows are the model's width, <arch>.embedding_length (a projection's rows are
# its input's width, e.g. the feed-forward length for ffn_down).
MODEL_WIDTH_TENSORS = ("token_embd.weight", "output.weight")


def table_tensor(f: GGUFFile, name: str = "token_embd.weight") -> tuple[TensorInfo, Format]:
    """Tensor ``name`` of ``f`` and its format, checked to be a table (:func:`matrix_tensor`; for
    the token embedding and the LM head ``dims`` equal to ``<arch>.embedding_length`` where that
    is set)."""
    where = f"{f.path}: tensor {name!r}"
    if name not in f.tensors:
        raise GGUFError(f"{where} is not in the file; embedding-like tensors: {', '.join(embedding_like(f)) or 'none'}")
    t = matrix_tensor(f, name, "an embedding table is [dims, vocab]")
    problem = width_problem(f, t)
    if problem:
        raise GGUFError(f"{where} {problem}")
    return t, FORMATS[t.qtype]


def width_problem(f: GGUFFile, t: TensorInfo) -> str | None:
    """For the token embedding and the LM head, why their dims are not ``<arch>.embedding_length``
    where that is set (None where they are, and for every other tensor)."""
    arch = f.architecture
    width = f.metadata.get(f"{arch}.embedding_length") if arch and t.name in MODEL_WIDTH_TENSORS else None
    if width is not None and width != t.shape[0]:
        return f"has dims {t.shape[0]} but the metadata {arch}.embedding_length is {width!r}"
    return None


def embedding_like(f: GGUFFile) -> list[str]:
    """Names of the 2-D tensors that could be a token-embedding table."""
    names = [name for name, t in f.tensors.items() if len(t.shape) == 2]
    hinted = [n for n in names if "embd" in n or "embed" in n or n == "output.weight"]
    return hinted or names


class Gatherable(NamedTuple):
    """A tensor that can serve as a table: ``dims`` values per row, ``vocab`` rows, ``nbytes`` in all."""

    name: str
    qtype: str
    dims: int
    vocab: int
    nbytes: int


def gatherable_tensors(source: str | Path | GGUFFile) -> list[Gatherable]:
    """Every tensor (in file order) that ``Table.from_gguf`` can load: 2-D, of a supported
    format, a shape MLX can hold, and for the token embedding and the LM head the model's width."""
    with opened(source) as f:
        return [
            Gatherable(t.name, t.qtype, *t.shape, t.nbytes)
            for t in f.tensors.values()
            if _table_problem(t) is None and width_problem(f, t) is None
        ]
