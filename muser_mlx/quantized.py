"""``TableModule``: an ``mlx.nn.Module`` whose ``weight`` is a GGUF tensor's bytes, the common part
of :class:`~muser_mlx.Embedding` and :class:`~muser_mlx.Linear`."""

from __future__ import annotations

from contextvars import ContextVar
from fractions import Fraction

import mlx.core as mx
from mlx import nn

from . import backends
from .formats import Format, get_format
from .gguf import MLX_MAX_DIM
from .gguf_values import is_integer
from .memory import check_fits
from .table import Table

# Set while from_table builds a module around bytes already read: its zero table is replaced before
# anything can read it, so it takes no memory, and the bytes it will hold took theirs already
# (checked against what was left, they would be counted twice).
_AROUND_BYTES: ContextVar[bool] = ContextVar("around_bytes", default=False)


class TableModule(nn.Module):
    """``weight`` is ``uint8 [rows, row_bytes]``: row ``i`` is the tensor's row ``i`` (a token for
    an embedding, an output feature for a projection) in its GGUF blocks, frozen. The format is
    fixed at construction; ``rows`` and ``dims`` are read off ``weight.shape``, so a weight that
    ``load_weights`` or ``update`` puts in is what every size and every call sees.

    A weight that is not such bytes (a float matrix, another row width) raises ``ValueError``
    naming the module the moment it is set, whichever way it is set. ``backend`` (``"auto"``, or
    one :func:`muser_mlx.backends.select` takes) is checked at construction and kept.
    """

    def __init__(self, rows: int, dims: int, qtype: str, backend: str = "auto"):
        backends.select(backend)
        super().__init__()
        fmt = get_format(qtype)
        name = type(self).__name__
        if not (is_integer(rows) and is_integer(dims)) or rows < 1 or dims < 1 or dims % fmt.block_values:
            raise ValueError(
                f"{name} needs rows >= 1 and dims a positive multiple of the {qtype} block "
                f"of {fmt.block_values} values, both integers, got rows={rows!r}, dims={dims!r}"
            )
        rows, row_bytes = int(rows), fmt.row_bytes(int(dims))
        if rows > MLX_MAX_DIM or row_bytes > MLX_MAX_DIM:
            raise ValueError(f"{name} of {rows} rows of {row_bytes} bytes: MLX's dimensions stop at 2**31 - 1")
        # A zero table of the right byte shape, lazy: never allocated unless read before a load, and
        # then it must fit (MLX dies on an allocation the host cannot make).
        if not _AROUND_BYTES.get():
            check_fits(rows * row_bytes, f"{name}'s table of {rows} rows of {row_bytes} bytes", MemoryError)
        self._format, self._backend = fmt, backend
        self._source = "memory"
        self.weight = mx.zeros((rows, row_bytes), mx.uint8)

    def __setattr__(self, key, value):
        # Module.__setattr__ sends arrays, dicts, lists and tuples to __setitem__ and keeps anything
        # else as a plain attribute in place of the table: a weight always goes to the check.
        if key == "weight":
            self[key] = value
        else:
            super().__setattr__(key, value)

    def __setitem__(self, key, value):
        # update(), load_weights() and __setattr__ all set the weight through here.
        if key == "weight":
            value = self._checked_weight(value)
            self._source = "memory"
        super().__setitem__(key, value)

    def _checked_weight(self, value) -> mx.array:
        fmt = self._format
        if (
            isinstance(value, mx.array)
            and value.dtype == mx.uint8
            and value.ndim == 2
            and value.shape[0] >= 1
            and value.shape[1] >= 1
            and value.shape[1] % fmt.block_bytes == 0
        ):
            return value
        got = (
            f"{str(value.dtype).rsplit('.', 1)[-1]} {list(value.shape)}"
            if isinstance(value, mx.array)
            else type(value).__name__
        )
        hint = ""
        if isinstance(value, mx.array) and mx.issubdtype(value.dtype, mx.floating):
            hint = (
                f"; a float matrix belongs in mlx.nn.{type(self).__name__}, or quantize it with "
                f"{type(self).__name__}.from_{type(self).__name__.lower()}(..., qtype={fmt.name!r})"
            )
        here = repr(self) if "weight" in self else type(self).__name__
        raise ValueError(
            f"{here}: weight must be {fmt.name} bytes as stored in a GGUF file, uint8 [rows, k * {fmt.block_bytes}] "
            f"({fmt.block_bytes} bytes per {fmt.block_values} values), got {got}{hint}"
        )

    @property
    def format(self) -> Format:
        return self._format

    @property
    def qtype(self) -> str:
        """The GGUF type of the bytes, e.g. ``"Q4_K"``, fixed at construction."""
        return self._format.name

    @property
    def rows(self) -> int:
        return self["weight"].shape[0]

    @property
    def dims(self) -> int:
        """Values per row (input features of a projection, the width of an embedding)."""
        fmt = self._format
        return self["weight"].shape[1] // fmt.block_bytes * fmt.block_values

    @property
    def bits(self) -> Fraction:
        """For mlx-lm's parameter count (``mlx_lm.utils.get_total_parameters``), which takes
        ``weight.size * 32 // bits`` values from a quantized module, its weight being ``uint32`` words:
        here ``32 * block_bytes / block_values``, so that the count is ``rows * dims``. The bits
        stored per value are a quarter of it (8.5 for Q8_0, 4.5 for Q4_K)."""
        return Fraction(32 * self._format.block_bytes, self._format.block_values)

    @property
    def table(self) -> Table:
        """The current weight as a :class:`Table` (a view: no bytes are copied)."""
        weight = self["weight"]
        return Table(weight, self._format, self.dims, weight.shape[0], self._source)

    @property
    def backend(self) -> str:
        """The backend asked for at construction; ``"auto"`` picks per call, by the default device."""
        return self._backend

    def _resolved_backend(self, backend: str) -> str:
        """``backends.select(backend)`` for this format on the default device, per call: a test
        of the device and a cache hit (``backends.chosen``)."""
        return backends.chosen(backend, self._format.name, backends.on_gpu())

    @classmethod
    def _around(cls, table: Table, *args, **kwargs) -> TableModule:
        """``cls(*args, **kwargs)`` holding ``table``'s bytes, its zero table not checked against memory."""
        token = _AROUND_BYTES.set(True)
        try:
            module = cls(*args, **kwargs)
        finally:
            _AROUND_BYTES.reset(token)
        if table.format is not module._format:
            raise ValueError(f"{module!r} holds {module.qtype} bytes; the table is {table.qtype}")
        module.weight = table.data
        module._source = table.source
        return module
