// CUDA dialect for the shared kernel source (the header of mx.fast.cuda_kernel; MLX's own
// header before it brings cuda_fp16.h, cuda_bf16.h and the fixed-width integer types).
#define MUSER_FN __device__ __forceinline__
#define MUSER_LOCAL
// A read-only table at namespace scope (the IQ grids, kernels/iq*_grid.h): global memory, read
// through the read-only data cache, not constant memory, which serves a warp's 32 distinct grid
// points one at a time; the heads read a copy in shared memory (lanes_cuda.h;
// docs/performance.md, "Grid memory").
#define MUSER_CONSTANT __device__ const

MUSER_FN float muser_f16_bits_to_float(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }
MUSER_FN float muser_f32_bits_to_float(uint32_t bits) { return __uint_as_float(bits); }

// The table's bytes from the words the gather is given (backends/gather.py, table_words).
template <typename T>
MUSER_FN const uint8_t* muser_bytes(const T* p) { return reinterpret_cast<const uint8_t*>(p); }

// 0x4B000000 | byte k of w (k = 0..3): the byte in the mantissa of 2^23, one byte permute (PRMT).
MUSER_FN uint32_t muser_mantissa_byte(uint32_t w, int k) { return __byte_perm(w, 0x4B000000u, 0x7540u | k); }
// Bytes 1 and 3 of w as bytes 0 and 2 of 16-bit lanes (format_tq1_0.h: trits), and byte 1 of each
// 16-bit lane of even and odd as bytes 0, 2 and 1, 3: one byte permute each.
MUSER_FN uint32_t muser_odd_bytes(uint32_t w) { return __byte_perm(w, 0u, 0x4341u); }
MUSER_FN uint32_t muser_lane_high_bytes(uint32_t even, uint32_t odd) { return __byte_perm(even, odd, 0x7351u); }
// 0xFF in each byte of w whose top bit is set, 0 in the others: one byte permute in its sign mode
// (selector nibbles 8 + k: byte k's top bit copied through it), which __byte_perm does not give.
MUSER_FN uint32_t muser_sign_bytes(uint32_t w) {
  uint32_t r;
  asm("prmt.b32 %0, %1, 0, 0xBA98;" : "=r"(r) : "r"(w));
  return r;
}
// Byte k: byte (nibble k of sel) & 7 of hi:lo (0-3 lo's, 4-7 hi's): one byte permute
// (format_iq_selectors.h: selected_word).
MUSER_FN uint32_t muser_select_bytes(uint32_t lo, uint32_t hi, uint32_t sel) { return __byte_perm(lo, hi, sel); }
// Byte k of lo, with byte k of hi above it (hi's bytes below 128): one byte permute, its top two
// bytes the top bit of hi's byte k, 0, copied through them in the sign mode.
MUSER_FN uint32_t muser_byte_pair(uint32_t lo, uint32_t hi, uint32_t k) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(0xCC40u + 0x1111u * k));
  return r;
}

// A table row of whole 4-byte words, as its start and a byte offset into it (bytedot.h's and mma.h's rows
// where a format's blocks are not whole words): where a load lies off a word boundary is then a
// function of the offset, the same for each of a warp's rows, not worked out again per row from a
// 64-bit address (TQ2_0's loop: 738 PTX instructions per step of 8 rows against 855;
// docs/performance.md, "Aligned loads"). The loads below take it wherever they take a byte pointer.
struct muser_row {
  const uint8_t* start;  // 4-byte aligned
  uint32_t offset;
  muser_row() = default;
  MUSER_FN muser_row(const uint8_t* row, uint32_t k = 0) : start(row), offset(k) {}
  MUSER_FN muser_row operator+(uint32_t k) const { return muser_row{start, offset + k}; }
  MUSER_FN uint8_t operator[](uint32_t k) const { return start[offset + k]; }
};
#define MUSER_ROW
template <typename P>
MUSER_FN P muser_address(P p) { return p; }
MUSER_FN const uint8_t* muser_address(muser_row p) { return p.start + p.offset; }
// p's bytes past a 4-byte boundary, and the aligned word that holds p's first byte, given them.
template <typename P>
MUSER_FN uint32_t muser_misalignment(P p) { return uint32_t(reinterpret_cast<size_t>(p) & 3); }
MUSER_FN uint32_t muser_misalignment(muser_row p) { return p.offset & 3; }
template <typename P>
MUSER_FN const uint32_t* muser_word_of(P p, uint32_t misalignment) {
  return reinterpret_cast<const uint32_t*>(p - misalignment);
}
MUSER_FN const uint32_t* muser_word_of(muser_row p, uint32_t) {
  return reinterpret_cast<const uint32_t*>(p.start) + p.offset / 4;
}

