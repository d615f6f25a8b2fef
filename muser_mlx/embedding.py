"""The lookup: ``embedding(table, ids)`` and ``Embedding``, a drop-in for ``mlx.nn.Embedding``."""

from __future__ import annotations

import logging
from functools import cache
from pathlib import Path

import mlx.core as mx
from mlx import nn
from mlx.utils import tree_map_with_path

from . import backends
from .backends import tuning
from .backends.gather import gather_calls
from .formats import FORMATS
from .gguf import GGUFFile, opened
from .ids import check_device_ids, count_out_of_range, host_ids
from .linear import as_linear
from .quantized import TableModule
from .table import Table

log = logging.getLogger("muser_mlx")

OUTPUT_DTYPES = (mx.float32, mx.float16, mx.bfloat16)


def embedding(
    table: Table,
    ids,
    dtype: mx.Dtype = mx.float32,
    *,
    check_ids: bool = False,
    return_out_of_range: bool = False,
    backend: str = "auto",
) -> mx.array | tuple[mx.array, mx.array]:
    """Rows ``ids`` of ``table``, dequantized: a lazy ``ids.shape + (dims,)`` array in ``dtype``.

    Args:
        table (Table): the quantized table.
        ids: integer token ids of any shape: a Python int or (nested) list, a NumPy array, or an
            ``mx.array``. Float or bool ids raise ``TypeError``.
        dtype (mx.Dtype): ``float32`` (default; bit-identical to gguf-py's dequantization),
            ``float16`` or ``bfloat16``.
        check_ids (bool): host ids (ints, lists, NumPy) are always range-checked before the graph
            is built, raising ``IndexError`` that names the id, its position and the vocabulary.
            An ``mx.array`` is not evaluated unless ``check_ids=True``: by default its ids are
            clamped to ``min(unsigned(id), vocab - 1)``, as the kernels do.
        return_out_of_range (bool): also return how many ids were clamped, as a lazy 0-d
            ``uint32`` ``mx.array`` computed in the same graph (no sync): ``(rows, count)``.
            Host ids are checked, so their count is always 0.
        backend (str): ``"auto"`` (the Metal or CUDA kernel on a GPU default device, else the CPU
            extension's, else ``"ops"``), ``"metal"``, ``"cuda"``, ``"cpu"`` (the CPU extension)
            or ``"ops"`` (plain MLX ops, any device).
    """
    _check_dtype(dtype)
    return _lookup(
        backends.bind(table, dtype, backends.select(backend, table)), table, ids, check_ids, return_out_of_range
    )


def _check_dtype(dtype: mx.Dtype) -> None:
    if dtype not in OUTPUT_DTYPES:
        raise ValueError(f"output dtype must be float32, float16 or bfloat16, got {dtype}")


def _lookup(gather, table: Table, ids, check_ids: bool, return_out_of_range: bool = False):
    """Type and check ``ids`` (see :func:`embedding`; the gather checks an ``mx.array``'s dtype)
    and gather."""
    if not isinstance(ids, mx.array):
        ids = host_ids(ids, table.vocab)
    elif check_ids:
        check_device_ids(ids, table.vocab)
    out = gather(ids)
    return (out, count_out_of_range(ids, table.vocab)) if return_out_of_range else out


class LookupOptions:
    """What a lookup module (:class:`Embedding`, ``distributed.ShardedEmbedding``) was built with:
    its output dtype, held as the empty array ``self["dtype"]`` so that ``Module.set_dtype``
    reaches it, and what an out-of-range ``mx.array`` id does (``self._clamp``)."""

    def _set_lookup_options(self, dtype: mx.Dtype, on_out_of_range: str) -> None:
        _check_dtype(dtype)
        if on_out_of_range not in ("clamp", "raise"):
            raise ValueError(f"on_out_of_range must be 'clamp' or 'raise', got {on_out_of_range!r}")
        self._clamp = on_out_of_range == "clamp"
        self["dtype"] = mx.zeros((0,), dtype)

    def _weight_gather(self):
        """``(weight, ids) -> rows`` for the current weight's shape, dtype and backend (gather_for)."""
        return gather_for(self.qtype, self["weight"].shape, self["dtype"].dtype, self._backend, backends.on_gpu())

    @property
    def dtype(self) -> mx.Dtype:
        """The output dtype (``Module.set_dtype`` changes it)."""
        return self["dtype"].dtype

    @property
    def on_out_of_range(self) -> str:
        """``"clamp"`` or ``"raise"``, fixed at construction."""
        return "clamp" if self._clamp else "raise"


