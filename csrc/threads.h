// Rows of one kernel call split over the CPU's cores: a pool of hardware_concurrency() - 1
// workers, started on first use and kept for the process, and the calling thread.
#pragma once
#include <cstdint>
#include <functional>

namespace muser_ext {

int cpu_threads();

// fn(first, end) over [0, count) in at most cpu_threads() contiguous parts whose bounds are
// multiples of step (the last ends at count), none under min_part: a small count runs on the
// caller alone. A second call while one runs (another stream's task) runs on its caller alone.
void parallel_for(uint64_t count, uint64_t step, uint64_t min_part, const std::function<void(uint64_t, uint64_t)>& fn);

}  // namespace muser_ext
