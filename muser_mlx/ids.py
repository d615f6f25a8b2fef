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


def _leaves(ids) -> list:
    """The items of a Python id or (nested) list or tuple of them that are not lists or tuples,
    walked without recursion (a deep nesting is NumPy's to refuse)."""
    leaves, stack = [], [ids]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            leaves.append(item)
    return leaves


def host_ids(ids, vocab: int) -> mx.array:
    """Python ints, sequences and NumPy arrays: checked here, returned as ``int32`` ids."""
    leaves = None if isinstance(ids, np.ndarray) else _leaves(ids)
    # NumPy turns [True, 5] into int64 [1, 5]: the dtype alone does not tell
    if leaves is not None and any(
        isinstance(i, (bool, np.bool_)) or (isinstance(i, np.ndarray) and i.dtype == np.bool_) for i in leaves
    ):
        raise TypeError("token ids must be integers, got a bool among them")
    array = np.asarray(ids)
    if array.size == 0 and array.dtype == np.float64 and leaves is not None:
        array = array.astype(np.int32)  # [] and [[]] carry no dtype of their own
    if array.dtype.kind not in "iu" and leaves and all(type(i) is int for i in leaves):
        # Python ints past int64 (NumPy makes [0, 2**63] float64, [0, 2**64] objects): out of range
        check_range(np.array(ids, dtype=object), vocab)
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