class Embedding(LookupOptions, TableModule):
    """A token embedding whose table stays quantized: a drop-in for ``mlx.nn.Embedding``.

    ``Embedding(num_embeddings, dims, qtype)`` holds a zero table of that many rows of ``qtype``
    bytes, so that a model's ``__init__`` can build it and ``load_weights`` fill it with a GGUF
    tensor's bytes; :meth:`from_gguf`, :meth:`from_table` and :meth:`from_embedding` build a
    filled one. ``weight`` is ``uint8 [num_embeddings, row_bytes]`` and frozen.

    Args:
        num_embeddings (int): rows of the table (the vocabulary).
        dims (int): values per row, a multiple of ``qtype``'s block.
        qtype (str): the GGUF type of the bytes, e.g. ``"Q4_K"`` (see ``muser_mlx.FORMATS``).
        dtype (mx.Dtype): output dtype, ``float32`` (default), ``float16`` or ``bfloat16``. It is
            carried as the empty array ``self["dtype"]`` so that ``Module.set_dtype`` sets it, as it
            sets an ``nn.Embedding``'s.
        on_out_of_range (str): what an ``mx.array`` id outside ``[0, vocab)`` does: ``"clamp"``
            (default; reads row ``min(unsigned(id), vocab - 1)``, lazily; count them with
            :meth:`lookup_with_count`) or ``"raise"`` (evaluate the ids on the host and raise
            ``IndexError``). Host ids (ints, lists, NumPy) always raise.
        backend (str): ``"auto"``, ``"metal"``, ``"cuda"``, ``"cpu"`` or ``"ops"`` (see ``embedding``).

    ``tied`` is True when loaded by ``from_gguf`` from a model file whose LM head is this table
    (it has blocks but no ``output.weight``; logged once at INFO on the ``muser_mlx`` logger),
    False when the model has its own head, None for a file holding only tables (as ``save_gguf``
    writes) or when not loaded from a file (``GGUFFile.tied``).

    Under ``mx.compile`` the ids are tracers that cannot be read on the host: ``"raise"`` (and
    ``check_ids=True``) raise ``ValueError`` there; clamp, and count with :meth:`lookup_with_count`.
    """

    tied: bool | None = None

    def __init__(
        self,
        num_embeddings: int,
        dims: int,
        qtype: str = "Q4_K",
        dtype: mx.Dtype = mx.float32,
        on_out_of_range: str = "clamp",
        backend: str = "auto",
    ):
        super().__init__(num_embeddings, dims, qtype, backend)
        self._set_lookup_options(dtype, on_out_of_range)
        self.freeze()

    @classmethod
    def from_table(cls, table: Table, dtype: mx.Dtype = mx.float32, **kwargs) -> Embedding:
        """An embedding holding ``table``'s bytes (not copied)."""
        return cls._around(table, table.vocab, table.dims, table.qtype, dtype, **kwargs)

    @classmethod
    def from_gguf(
        cls,
        path: str | Path | GGUFFile,
        tensor: str = "token_embd.weight",
        dtype: mx.Dtype = mx.float32,
        check: bool = False,
        **kwargs,
    ) -> Embedding:
        """Load ``tensor`` of the GGUF at ``path`` (or of a file already open, see
        :func:`muser_mlx.gguf.open_gguf`), opening it once; raises ``GGUFError`` on a bad file or
        tensor (with ``check=True`` also on NaN or Inf scales, see :meth:`Table.from_gguf`)."""
        with opened(path) as f:
            module = cls.from_table(Table.from_gguf(f, tensor, check), dtype, **kwargs)
            module.tied = tied_head(f, tensor)
        return module

    @classmethod
    def from_embedding(cls, embedding_or_weight, qtype: str = "Q4_K", dtype: mx.Dtype | None = None, **kwargs):
        """Quantize an ``mlx.nn.Embedding`` (or its float ``weight [num_embeddings, dims]``) to
        ``qtype`` with :func:`muser_mlx.quantize` (for Q4_K llama.cpp's reference quantizer, for the
        other types gguf-py's, byte for byte).
        ``dtype`` defaults to the weight's dtype, so a model's numerics stay as they were."""
        from .quantize import quantize

        weight = embedding_or_weight.weight if isinstance(embedding_or_weight, nn.Module) else embedding_or_weight
        weight = mx.array(weight) if not isinstance(weight, mx.array) else weight
        if dtype is None:
            dtype = weight.dtype if weight.dtype in OUTPUT_DTYPES else mx.float32
        data = quantize(weight, qtype)
        return cls.from_table(Table.from_bytes(data, qtype, weight.shape[1]), dtype, **kwargs)

    @property
    def num_embeddings(self) -> int:
        return self["weight"].shape[0]

    def lookup_with_count(self, x) -> tuple[mx.array, mx.array]:
        """``(self(x), count)``: ``count`` is a lazy 0-d ``uint32`` of the ids that were clamped."""
        return _lookup(self._gather(), self.table, x, not self._clamp, True)

    def _gather(self):
        weight, gather = self["weight"], self._weight_gather()
        return lambda ids: gather(weight, ids)

    def __call__(self, x) -> mx.array:
        # mx.array ids, clamping: what _lookup would do is the gather, so do it at once. One id
        # per evaluation is mostly host time (docs/performance.md, "Compiled small batches"), so
        # this path is a cache hit and, on a GPU, a compiled replay.
        if type(x) is mx.array and self._clamp:
            return self._weight_gather()(self["weight"], x)
        return _lookup(self._gather(), self.table, x, not self._clamp)

    def as_linear(self, x) -> mx.array:
        """The tied LM head: logits ``x @ W.T`` from the quantized table, ``[..., dims]`` ->
        ``[..., num_embeddings]`` in x's dtype (float32, float16 or bfloat16); differentiable in x.
        See :func:`muser_mlx.as_linear`."""
        return as_linear(self.table, x, backend=self._backend)

    def to_lora(self, r: int = 8, scale: float = 20.0, dropout: float = 0.0):
        """mlx-lm's ``LoRAEmbedding`` around this table (``mlx_lm.tuner.utils.linear_to_lora_layers``
        calls it, e.g. for the key ``model.embed_tokens``): the low-rank update is trained, the
        bytes stay frozen; its ``as_linear``, the tied head, adds the update's transpose. Its
        ``fuse`` needs a float weight and does not apply."""
        from mlx_lm.tuner.lora import LoRAEmbedding

        lora = LoRAEmbedding(self.num_embeddings, self.dims, r=r, dropout=dropout, scale=scale)
        lora.embedding = self
        return lora

    def _extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.dims}, qtype={self.qtype}, dtype={self.dtype}"


