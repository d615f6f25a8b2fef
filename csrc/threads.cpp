#include "threads.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace muser_ext {
namespace {

class Pool {
 public:
  explicit Pool(int workers) {
    for (int w = 1; w <= workers; ++w) {
      std::thread([this, w] { serve(w); }).detach();  // kept for the process (never joined at exit)
    }
  }

  // part(p) for p < parts (at most workers + 1), the caller running part 0.
  void run(int parts, const std::function<void(int)>& part) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      part_ = &part;
      parts_ = parts;
      pending_ = parts - 1;
      ++generation_;
    }
    wake_.notify_all();
    part(0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
  }

  std::mutex busy;  // held by the call that runs

 private:
  void serve(int index) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* part;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (index >= parts_) continue;
        part = part_;
      }
      (*part)(index);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* part_ = nullptr;
  int parts_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
};

Pool& pool() {
  static Pool* p = new Pool(cpu_threads() - 1);  // never destroyed: its threads outlive static destructors
  return *p;
}

}  // namespace

int cpu_threads() {
  static const int n = std::max(1u, std::thread::hardware_concurrency());
  return n;
}

void parallel_for(uint64_t count, uint64_t step, uint64_t min_part, const std::function<void(uint64_t, uint64_t)>& fn) {
  const uint64_t steps = (count + step - 1) / step;
  const uint64_t parts = std::min<uint64_t>({uint64_t(cpu_threads()), steps, std::max<uint64_t>(1, count / std::max<uint64_t>(min_part, 1))});
  if (parts <= 1) {
    fn(0, count);
    return;
  }
  std::unique_lock<std::mutex> busy(pool().busy, std::try_to_lock);
  if (!busy.owns_lock()) {
    fn(0, count);
    return;
  }
  pool().run(int(parts), [&](int p) {
    const uint64_t first = steps * p / parts * step, end = std::min(count, steps * (p + 1) / parts * step);
    if (first < end) fn(first, end);
  });
}

}  // namespace muser_ext
