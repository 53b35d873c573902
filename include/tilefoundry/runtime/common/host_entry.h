// What a generated host entry needs around its launch: the argument checks every entry runs before
// it touches a tensor. Both targets share them, so a CPU and a CUDA entry refuse the same call
// with the same words. Included by runtime.h when the build defines TILEFOUNDRY_HOST_ENTRY (the
// entry is then exported through tvm-ffi, whose headers the build puts on the include path).
//
// Every refusal names the entry, the parameter and what was declared, and surfaces in Python as
// the exception type the evaluator raises for the same mistake: a wrong dtype or rank is a
// TypeError; a wrong extent, a DimVar out of its range or disagreeing between parameters, a
// non-contiguous tensor, a tensor on another device or an output overlapping an input is a
// ValueError.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <tvm/ffi/tvm_ffi.h>

#include <cstdint>
#include <string>

namespace tilefoundry {
namespace host {

using tvm::ffi::TensorView;

/// The torch spelling of a DLPack element type, for messages.
inline std::string dtype_name(DLDataType t) {
  std::string base;
  switch (t.code) {
    case kDLFloat:
      base = "float";
      break;
    case kDLBfloat:
      base = "bfloat";
      break;
    case kDLInt:
      base = "int";
      break;
    case kDLUInt:
      base = "uint";
      break;
    case kDLBool:
      return "bool";
    default:
      base = "code" + std::to_string(int(t.code)) + "_";
  }
  std::string name = base + std::to_string(int(t.bits));
  if (t.lanes != 1) name += "x" + std::to_string(int(t.lanes));
  return name;
}

inline std::string device_name(DLDevice d) {
  switch (d.device_type) {
    case kDLCPU:
      return d.device_id == 0 ? std::string("cpu") : "cpu:" + std::to_string(d.device_id);
    case kDLCUDA:
      return "cuda:" + std::to_string(d.device_id);
    default:
      return "device type " + std::to_string(int(d.device_type)) + ":" +
             std::to_string(d.device_id);
  }
}

/// One entry's argument checks; `entry` prefixes every message.
class ArgChecker {
 public:
  explicit ArgChecker(char const* entry) : entry_(entry) {}

  /// The tensor sits on `device_type`; on a device with several ordinals all tensors share the
  /// first one's.
  void device(TensorView const& t, char const* param, DLDeviceType device_type,
              char const* target) {
    DLDevice const d = t.device();
    if (d.device_type != device_type) {
      TVM_FFI_THROW(ValueError) << entry_ << ": argument " << param << " is on " << device_name(d)
                                << ", but this entry was compiled for the " << target
                                << "; move it there (e.g. .to(\"" << target << "\"))";
    }
    if (device_id_ < 0) {
      device_id_ = d.device_id;
      first_on_device_ = param;
    } else if (d.device_id != device_id_) {
      TVM_FFI_THROW(ValueError) << entry_ << ": argument " << param << " is on " << device_name(d)
                                << " but " << first_on_device_ << " is on "
                                << device_name(DLDevice{device_type, device_id_})
                                << "; put every tensor on one device";
    }
  }

  void dtype(TensorView const& t, char const* param, DLDataTypeCode code, int bits,
             char const* declared) {
    DLDataType const d = t.dtype();
    if (d.code != code || d.bits != bits || d.lanes != 1) {
      TVM_FFI_THROW(TypeError) << entry_ << ": argument " << param << " has dtype " << dtype_name(d)
                               << ", declared " << declared;
    }
  }

  void rank(TensorView const& t, char const* param, int want, char const* declared) {
    if (t.ndim() != want) {
      TVM_FFI_THROW(TypeError) << entry_ << ": argument " << param << " has rank " << t.ndim()
                               << " (shape " << shape_text(t) << "), declared " << declared;
    }
  }

  /// A static extent.
  void extent(TensorView const& t, char const* param, int axis, int64_t want,
              char const* declared) {
    if (t.size(axis) != want) {
      TVM_FFI_THROW(ValueError) << entry_ << ": argument " << param << " has shape "
                                << shape_text(t) << ", declared " << declared << " (axis " << axis
                                << ": " << t.size(axis) << " != " << want << ")";
    }
  }

  /// Binds a DimVar from its first plain occurrence: in [lo, hi), and equal at every later one.
  int64_t bind(TensorView const& t, char const* param, int axis, char const* dimvar, int64_t lo,
               int64_t hi, char const* declared) {
    int64_t const n = t.size(axis);
    if (n < lo || n >= hi) {
      TVM_FFI_THROW(ValueError) << entry_ << ": argument " << param << " (" << declared
                                << "): DimVar " << dimvar << " = " << n << " is outside its range ["
                                << lo << ", " << hi << ")";
    }
    return n;
  }

  void agree(TensorView const& t, char const* param, int axis, int64_t want, char const* what,
             char const* bound_by, char const* declared) {
    int64_t const n = t.size(axis);
    if (n != want) {
      TVM_FFI_THROW(ValueError) << entry_ << ": argument " << param << " (" << declared << ") axis "
                                << axis << " is " << n << ", but " << what << " = " << want
                                << " from argument " << bound_by;
    }
  }

  /// The tensor's data starts at a multiple of `bytes` (the kernel moves it in words that wide).
  void aligned(TensorView const& t, char const* param, int bytes) {
    auto const address = reinterpret_cast<std::uintptr_t>(t.data_ptr()) + t.byte_offset();
    if (t.numel() > 0 && address % static_cast<std::uintptr_t>(bytes) != 0) {
      TVM_FFI_THROW(ValueError) << entry_ << ": argument " << param
                                << " starts at an address that is "
                                << "not a multiple of " << bytes << " bytes (offset "
                                << address % static_cast<std::uintptr_t>(bytes)
                                << "), and the kernel moves it " << bytes
                                << " bytes at a time; pass a tensor whose data starts at a "
                                << bytes
                                << "-byte boundary (a fresh tensor, or .clone() of this view)";
    }
  }

