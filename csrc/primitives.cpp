#include "primitives.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "mlx/allocator.h"
#include "mlx/backend/cpu/encoder.h"

#include "threads.h"

namespace muser_ext {
namespace {

// Values a thread decodes at the least, so that a split pays for waking the pool (~10 us).
constexpr uint64_t min_gather_values = 1 << 16;
constexpr uint64_t min_head_values = 1 << 18;

const FormatKernels& kernels_for(int ggml_type) {
  const FormatKernels* k = format_kernels(ggml_type);
  if (!k) {
    throw std::invalid_argument("muser_mlx's CPU extension has no kernels for ggml type " + std::to_string(ggml_type) +
                                " (rebuild it after adding kernels/format_<type>.h)");
  }
  return *k;
}

FloatType float_type(mx::Dtype dtype, const char* what) {
  if (dtype == mx::float32) return float32;
  if (dtype == mx::float16) return float16;
  if (dtype == mx::bfloat16) return bfloat16;
  throw std::invalid_argument(std::string(what) + " must be float32, float16 or bfloat16");
}

mx::Stream cpu_stream(mx::StreamOrDevice s) {
  mx::Stream stream = mx::to_stream(s, mx::Device::cpu);
  if (stream.device != mx::Device::cpu) {
    throw std::invalid_argument("muser_mlx's CPU extension runs on a CPU stream only");
  }
  return stream;
}

void check_table(const mx::array& table, const FormatKernels& k, int dims) {
  if (dims <= 0 || dims % int(k.block_values)) {
    throw std::invalid_argument("dims " + std::to_string(dims) + " is not a positive multiple of the " + k.name +
                                " block of " + std::to_string(k.block_values));
  }
  const uint64_t row_bytes = uint64_t(dims) / k.block_values * k.block_bytes;
  if (table.dtype() != mx::uint8 || table.ndim() != 2 || uint64_t(table.shape(1)) != row_bytes || table.shape(0) < 1) {
    throw std::invalid_argument(std::string(k.name) + " table of dims " + std::to_string(dims) +
                                " must be uint8 [vocab >= 1, " + std::to_string(row_bytes) + "]");
  }
}

// The element at flat index `index` of a (row-major order) given its shape and strides.
int64_t offset_of(uint64_t index, const mx::Shape& shape, const mx::Strides& strides) {
  int64_t offset = 0;
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    offset += int64_t(index % shape[d]) * strides[d];
    index /= shape[d];
  }
  return offset;
}

// a's data as one row-major run: its own when row-contiguous, else copied into `copy`.
const void* row_major(const mx::array& a, std::vector<uint8_t>& copy) {
  if (a.flags().row_contiguous) return a.data<void>();
  const size_t item = a.itemsize();
  copy.resize(a.size() * item);
  const uint8_t* src = a.data<uint8_t>();
  for (size_t i = 0; i < a.size(); ++i) {
    std::memcpy(copy.data() + i * item, src + offset_of(i, a.shape(), a.strides()) * item, item);
  }
  return copy.data();
}

// ids of any integer dtype as int64 (signed ids sign-extended, unsigned zero-extended: the
// kernel's clamp_id reads uint64(int64(id))).
template <typename I>
void widen(const mx::array& ids, int64_t* out) {
  const I* p = ids.data<I>();
  if (ids.flags().row_contiguous) {
    for (size_t i = 0; i < ids.size(); ++i) out[i] = int64_t(p[i]);
  } else {
    for (size_t i = 0; i < ids.size(); ++i) out[i] = int64_t(p[offset_of(i, ids.shape(), ids.strides())]);
  }
}

void ids_as_int64(const mx::array& ids, int64_t* out) {
  switch (ids.dtype()) {
    case mx::int8: return widen<int8_t>(ids, out);
    case mx::int16: return widen<int16_t>(ids, out);
    case mx::int32: return widen<int32_t>(ids, out);
    case mx::int64: return widen<int64_t>(ids, out);
    case mx::uint8: return widen<uint8_t>(ids, out);
    case mx::uint16: return widen<uint16_t>(ids, out);
    case mx::uint32: return widen<uint32_t>(ids, out);
    case mx::uint64: return widen<uint64_t>(ids, out);
    default: throw std::invalid_argument("token ids must be integers");
  }
}

}  // namespace

mx::array gather(const mx::array& table, const mx::array& ids, int ggml_type, int dims, mx::Dtype dtype,
                 mx::StreamOrDevice s) {
  const FormatKernels& k = kernels_for(ggml_type);
  check_table(table, k, dims);
  if (!mx::issubdtype(ids.dtype(), mx::integer) || ids.dtype() == mx::bool_) {
    throw std::invalid_argument("token ids must be integers");
  }
  float_type(dtype, "the output dtype");
  mx::Shape shape = ids.shape();
  shape.push_back(dims);
  return mx::array(shape, dtype, std::make_shared<Gather>(cpu_stream(s), k, dims), {table, ids});
}

