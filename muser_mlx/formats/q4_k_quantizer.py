"""ggml's reference Q4_K quantizer, ``quantize_row_q4_K_ref``, byte for byte.

It is what ``llama-quantize`` runs for Q4_K tensors when no importance matrix is given. Every
float operation is float32 and in the C code's order (sequential sums, ggml's ``nearest_int``,
round-to-nearest-even f16), vectorized across all 32-value sub-blocks of a chunk of rows.
"""

from __future__ import annotations

import numpy as np
from gguf import QK_K  # values per super-block (all K-quants)

f32 = np.float32


_MAGIC = f32(12582912.0)  # 1.5 * 2**23, float bits 0x4B400000


def _nearest_int(t: np.ndarray) -> np.ndarray:
    """ggml's nearest_int as int32: t + 1.5*2**23 in float32 leaves round-half-even(t) + 2**22
    in the low 23 mantissa bits; read them back. Bit-exact also where |t| > 2**22 - 1."""
    bits = (t + _MAGIC).view(np.int32)
    bits &= 0x7FFFFF
    bits -= 0x400000
    return bits


def _level(t: np.ndarray, nmax: int) -> np.ndarray:
    """MAX(0, MIN(nmax, nearest_int(t))) as float32: the low 23 bits m of t + 1.5*2**23 under
    the exponent of 2**23 form the float 2**23 + m = nearest_int(t) + 1.5*2**23 exactly."""
    v = t + _MAGIC
    bits = v.view(np.int32)
    bits &= 0x7FFFFF
    bits |= 0x4B000000
    v -= _MAGIC
    np.maximum(v, f32(0), out=v)
    return np.minimum(v, f32(nmax), out=v)


def _seq_sum(a: np.ndarray) -> np.ndarray:
    """[32, n] -> [n]: a[0] + a[1] + ... + a[31] left to right in float32, as the C loops
    sum (NumPy's own .sum() is pairwise and would round differently)."""
    s = a[0].copy()
    for row in a[1:]:
        s += row
    return s


def _weighted_sq_err(w, scale, L, mn, x):
    """sum_i w*(scale*L + min - x)^2 in the C order; w, L, x [32, n], scale, min [n]."""
    diff = scale * L
    diff += mn
    diff -= x
    diff *= diff
    diff *= w
    return _seq_sum(diff)


def _make_qkx2_quants(x, w, nmax: int, rmin: float, rdelta: float, nstep: int):
    """ggml's make_qkx2_quants (use_mad=false) on n sub-blocks at once.

    x, w: [32, n] float32, one column per sub-block. Returns (scale [n], the_min [n],
    L [32, n] float32 levels) so that x ~= scale*L - the_min. The search tries
    iscale = (rmin + rdelta*is + nmax)/(max - min) for is = 0..nstep, fits scale and min
    by weighted least squares on each candidate L, keeps the lowest weighted error.
    """
    mn = np.minimum(x.min(axis=0), f32(0))  # [n]; min is clamped to <= 0
    mx = x.max(axis=0)
    flat = mx == mn  # C returns scale 0, L = 0 for these
    sum_w = _seq_sum(w)
    sum_x = _seq_sum(w * x)

    iscale = f32(nmax) / (mx - mn)
    scale = f32(1) / iscale
    t = x - mn
    t *= iscale
    L = _level(t, nmax)
    best = _weighted_sq_err(w, scale, L, mn, x)
    for step in range(nstep + 1):
        iscale = (f32(rmin) + f32(rdelta) * f32(step) + f32(nmax)) / (mx - mn)
        t = x - mn
        t *= iscale
        La = _level(t, nmax)
        wl = w * La
        sum_l, sum_l2, sum_xl = _seq_sum(wl), _seq_sum(wl * La), _seq_sum(wl * x)
        D = sum_w * sum_l2 - sum_l * sum_l
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / D
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
        pos = this_min > 0  # a positive min is not allowed: refit the scale alone
        this_scale = np.where(pos, sum_xl / sum_l2, this_scale)
        this_min = np.where(pos, f32(0), this_min)
        cur = _weighted_sq_err(w, this_scale, La, this_min, x)
        better = (D > 0) & (cur < best)
        L = np.where(better, La, L)
        best = np.where(better, cur, best)
        scale = np.where(better, this_scale, scale)
        mn = np.where(better, this_min, mn)
    scale = np.where(flat, f32(0), scale)
    L = np.where(flat, f32(0), L)
    return scale, -mn, L


