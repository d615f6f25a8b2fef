"""GGUF metadata values: the fixed-size types, arrays and long strings left in the file
(``ArrayInfo``, ``StringInfo``) and :func:`parse_array`, which reads an array's bytes when asked.

An array is a u32 item type, a u64 count and the items; a string is a u64 length and that many
UTF-8 bytes. Numbers come back as one ``np.ndarray`` over the bytes read, not an object per item.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np
from gguf import GGUFValueType

from .errors import GGUFError

MAX_ARRAY_NESTING = 4
MAX_INLINE_STRING = 1 << 20  # bytes: a longer metadata string stays in the file (StringInfo)

# Each fixed-size value type as a little-endian struct; an array of them reads as np.dtype(format).
SCALARS = {
    GGUFValueType.UINT8: struct.Struct("<B"),
    GGUFValueType.INT8: struct.Struct("<b"),
    GGUFValueType.UINT16: struct.Struct("<H"),
    GGUFValueType.INT16: struct.Struct("<h"),
    GGUFValueType.UINT32: struct.Struct("<I"),
    GGUFValueType.INT32: struct.Struct("<i"),
    GGUFValueType.UINT64: struct.Struct("<Q"),
    GGUFValueType.INT64: struct.Struct("<q"),
    GGUFValueType.FLOAT32: struct.Struct("<f"),
    GGUFValueType.FLOAT64: struct.Struct("<d"),
    GGUFValueType.BOOL: struct.Struct("<?"),
}
U32, U64 = SCALARS[GGUFValueType.UINT32], SCALARS[GGUFValueType.UINT64]
MIN_ITEM_BYTES = {GGUFValueType.STRING: 8, GGUFValueType.ARRAY: 12}  # a length; a type + a count


class ArrayInfo(NamedTuple):
    """A metadata array left in the file: ``count`` items of ``item_type``, whose bytes are
    ``nbytes`` from byte ``offset`` of the file. ``GGUFFile.array(key)`` reads it."""

    item_type: GGUFValueType
    count: int
    offset: int
    nbytes: int


class StringInfo(NamedTuple):
    """A metadata string over ``MAX_INLINE_STRING`` bytes left in the file: ``nbytes`` of UTF-8
    from byte ``offset``. ``GGUFFile.get(key)`` reads it."""

    offset: int
    nbytes: int


def is_integer(value) -> bool:
    """Whether a metadata value is an integer, not a bool (GGUF's bool is a type of its own;
    Python's and NumPy's count as ints)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_number(value) -> bool:
    """Whether a metadata value is a Python int or float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def file_changed(where: str) -> GGUFError:
    return GGUFError(f"{where}: its items no longer fit its bytes; the file changed after it was opened")


def parse_array(buf: bytearray, at: int, item_type: int, count: int, where: str, depth: int = 0) -> tuple:
    """Read ``count`` items of ``item_type`` from ``buf[at:]`` (an array's bytes as read from the
    file): numbers as an ``np.ndarray`` of their type (bools as ``bool``), strings as ``list[str]``,
    arrays as a list of these. Returns (the items, the index after them); ``GGUFError`` where the
    bytes no longer frame the items (the file changed after its header was walked)."""
    scalar = SCALARS.get(item_type)
    if scalar is not None:
        end = at + count * scalar.size
        if end > len(buf):
            raise file_changed(where)
        items = np.frombuffer(buf, np.dtype(scalar.format), count, at)
        return (items != 0 if item_type == GGUFValueType.BOOL else items), end
    if (
        item_type not in MIN_ITEM_BYTES
        or depth >= MAX_ARRAY_NESTING
        or at + MIN_ITEM_BYTES[item_type] * count > len(buf)
    ):
        raise file_changed(where)
    out: list = []
    if item_type == GGUFValueType.STRING:
        unpack, append, size = U64.unpack_from, out.append, len(buf)
        for _ in range(count):
            if at + 8 > size:
                raise file_changed(where)
            n = unpack(buf, at)[0]
            at += 8
            if at + n > size:
                raise file_changed(where)
            append(buf[at : at + n].decode("utf-8", errors="replace"))
            at += n
        return out, at
    for _ in range(count):
        if at + 12 > len(buf):
            raise file_changed(where)
        inner_type, inner_count = U32.unpack_from(buf, at)[0], U64.unpack_from(buf, at + 4)[0]
        items, at = parse_array(buf, at + 12, inner_type, inner_count, where, depth + 1)
        out.append(items)
    return out, at