// W = 1, 2 or 4 little-endian words from p, aligned to 4W bytes: one load instruction.
template <int W>
struct muser_words;
template <>
struct muser_words<1> {
  template <typename P>
  static MUSER_FN void load(P p, uint32_t* w) { w[0] = *reinterpret_cast<const uint32_t*>(muser_address(p)); }
};
template <>
struct muser_words<2> {
  template <typename P>
  static MUSER_FN void load(P p, uint32_t* w) {
    uint2 v = *reinterpret_cast<const uint2*>(muser_address(p));
    w[0] = v.x, w[1] = v.y;
  }
};
template <>
struct muser_words<4> {
  template <typename P>
  static MUSER_FN void load(P p, uint32_t* w) {
    uint4 v = *reinterpret_cast<const uint4*>(muser_address(p));
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  }
};

template <int W, typename P>
MUSER_FN void muser_load_words(P p, uint32_t* w) { muser_words<W>::load(p, w); }

// W little-endian words that start shift / 8 bytes into the aligned word *aligned: the W + 1
// aligned words from there (where shift is 0, the last of the W twice) joined by funnel shifts.
template <int W>
MUSER_FN void muser_funnel_words(const uint32_t* aligned, uint32_t shift, uint32_t* w) {
  uint32_t words[W + 1];
  for (int k = 0; k < W; ++k) words[k] = aligned[k];
  words[W] = aligned[shift ? W : W - 1];
  for (int k = 0; k < W; ++k) w[k] = __funnelshift_r(words[k], words[k + 1], shift);
}

// W little-endian words from a 2-byte-aligned p. Where the lanes of a warp share p's alignment
// (UNIFORM: formats.h), a branch on it: W 4-byte loads where p is 4-byte aligned, else the W + 1
// aligned words from p - 2 joined by funnel shifts of 16 bits. Otherwise without a branch: the
// W + 1 aligned words from p - (p & 2) (where p is 4-byte aligned, the last of the W twice) joined
// by funnel shifts of 8 * (p & 2) bits, so that lanes of either alignment load together; a branch
// splits a warp whose blocks alternate (Q8_0's 34 bytes, Q4_0's 18) into two rounds of loads, and
// measured 1.3-1.9x slower in kernels/mma.h (H200), while in the gather's Q6_K warps (one 210-byte
// block each) the branch measured 3-6% faster than the branch-free loads. Each word loaded holds
// wanted bytes: no load reaches a page they are not on.
template <int W, bool UNIFORM, typename P>
MUSER_FN void muser_load_words_at2(P p, uint32_t* w) {
  const uint32_t shift = (muser_misalignment(p) & 2) * 8;  // 0 or 16
  if (UNIFORM && shift == 0) {
    const uint32_t* aligned = muser_word_of(p, 0);
    for (int k = 0; k < W; ++k) w[k] = aligned[k];
  } else if (UNIFORM) {
    const uint32_t* aligned = muser_word_of(p, 2);
    for (int k = 0; k < W; ++k) w[k] = __funnelshift_r(aligned[k], aligned[k + 1], 16);
  } else {
    muser_funnel_words<W>(muser_word_of(p, shift / 8), shift, w);
  }
}