  void contiguous(TensorView const& t, char const* param) {
    if (!t.IsContiguous()) {
      std::string strides;
      for (int i = 0; i < t.ndim(); ++i) strides += (i ? ", " : "") + std::to_string(t.stride(i));
      TVM_FFI_THROW(ValueError) << entry_ << ": argument " << param << " is not contiguous (shape "
                                << shape_text(t) << ", strides (" << strides
                                << ")); pass a contiguous tensor (.contiguous())";
    }
  }

  /// An output may not share memory with an input: the entry reads inputs after writing outputs.
  void disjoint(TensorView const& out, char const* out_param, TensorView const& in,
                char const* in_param) {
    if (overlap(out, in)) {
      TVM_FFI_THROW(ValueError) << entry_ << ": output " << out_param
                                << " shares memory with input " << in_param
                                << "; pass an output tensor of its own";
    }
  }

  /// An output the function may update in place (a cache): the input itself (the same elements at
  /// the same address: updated in place) or memory of its own, never a part of it.
  void same_or_disjoint(TensorView const& out, char const* out_param, TensorView const& in,
                        char const* in_param) {
    bool const same = span(out) == span(in);
    if (!same && overlap(out, in)) {
      TVM_FFI_THROW(ValueError) << entry_ << ": output " << out_param << " overlaps input "
                                << in_param
                                << " without being it; pass the input itself (updated in place) or "
                                   "an output tensor of its own";
    }
  }

  /// Two outputs may not share memory either: each is written on its own.
  void disjoint_outputs(TensorView const& out, char const* out_param, TensorView const& other,
                        char const* other_param) {
    if (overlap(out, other)) {
      TVM_FFI_THROW(ValueError) << entry_ << ": output " << out_param
                                << " shares memory with output " << other_param
                                << "; pass each output a tensor of its own";
    }
  }

  /// Every position held in integer tensor `t` (host memory: the CPU target's) lies in
  /// [0, bound), the rows of the table it indexes, `what`: a position outside it is refused as the
  /// evaluator refuses it. (A CUDA kernel checks the positions it reads itself, printing one
  /// outside the table and stopping, detail::index_in: checking device memory here would wait for
  /// the device, and no CUDA graph could capture the call.)
  void positions(TensorView const& t, char const* param, int64_t bound, char const* what) {
    int64_t const n = t.numel();
    for (int64_t i = 0; i < n; ++i) {
      int64_t const p = t.dtype().bits == 64 ? data_at<int64_t>(t, i) : data_at<int32_t>(t, i);
      if (p < 0 || p >= bound) {
        TVM_FFI_THROW(ValueError) << entry_ << ": argument " << param << " holds the position " << p
                                  << " (element " << i << "), outside the " << bound << " " << what
                                  << " it indexes; pass positions in [0, " << bound << ")";
      }
    }
  }

  /// `count` rows written at position `pos` (0-d integer tensors in host memory) fit a cache of
  /// `capacity` rows, `what`, as the evaluator requires (a CUDA kernel stops at a position past
  /// the cache's end or a count above the rows it was given, detail::index_in, and at a row that
  /// would pass the end from a position inside it, detail::row_within).
  void cache_write(TensorView const& pos, char const* pos_param, TensorView const& count,
                   char const* count_param, int64_t capacity, char const* what) {
    int64_t const p = pos.dtype().bits == 64 ? data_at<int64_t>(pos, 0) : data_at<int32_t>(pos, 0);
    int64_t const n =
        count.dtype().bits == 64 ? data_at<int64_t>(count, 0) : data_at<int32_t>(count, 0);
    if (p < 0 || n < 0 || p + n > capacity) {
      TVM_FFI_THROW(ValueError) << entry_ << ": writing " << n << " rows (" << count_param
                                << ") at position " << p << " (" << pos_param << ") into " << what
                                << " needs 0 <= " << pos_param << " and " << pos_param << " + "
                                << count_param << " <= " << capacity << ", the cache's length";
    }
  }

  /// The device index every tensor checked so far sits on (-1 before the first).
  int device_index() const { return device_id_; }

  /// The entry's name, as messages give it.
  char const* entry() const { return entry_; }

 private:
  static std::string shape_text(TensorView const& t) {
    std::string s = "(";
    for (int i = 0; i < t.ndim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
    return s + (t.ndim() == 1 ? ",)" : ")");
  }
  template <class T>
  static T data_at(TensorView const& t, int64_t i) {
    return reinterpret_cast<T const*>(static_cast<char const*>(t.data_ptr()) + t.byte_offset())[i];
  }
  static bool overlap(TensorView const& x, TensorView const& y) {
    auto const a = span(x), b = span(y);
    return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
  }
  static std::pair<std::uintptr_t, std::uintptr_t> span(TensorView const& t) {
    auto const base = reinterpret_cast<std::uintptr_t>(t.data_ptr()) + t.byte_offset();
    auto const bytes = static_cast<std::uintptr_t>(t.numel()) * ((t.dtype().bits + 7) / 8);
    return {base, base + bytes};
  }

  char const* entry_;
  int device_id_ = -1;
  char const* first_on_device_ = "";
};

/// The first element of a checked tensor, typed.
template <class T>
T* data(TensorView const& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.data_ptr()) + t.byte_offset());
}

}  // namespace host
}  // namespace tilefoundry
