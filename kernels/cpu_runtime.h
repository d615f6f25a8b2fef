// Warps on the host (tests only): 32 lanes executed as 32 concurrent threads, so the cross-lane
// sum of the shared kernel source runs as written. Included by lanes_cpu.h and by the
// Metal-language shim (muser_bfloat16 lives in bfloat16_cpu.h).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace muser_cpu {

enum { warp_lanes = 32 };

// A barrier of `size` threads. A thread that waits 10 s marks it diverged (its threads disagree
// on how many barriers they reach) and releases everyone, so a bug fails, not hangs.
struct Barrier {
  std::mutex mutex;
  std::condition_variable cv;
  uint32_t arrived = 0, generation = 0;
  bool diverged = false;

  void wait(uint32_t size) {
    std::unique_lock<std::mutex> lock(mutex);
    uint32_t gen = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return generation != gen || diverged; })) {
      diverged = true;
      cv.notify_all();
    }
  }
};

// One warp: a slot per lane and a barrier.
struct Warp {
  Barrier sync;
  float slots[warp_lanes];
  uint32_t words[warp_lanes];            // lane_xor
  uint32_t fragments[warp_lanes][6];     // warp_mma: each lane's a[4], b[2]; warp_wgmma64: a[4]
  const uint8_t* addresses[warp_lanes];  // ldmatrix4: each lane's row address

  void barrier() { sync.wait(warp_lanes); }
};

// A threadgroup's bulk copies (lanes_cpu.h's muser_bulk_copy, for kernels/tile_mma.h), as PTX's
// cp.async.bulk with an mbarrier orders them: a copy reads its source when issued and writes its
// bytes only when a thread waits on its barrier, so a kernel that reads them before it waits
// reads the bytes there before, as a GPU can, and the test fails.
struct BulkCopies {
  struct Copy {
    const void* bar;
    uint8_t* dst;
    std::vector<uint8_t> bytes;
  };
  std::mutex mutex;
  std::vector<Copy> open;  // issued, not yet waited for

  void issue(uint8_t* dst, const uint8_t* src, uint32_t bytes, const void* bar) {
    std::lock_guard<std::mutex> hold(mutex);
    open.push_back(Copy{bar, dst, std::vector<uint8_t>(src, src + bytes)});
  }
  void wait(const void* bar) {
    std::lock_guard<std::mutex> hold(mutex);
    for (auto it = open.begin(); it != open.end();) {
      if (it->bar == bar) {
        std::memcpy(it->dst, it->bytes.data(), it->bytes.size());
        it = open.erase(it);
      } else {
        ++it;
      }
    }
  }
};

// One threadgroup (kernels/tile_mma.h): its threads' barrier, dynamic shared memory and bulk copies.
struct Group {
  Barrier sync;
  uint32_t size;
  std::unique_ptr<uint64_t[]> words;  // 8-byte units of the shared bytes, 16-byte aligned by new
  BulkCopies bulk;

  Group(uint32_t threads, uint32_t shared_bytes) : size(threads), words(new uint64_t[shared_bytes / 8 + 2]()) {}
  uint8_t* shared() { return reinterpret_cast<uint8_t*>(words.get()); }
  void barrier() { sync.wait(size); }
};

// A thread's asynchronous copies (lanes_cpu.h's muser_copy16_async, for kernels/tile_mma.h), as
// PTX's cp.async orders them: a copy reads its source when issued and writes its 16 bytes only when
// a wait completes its group (commit closes a group; wait(pending) completes all but the newest
// `pending`), so a kernel that reads shared memory before it waits reads the bytes there before,
// as a GPU can, and the test fails.
struct Copies {
  struct Copy {
    uint8_t* dst;
    uint8_t bytes[16];
  };
  std::vector<Copy> open;                    // issued since the last commit
  std::vector<std::vector<Copy>> committed;  // oldest first

  void issue(uint8_t* dst, const uint8_t* src, uint32_t have) {
    Copy copy{dst, {}};
    std::memcpy(copy.bytes, src, have);
    open.push_back(copy);
  }
  void commit() {
    committed.push_back(std::move(open));
    open.clear();
  }
  void wait(size_t pending) {
    for (; committed.size() > pending; committed.erase(committed.begin())) {
      for (const Copy& copy : committed.front()) std::memcpy(copy.dst, copy.bytes, 16);
    }
  }
};
inline thread_local Copies copies;

struct Lane {
  Warp* warp;
  uint32_t index;
  Group* group;  // run_groups' threads
};
inline thread_local Lane lane = {nullptr, 0, nullptr};

// Every lane gets the same sum, taken in lane order.
inline float warp_sum(float v) {
  Warp& w = *lane.warp;
  w.slots[lane.index] = v;
  w.barrier();
  float sum = 0.0f;
  for (int k = 0; k < warp_lanes; ++k) {
    sum += w.slots[k];
  }
  w.barrier();
  return sum;
}

// The word of lane (this lane ^ mask): PTX shfl.bfly's exchange.
inline uint32_t lane_xor(uint32_t v, uint32_t mask) {
  Warp& w = *lane.warp;
  w.words[lane.index] = v;
  w.barrier();
  const uint32_t theirs = w.words[lane.index ^ mask];
  w.barrier();
  return theirs;
}