// W little-endian words from any p, as muser_load_words_at2 without UNIFORM: 2W + 1 instructions
// where byte loads take 8W (MXFP4's 17-byte blocks; docs/performance.md, "Aligned loads").
template <int W, typename P>
MUSER_FN void muser_load_words_at1(P p, uint32_t* w) {
  const uint32_t shift = muser_misalignment(p) * 8;
  muser_funnel_words<W>(muser_word_of(p, shift / 8), shift, w);
}

template <typename P>
MUSER_FN uint32_t muser_load_u16(P p) { return *reinterpret_cast<const uint16_t*>(muser_address(p)); }

// format_value_tables.h's table_lookup, a word of 4 bytes (each below 16) per 4 byte permutes
// (PRMT; one packs the selector), after ggml's get_int_from_table_16: the bytes packed into the
// nibbles of a selector pick their entries from each 8-byte half of the table lo | hi << 64, and
// bit 3 of each byte picks the half. The shared loop spends about 12 instructions per byte on 64-bit shifts.
#define MUSER_TABLE_BYTES
#define MUSER_TABLE_WORDS 1
template <int WORDS>
MUSER_FN void muser_table_bytes(uint64_t lo, uint64_t hi, uint32_t* w) {
  for (int c = 0; c < WORDS; ++c) {
    const uint32_t q = w[c];
    const uint32_t s = __byte_perm(q | (q >> 4), 0, 0x0020u);  // nibble k: byte k of q
    const uint32_t low = __byte_perm(uint32_t(lo), uint32_t(lo >> 32), s & 0x7777u);
    const uint32_t high = __byte_perm(uint32_t(hi), uint32_t(hi >> 32), s & 0x7777u);
    w[c] = __byte_perm(low, high, 0x3210u | ((s & 0x8888u) >> 1));
  }
}

// The same for a word q of eight codes (two per byte): the levels of its low nibbles to *low
// (byte k: byte k's), of its high nibbles to *high, looking the codes up in q's order and
// regrouping the results by two more permutes (ggml's get_int_from_table_16): 13 instructions per
// 8 values, where splitting the nibbles and then muser_table_bytes take about 23.
#define MUSER_TABLE_NIBBLES
MUSER_FN void muser_table_nibbles(uint64_t lo, uint64_t hi, uint32_t q, uint32_t* low, uint32_t* high) {
  const uint32_t codes = q & 0x77777777u;                          // code k's byte in its half
  const uint32_t halves = 0x32103210u | ((q & 0x88888888u) >> 1);  // byte k, or k + 4: the high half
  uint32_t v[2];  // the levels of codes 4h .. 4h + 3 (bytes 2h, 2h + 1 of q, low nibble first)
  for (int h = 0; h < 2; ++h) {
    const uint32_t a = __byte_perm(uint32_t(lo), uint32_t(lo >> 32), codes >> (16 * h));
    const uint32_t b = __byte_perm(uint32_t(hi), uint32_t(hi >> 32), codes >> (16 * h));
    v[h] = __byte_perm(a, b, halves >> (16 * h));
  }
  *low = __byte_perm(v[0], v[1], 0x6420u);
  *high = __byte_perm(v[0], v[1], 0x7531u);
}

// N values to dst as T (float, __half or __nv_bfloat16, rounded to nearest): 16-byte stores where
// N and dst's alignment allow (the output buffer is aligned; the row offset decides).
template <int N, typename T>
MUSER_FN void muser_store(T* dst, const float* v) {
  const int per = 16 / int(sizeof(T));
  if (N % per == 0 && (reinterpret_cast<size_t>(dst) & 15) == 0) {
    for (int c = 0; c < N; c += per) {
      uint4 chunk;
      T* ts = reinterpret_cast<T*>(&chunk);
      for (int k = 0; k < per; ++k) {
        ts[k] = static_cast<T>(v[c + k]);
      }
      *reinterpret_cast<uint4*>(dst + c) = chunk;
    }
  } else {
    for (int k = 0; k < N; ++k) {
      dst[k] = static_cast<T>(v[k]);
    }
  }
}
