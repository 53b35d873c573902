// The argument checks every exported kernel entry runs before it launches anything. A refusal
// names the entry and the parameter, and surfaces in Python as the exception torch would raise for
// the same mistake: a wrong dtype or rank is a TypeError; a wrong extent, a tensor that is not
// contiguous or not 16-byte aligned, a tensor on the CPU or on another GPU than the others, or
// an output that overlaps an input is a ValueError.
//
// Shapes, dtypes and layouts are checked before the device, so that every refusal but the
// device's can be shown on a machine without a GPU.
#pragma once

#include <tvm/ffi/tvm_ffi.h>

#include <cstdint>
#include <string>
#include <utility>

namespace tilefoundry {
namespace engine {

using tvm::ffi::TensorView;

inline std::string shape_text(TensorView const& t) {
  std::string s = "(";
  for (int i = 0; i < t.ndim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + (t.ndim() == 1 ? ",)" : ")");
}

inline std::string dtype_text(DLDataType t) {
  switch (t.code) {
    case kDLBfloat:
      return t.bits == 16 ? "bfloat16" : "bfloat" + std::to_string(t.bits);
    case kDLFloat:
      return "float" + std::to_string(t.bits);
    case kDLInt:
      return "int" + std::to_string(t.bits);
    case kDLUInt:
      return "uint" + std::to_string(t.bits);
    default:
      return "dtype code " + std::to_string(int(t.code)) + " of " + std::to_string(t.bits) +
             " bits";
  }
}

/// One entry's checks; the entry's name prefixes every message.
class Args {
 public:
  explicit Args(char const* entry) : entry_(entry) {}

  /// The element type is one of DLPack's (code, bits), spelled `want` in the message.
  void dtype(TensorView const& t, char const* param, DLDataTypeCode code, int bits,
             char const* want) const {
    DLDataType const d = t.dtype();
    if (d.code != code || d.bits != bits || d.lanes != 1) {
      TVM_FFI_THROW(TypeError) << entry_ << ": " << param << " has dtype " << dtype_text(d)
                               << ", expected " << want;
    }
  }
  void bf16(TensorView const& t, char const* param) const {
    dtype(t, param, kDLBfloat, 16, "bfloat16");
  }
  /// bfloat16 or float32 (rotary tables); returns whether it is float32.
  bool bf16_or_f32(TensorView const& t, char const* param) const {
    DLDataType const d = t.dtype();
    bool const f32 = d.code == kDLFloat && d.bits == 32 && d.lanes == 1;
    if (!f32) dtype(t, param, kDLBfloat, 16, "bfloat16 or float32");
    return f32;
  }

  void rank(TensorView const& t, char const* param, int want, char const* layout) const {
    if (t.ndim() != want) {
      TVM_FFI_THROW(TypeError) << entry_ << ": " << param << " has rank " << t.ndim() << " (shape "
                               << shape_text(t) << "), expected " << want << " " << layout;
    }
  }

  /// Axis `axis` of t is `want`, which `why` explains ("hidden size K from x").
  void extent(TensorView const& t, char const* param, int axis, int64_t want,
              char const* why) const {
    if (t.size(axis) != want) {
      TVM_FFI_THROW(ValueError) << entry_ << ": " << param << " has shape " << shape_text(t)
                                << ", but axis " << axis << " must be " << want << " (" << why
                                << ")";
    }
  }

  /// A KV cache pair: cache_k and cache_v each (capacity, kv_heads KV, head_dim D) in bfloat16.
  void kv_cache(TensorView const& cache_k, TensorView const& cache_v) const {
    rank(cache_k, "cache_k", 3, "(capacity, kv_heads KV, head_dim D)");
    bf16(cache_k, "cache_k");
    rank(cache_v, "cache_v", 3, "(capacity, kv_heads KV, head_dim D)");
    bf16(cache_v, "cache_v");
  }
  /// cache_k's head_dim is D (named `d_from`), and cache_v's shape is cache_k's.
  void kv_cache_extents(TensorView const& cache_k, TensorView const& cache_v, int64_t d,
                        char const* d_from) const {
    extent(cache_k, "cache_k", 2, d, d_from);
    extent(cache_v, "cache_v", 0, cache_k.size(0), "cache_k's capacity");
    extent(cache_v, "cache_v", 1, cache_k.size(1), "cache_k's KV heads");
    extent(cache_v, "cache_v", 2, d, d_from);
  }
  /// head_dim D (read from `where`) is one the attention-side kernels are built for: 64 or 128.
  void head_dim(int64_t d, char const* where) const {
    if (d != 64 && d != 128) {
      TVM_FFI_THROW(ValueError) << entry_ << ": head_dim D (" << where << ") is " << d
                                << "; this kernel is built for 64 and 128";
    }
  }

  /// `value` (named `what`) lies in [lo, hi].
  void range(int64_t value, char const* what, int64_t lo, int64_t hi) const {
    if (value < lo || value > hi) {
      TVM_FFI_THROW(ValueError) << entry_ << ": " << what << " is " << value
                                << ", which must lie in [" << lo << ", " << hi << "]";
    }
  }

  /// `value` (named `what`) is a multiple of `m`, `why` being the reason.
  void multiple(int64_t value, char const* what, int64_t m, char const* why) const {
    if (value % m != 0) {
      TVM_FFI_THROW(ValueError) << entry_ << ": " << what << " is " << value
                                << ", which must be a multiple of " << m << " (" << why << ")";
    }
  }

  void contiguous(TensorView const& t, char const* param) const {
    if (!t.IsContiguous()) {
      TVM_FFI_THROW(ValueError) << entry_ << ": " << param << " (shape " << shape_text(t)
                                << ") is not contiguous; pass a contiguous tensor (.contiguous())";
    }
  }

  /// The innermost axis is dense (stride 1) and rows start at multiples of 16 bytes.
  void dense_rows(TensorView const& t, char const* param) const {
    if (t.ndim() >= 1 && t.size(-1) > 1 && t.stride(-1) != 1) {
      TVM_FFI_THROW(ValueError) << entry_ << ": " << param << " (shape " << shape_text(t)
                                << ") has stride " << t.stride(-1)
                                << " along its last axis; it must be 1 (.contiguous())";
    }
    for (int i = 0; i + 1 < t.ndim(); ++i) {
      if (t.size(i) > 1 && (t.stride(i) * int64_t(t.dtype().bits / 8)) % 16 != 0) {
        TVM_FFI_THROW(ValueError) << entry_ << ": " << param << " (shape " << shape_text(t)
                                  << ") has stride " << t.stride(i) << " along axis " << i
                                  << ", which is not a multiple of 16 bytes; pass a contiguous"
                                  << " tensor whose rows are";
      }
    }
  }

  /// The first element sits at a multiple of 16 bytes (the kernels move 16-byte words).
  void aligned(TensorView const& t, char const* param) const {
    if (address(t) % 16 != 0) {
      TVM_FFI_THROW(ValueError) << entry_ << ": " << param
                                << " does not start at a 16-byte boundary (it is a view at an odd"
                                << " offset); pass a fresh tensor or .clone() it";
    }
  }

  /// At least `want` elements (a workspace or a device scalar).
  void min_numel(TensorView const& t, char const* param, int64_t want, char const* why) const {
    if (t.numel() < want) {
      TVM_FFI_THROW(ValueError) << entry_ << ": " << param << " holds " << t.numel()
                                << " elements, fewer than the " << want << " it needs (" << why
                                << ")";
    }
  }

  /// Every tensor sits on one CUDA device; returns its ordinal. Checked last (see the top).
  template <class... T>
  int cuda(std::pair<TensorView const*, char const*> first, T const&... rest) const {
    int const id = on_cuda(*first.first, first.second);
    (same_device(*rest.first, rest.second, id, first.second), ...);
    return id;
  }

  /// The output `out` shares no byte with the input `in`.
  void disjoint(TensorView const& out, char const* out_param, TensorView const& in,
                char const* in_param) const {
    auto const a = span(out), b = span(in);
    if (a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second) {
      TVM_FFI_THROW(ValueError) << entry_ << ": " << out_param << " overlaps " << in_param
                                << ", which the kernel reads while it writes " << out_param
                                << "; pass an output tensor of its own";
    }
  }

  /// `out` either is `in` (same first element and shape, updated in place) or shares no byte.
  void same_or_disjoint(TensorView const& out, char const* out_param, TensorView const& in,
                        char const* in_param) const {
    if (address(out) == address(in) && out.numel() == in.numel()) return;
    disjoint(out, out_param, in, in_param);
  }

  char const* entry() const { return entry_; }

 private:
  static std::uintptr_t address(TensorView const& t) {
    return reinterpret_cast<std::uintptr_t>(t.data_ptr()) + t.byte_offset();
  }
  static std::pair<std::uintptr_t, std::uintptr_t> span(TensorView const& t) {
    auto const base = address(t);
    auto const bytes = static_cast<std::uintptr_t>(t.numel()) * ((t.dtype().bits + 7) / 8);
    return {base, base + bytes};
  }

  int on_cuda(TensorView const& t, char const* param) const {
    DLDevice const d = t.device();
    if (d.device_type != kDLCUDA) {
      TVM_FFI_THROW(ValueError) << entry_ << ": " << param << " is not on a CUDA device (device"
                                << " type " << int(d.device_type)
                                << "); these kernels run on the GPU: move it there (.cuda())";
    }
    return d.device_id;
  }
  void same_device(TensorView const& t, char const* param, int id, char const* first) const {
    int const other = on_cuda(t, param);
    if (other != id) {
      TVM_FFI_THROW(ValueError) << entry_ << ": " << param << " is on cuda:" << other << " but "
                                << first << " is on cuda:" << id << "; put every tensor on one GPU";
    }
  }

  char const* entry_;
};

/// The (tensor, name) pair Args::cuda takes.
inline std::pair<TensorView const*, char const*> arg(TensorView const& t, char const* name) {
  return {&t, name};
}

/// The first element of a checked tensor, typed.
template <class T>
T* data(TensorView const& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data_ptr()) + t.byte_offset());
}

}  // namespace engine
}  // namespace tilefoundry