// A[row][k] (row, k < 16) of the A fragments a warp's lanes left in w.fragments[lane][0..3], PTX
// mma.sync's layout (lanes_cuda.h: muser_mma): in lane row % 8 * 4 + k % 8 / 2, word row / 8 + 2 (k / 8),
// half k % 2; to_float(bits) reads the 16-bit element.
template <typename ToFloat>
inline float fragment_a(const Warp& w, uint32_t row, uint32_t k, ToFloat to_float) {
  return to_float(uint16_t(w.fragments[row % 8 * 4 + k % 8 / 2][row / 8 + 2 * (k / 8)] >> (16 * (k % 2))));
}

// d[0..3] += A B, a 16 x 8 x 16 multiply with PTX mma.sync's fragment layout (lanes_cuda.h:
// muser_mma), sums in k order in float32; to_float(bits) reads one 16-bit element.
template <typename ToFloat>
inline void warp_mma(const uint32_t* a, const uint32_t* b, float* d, ToFloat to_float) {
  Warp& w = *lane.warp;
  for (int k = 0; k < 4; ++k) w.fragments[lane.index][k] = a[k];
  for (int k = 0; k < 2; ++k) w.fragments[lane.index][4 + k] = b[k];
  w.barrier();
  const uint32_t g = lane.index / 4, t = lane.index % 4;
  for (int e = 0; e < 4; ++e) {
    const uint32_t row = g + 8 * (e / 2), col = 2 * t + e % 2;
    for (uint32_t k = 0; k < 16; ++k) {  // B[k][col] is in lane col * 4 + k % 8 / 2, word 4 + k / 8
      const float B = to_float(uint16_t(w.fragments[col * 4 + k % 8 / 2][4 + k / 8] >> (16 * (k % 2))));
      d[e] += fragment_a(w, row, k, to_float) * B;
    }
  }
  w.barrier();
}

// One warp's share of a warpgroup's m64n64k16 multiply (PTX wgmma; lanes_cuda.h: muser_wgmma64):
// d[4 j + e] += the sum over k < 16 of A[g + 8 (e / 2)][k] B[8 j + 2 t + e % 2][k], in k order in
// float32, A this warp's 16 rows in mma.sync's A fragments, B[n][k] the 16-bit element at shared
// offset o = b_offset + 64 n + 2 k moved by wgmma's 64-byte swizzle (bits 4-5 of o XOR bits 7-8),
// of `shared`, to_float(bits) reading it. A warp's rows of D need only its own fragments.
template <typename ToFloat>
inline void warp_wgmma64(const uint32_t* a, const uint8_t* shared, uint32_t b_offset, float* d, ToFloat to_float) {
  Warp& w = *lane.warp;
  for (int k = 0; k < 4; ++k) w.fragments[lane.index][k] = a[k];
  w.barrier();
  const uint32_t g = lane.index / 4, t = lane.index % 4;
  for (int j = 0; j < 8; ++j) {
    for (int e = 0; e < 4; ++e) {
      const uint32_t row = g + 8 * (e / 2), col = 8 * j + 2 * t + e % 2;
      for (uint32_t k = 0; k < 16; ++k) {
        const uint32_t o = b_offset + 64 * col + 2 * k, swizzled = o ^ ((o >> 7 & 3u) << 4);
        uint16_t bits;
        std::memcpy(&bits, shared + swizzled, 2);
        d[4 * j + e] += fragment_a(w, row, k, to_float) * to_float(bits);
      }
    }
  }
  w.barrier();
}

// Four 8 x 8 matrices of 16-bit values, PTX ldmatrix .x4 (lanes_cuda.h: muser_ldmatrix4): lane l
// gives p, row l % 8 of matrix l / 8; lane (g, t) gets values 2t, 2t+1 of row g of matrix q in r[q].
inline void warp_ldmatrix4(const uint8_t* p, uint32_t* r) {
  Warp& w = *lane.warp;
  w.addresses[lane.index] = p;
  w.barrier();
  const uint32_t g = lane.index / 4, t = lane.index % 4;
  for (int q = 0; q < 4; ++q) {
    std::memcpy(&r[q], w.addresses[8 * q + g] + 4 * t, 4);
  }
  w.barrier();
}

// What run_warps and run_groups share: thread_count threads in warps of 32, each thread's lane in
// its warp and in threadgroup `group` (nullptr: none); false if a warp diverged.
template <typename Kernel>
bool run_threads(uint32_t thread_count, Group* group, Kernel kernel) {
  std::vector<std::unique_ptr<Warp>> warps;
  for (uint32_t w = 0; w < thread_count / warp_lanes; ++w) {
    warps.emplace_back(new Warp());
  }
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < thread_count; ++t) {
    threads.emplace_back([&, t] {
      lane = {warps[t / warp_lanes].get(), t % warp_lanes, group};
      kernel(t);
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  for (auto& w : warps) {
    if (w->sync.diverged) return false;
  }
  return true;
}

// kernel(t) for t < thread_count (a multiple of 32), each warp of 32 consecutive t concurrently.
// Returns false if a warp diverged.
template <typename Kernel>
bool run_warps(uint32_t thread_count, Kernel kernel) {
  return run_threads(thread_count, nullptr, kernel);
}

// kernel(group, thread) for each of `groups` threadgroups in turn, its `threads` threads (a
// multiple of 32) concurrently, with `shared_bytes` of zeroed shared memory. Returns false if a
// warp or a threadgroup diverged.
template <typename Kernel>
bool run_groups(uint32_t groups, uint32_t threads, uint32_t shared_bytes, Kernel kernel) {
  for (uint32_t g = 0; g < groups; ++g) {
    Group group(threads, shared_bytes);
    if (!run_threads(threads, &group, [&](uint32_t t) { kernel(g, t); }) || group.sync.diverged) return false;
  }
  return true;
}

}  // namespace muser_cpu