void Gather::eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  const mx::array &table = inputs[0], &ids = inputs[1];
  mx::array& out = outputs[0];
  out.set_data(mx::allocator::malloc(out.nbytes()));
  auto& encoder = mx::cpu::get_command_encoder(stream());
  encoder.set_input_array(table);
  encoder.set_input_array(ids);
  encoder.set_output_array(out);
  encoder.dispatch([table, ids, out = out.data<void>(), dims = dims_, k = &k_, type = float_type(out.dtype(), "")]() {
    std::vector<uint8_t> table_copy;
    std::vector<int64_t> wide(ids.size());
    ids_as_int64(ids, wide.data());
    const GatherJob job{static_cast<const uint8_t*>(row_major(table, table_copy)), wide.data(), out, uint32_t(dims),
                        uint64_t(table.shape(0))};
    parallel_for(ids.size(), 1, std::max<uint64_t>(1, min_gather_values / dims),
                 [&](uint64_t first, uint64_t end) { k->gather[type](job, uint32_t(first), uint32_t(end)); });
  });
}

void Gather::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw std::runtime_error("MuserGather runs on the CPU only (muser_mlx's GPU kernels serve the GPU)");
}

std::vector<mx::Shape> Gather::output_shapes(const std::vector<mx::array>& inputs) {
  mx::Shape shape = inputs[1].shape();
  shape.push_back(dims_);
  return {shape};
}

bool Gather::is_equivalent(const mx::Primitive& other) const {
  const Gather& g = static_cast<const Gather&>(other);
  return &k_ == &g.k_ && dims_ == g.dims_;
}

mx::array head(const mx::array& table, const mx::array& x, int ggml_type, bool byte_dots, mx::StreamOrDevice s) {
  const FormatKernels& k = kernels_for(ggml_type);
  float_type(x.dtype(), "x");
  if (x.ndim() != 2 || x.shape(1) < 1) {
    throw std::invalid_argument("x must be [n, dims]");
  }
  check_table(table, k, x.shape(1));
  return mx::array({x.shape(0), table.shape(0)}, x.dtype(), std::make_shared<Head>(cpu_stream(s), k, byte_dots), {table, x});
}

void Head::eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  const mx::array &table = inputs[0], &x = inputs[1];
  mx::array& out = outputs[0];
  out.set_data(mx::allocator::malloc(out.nbytes()));
  auto& encoder = mx::cpu::get_command_encoder(stream());
  encoder.set_input_array(table);
  encoder.set_input_array(x);
  encoder.set_output_array(out);
  encoder.dispatch([table, x, out = out.data<void>(), k = &k_, byte_dots = byte_dots_]() {
    const uint32_t n = uint32_t(x.shape(0)), dims = uint32_t(x.shape(1)), vocab = uint32_t(table.shape(0));
    if (n == 0) return;
    std::vector<uint8_t> table_copy, x_copy;
    std::vector<uint32_t> runs;
    HeadJob job{static_cast<const uint8_t*>(row_major(table, table_copy)), row_major(x, x_copy), out, n, dims, vocab,
                nullptr};
    const FloatType type = float_type(x.dtype(), "x");
    HeadRange range = k->head[type];
    if (byte_dots && k->byte_head[type]) {  // x's run records first, once (16 values each)
      runs.resize(uint64_t(n) * (dims / 16) * k->head_run_words[type]);
      job.runs = runs.data();
      k->head_runs[type](job);
      range = k->byte_head[type];
    }
    parallel_for(vocab, k->head_row_step, std::max<uint64_t>(1, min_head_values / (uint64_t(dims) * n)),
                 [&](uint64_t first, uint64_t end) { range(job, uint32_t(first), uint32_t(end)); });
  });
}

void Head::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw std::runtime_error("MuserHead runs on the CPU only (muser_mlx's GPU kernels serve the GPU)");
}

std::vector<mx::array> Head::vjp(const std::vector<mx::array>& primals, const std::vector<mx::array>& cotangents,
                                 const std::vector<int>& argnums, const std::vector<mx::array>&) {
  const mx::array &table = primals[0], &g = cotangents[0];
  std::vector<mx::array> vjps;
  for (int arg : argnums) {
    if (arg == 0) {
      vjps.push_back(mx::zeros_like(table, stream()));  // the table's bytes take no gradient
    } else {
      const int dims = primals[1].shape(1);
      mx::array rows = mx::arange(table.shape(0), mx::int32, stream());
      vjps.push_back(mx::matmul(g, gather(table, rows, k_.ggml_type, dims, g.dtype(), stream()), stream()));
    }
  }
  return vjps;
}

std::vector<mx::Shape> Head::output_shapes(const std::vector<mx::array>& inputs) {
  return {{inputs[1].shape(0), inputs[0].shape(0)}};
}

bool Head::is_equivalent(const mx::Primitive& other) const {
  const Head& h = static_cast<const Head&>(other);
  return &k_ == &h.k_ && byte_dots_ == h.byte_dots_;
}

}  // namespace muser_ext
