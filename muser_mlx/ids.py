"""Token ids: type rules, the host-side range check, and the clamp the kernels apply."""

from __future__ import annotations

import mlx.core as mx
import numpy as np


def _not_integers(dtype) -> TypeError:
    return TypeError(f"token ids must be integers, got dtype {dtype}")


def check_range(ids: np.ndarray, vocab: int) -> None:
    """Raise ``IndexError`` naming the first id outside ``[0, vocab)``, its position and ``vocab``."""
    bad = (ids < 0) | (ids >= vocab)
    if bad.any():
        pos = tuple(int(p) for p in np.argwhere(bad)[0])
        where = pos if ids.ndim > 1 else (pos[0] if pos else "()")
        raise IndexError(
            f"token id {ids[pos if pos else ()]} at position {where} is out of range "
            f"for a vocabulary of {vocab} (valid ids are 0 to {vocab - 1})"
        )


def _holds_bool(ids) -> bool:
    """Whether a Python id or (nested) sequence of them holds a bool: NumPy turns ``[True, 5]``
    into int64 ``[1, 5]``, so the dtype alone does not tell."""
    if isinstance(ids, (bool, np.bool_)):
        return True
    return isinstance(ids, (list, tuple)) and any(_holds_bool(i) for i in ids)


def host_ids(ids, vocab: int) -> mx.array:
    """Python ints, sequences and NumPy arrays: checked here, returned as ``int32`` ids."""
    if not isinstance(ids, np.ndarray) and _holds_bool(ids):
        raise TypeError("token ids must be integers, got a bool among them")
    array = np.asarray(ids)
    if array.size == 0 and array.dtype == np.float64 and not isinstance(ids, np.ndarray):
        array = array.astype(np.int32)  # [] and [[]] carry no dtype of their own
    if array.dtype == object and all(isinstance(i, int) and not isinstance(i, bool) for i in array.flat):
        check_range(array, vocab)  # Python ints beyond int64 / uint64: surely out of range
    if array.dtype.kind not in "iu":
        raise _not_integers(array.dtype)
    check_range(array, vocab)
    return mx.array(array.astype(np.int32))


INTEGER_DTYPES = frozenset((mx.int8, mx.int16, mx.int32, mx.int64, mx.uint8, mx.uint16, mx.uint32, mx.uint64))


def check_dtype(dtype: mx.Dtype) -> None:
    """Raise ``TypeError`` unless ``dtype`` is an integer dtype: every gather checks its ids so."""
    if dtype not in INTEGER_DTYPES:
        raise _not_integers(dtype)


def check_device_ids(ids: mx.array, vocab: int) -> None:
    """``mx.array`` ids, evaluated on the host: ``TypeError`` or ``IndexError`` as for host ids."""
    check_dtype(ids.dtype)
    try:
        host = np.array(ids)
    except ValueError as e:  # MLX: no evaluation during function transformations
        raise ValueError(
            "token ids given as an mx.array cannot be range-checked inside mx.compile (or another "
            "function transformation): the check reads them on the host. Clamp there instead "
            "(Embedding(..., on_out_of_range='clamp'), embedding(..., check_ids=False)) and count "
            "the clamped ids with Embedding.lookup_with_count (embedding(..., return_out_of_range=True))"
        ) from e
    check_range(host, vocab)


def clamp(ids: mx.array, vocab: int) -> mx.array:
    """``min(unsigned(id), vocab - 1)`` as ``uint32``: negative ids wrap high and read the last row."""
    return mx.minimum(ids.astype(mx.uint64), vocab - 1).astype(mx.uint32)


def count_out_of_range(ids: mx.array, vocab: int) -> mx.array:
    """Lazy 0-d ``uint32``: how many ids :func:`clamp` moves (``unsigned(id) >= vocab``)."""
    return (ids.astype(mx.uint64) >= vocab).astype(mx.uint32).sum()