@cache
def gather_for(qtype: str, shape: tuple[int, int], dtype: mx.Dtype, backend: str, gpu: bool):
    """``(weight, ids) -> rows``: the gather of a ``uint8 shape = [vocab, row_bytes]`` table of
    ``qtype`` into ``dtype`` on ``backend`` as asked (``"auto"`` resolved while the default device
    is, ``gpu``, or is not a GPU: ``backends.chosen``), one for the process per key, taking the
    weight as an argument (a module's weight is replaced by ``update`` and, under ``mx.compile``
    with the state as an input, stands in for other arrays). On a GPU backend it is the gather's
    cached kernel call on the weight's words (``backends.gather``; the device keeps the words of
    each weight, ``kernel_words``), ids of at most ``tuning.COMPILED_IDS`` through its
    ``mx.compile``, replayed per ids shape; no binding is built per call."""
    fmt, (vocab, row_bytes) = FORMATS[qtype], shape
    dims = row_bytes // fmt.block_bytes * fmt.block_values
    backend = backends.chosen(backend, qtype, gpu)
    if backend not in backends.KERNEL_BACKENDS:
        return lambda weight, ids: backends.bind(Table(weight, fmt, dims, vocab), dtype, backend)(ids)
    words_of = backends.BACKENDS[backend].kernel_words
    call, compiled = gather_calls(backends.BACKENDS[backend].gather_kernel, fmt, dims, vocab, dtype)

    def kernel_gather(weight: mx.array, ids: mx.array) -> mx.array:
        return (compiled if ids.size <= tuning.COMPILED_IDS else call)(words_of(weight), ids)

    return kernel_gather


tuning.keeps_decisions(gather_for.cache_clear)  # it holds gather_calls' calls


def tied_head(f, tensor: str) -> bool | None:
    """Whether ``tensor`` of the open GGUF ``f`` (a :class:`muser_mlx.gguf.GGUFFile`) is also
    the model's LM head: the token embedding of a file whose ``tied`` is True (a model without
    ``output.weight``: llama.cpp then uses the embedding); None for a file that holds only tables."""
    tied = f.tied if tensor == "token_embd.weight" or f.tied is None else False
    if tied:
        log.info("%s has no output.weight: the LM head is tied to %s; logits: Embedding.as_linear(x)", f.path, tensor)
    return tied


def quantize_embeddings(model: nn.Module, qtype: str = "Q4_K") -> nn.Module:
    """Replace every ``mlx.nn.Embedding`` in ``model`` by an :class:`Embedding` holding its table
    as ``qtype`` bytes, in place, like ``mlx.nn.quantize`` does for MLX's own format."""

    def swap(_, module):
        return Embedding.from_embedding(module, qtype) if type(module) is nn.Embedding else module

    model.update_modules(tree_map_with_path(swap, model.leaf_modules(), is_leaf=nn.Module.is_module))
    return model