def quantize_q4_k(x: np.ndarray) -> np.ndarray:
    """ggml quantize_row_q4_K_ref. x: [rows, cols] finite float32 -> uint8 [rows, row_bytes], each
    row its cols / 256 blocks of 144 bytes.

    Block of 256 values = 8 sub-blocks of 32; value = d*sc[j]*q - dmin*m[j]:
      bytes   0:2   d      f16, super-scale of the 6-bit sub-block scales sc[0..7]
      bytes   2:4   dmin   f16, super-scale of the 6-bit sub-block mins   m[0..7]
      bytes   4:16  scales sc and m, 6 bits each, packed into 12 bytes (diagram below)
      bytes  16:144 qs     4-bit q: byte 32*g + l = q[64g + l] | q[64g + 32 + l] << 4
    """
    nb = x.size // QK_K
    xs = np.ascontiguousarray(x.reshape(-1, 32).T)  # [32, 8*nb]: column s = sub-block s
    with np.errstate(all="ignore"):  # flat / all-zero sub-blocks divide by 0; masked later
        av_x = np.sqrt(_seq_sum(xs * xs) / f32(32))  # [8*nb]
        w = np.abs(xs)
        w += av_x  # weights[l] = av_x + |x[l]|
        scales, mins, L = _make_qkx2_quants(xs, w, nmax=15, rmin=-1.0, rdelta=0.1, nstep=20)
        scales, mins = scales.reshape(nb, 8), mins.reshape(nb, 8)

        max_scale = np.zeros(nb, np.float32)  # C: running `if (v > max) max = v` from 0
        max_min = np.zeros(nb, np.float32)
        for j in range(8):
            max_scale = np.where(scales[:, j] > max_scale, scales[:, j], max_scale)
            max_min = np.where(mins[:, j] > max_min, mins[:, j], max_min)
        inv_scale = np.where(max_scale > 0, f32(63) / max_scale, f32(0))[:, None]
        inv_min = np.where(max_min > 0, f32(63) / max_min, f32(0))[:, None]
        # uint8_t ls = nearest_int(..): keep the low byte, then MIN(63, ls)
        ls = np.minimum(_nearest_int(inv_scale * scales) & 0xFF, 63).astype(np.uint8)  # [nb, 8]
        lm = np.minimum(_nearest_int(inv_min * mins) & 0xFF, 63).astype(np.uint8)
        d = (max_scale / f32(63)).astype("<f2")  # [nb]
        dmin = (max_min / f32(63)).astype("<f2")

        # Re-derive the levels from the rounded scales; where d*sc == 0 the C code keeps
        # the levels that make_qkx2_quants chose.
        d_sub = (d.astype(np.float32)[:, None] * ls).reshape(-1)  # [8*nb]
        dm_sub = (dmin.astype(np.float32)[:, None] * lm).reshape(-1)
        requant = _level((xs + dm_sub) / d_sub, 15)  # [32, 8*nb]
        L = np.where(d_sub != 0, requant, L).astype(np.uint8)

    # 6-bit scales sc0..7 (A..H) and mins m0..7 (a..h) in 12 bytes, bit 7 first; a letter
    # stands for one bit of that value:
    #   byte 0  EEAAAAAA  ..  byte 3  HHDDDDDD   sc0..3, high 2 bits of sc4..7 on top
    #   byte 4  eeaaaaaa  ..  byte 7  hhdddddd   m0..3,  high 2 bits of m4..7 on top
    #   byte 8  eeeeEEEE  ..  byte 11 hhhhHHHH   low 4 bits of m4..7 | low 4 bits of sc4..7
    packed = np.empty((nb, 12), np.uint8)
    packed[:, 0:4] = ls[:, 0:4] | (ls[:, 4:8] >> 4) << 6
    packed[:, 4:8] = lm[:, 0:4] | (lm[:, 4:8] >> 4) << 6
    packed[:, 8:12] = (ls[:, 4:8] & 0xF) | (lm[:, 4:8] & 0xF) << 4

    q = L.T.reshape(nb, 4, 2, 32)  # [block, 64-value group g, half, l]
    qs = (q[:, :, 0] | q[:, :, 1] << 4).reshape(nb, 128)

    out = np.empty((nb, 144), np.uint8)
    out[:, 0:2] = d.view(np.uint8).reshape(nb, 2)
    out[:, 2:4] = dmin.view(np.uint8).reshape(nb, 2)
    out[:, 4:16] = packed
    out[:, 16:] = qs
    return out.reshape(x.shape[0], -1)
