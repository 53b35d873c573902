// The reduce tests' reference, in double, for both targets: tests/cpp/test_ops.cpp (CPU) and
// tests/gpu/test_reduce.cu (GPU, host side) include it, so that one definition of what each op
// means judges both runtimes. Host C++ only, no test framework.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace tftest {

enum class ReduceKind { sum, mean, max, min, absmax };

// A NaN element makes the result NaN for every op, as in torch: the sums carry it by arithmetic,
// max / min / absmax by the early return (std::max and std::min would drop it).
inline double reduce_reference(ReduceKind kind, std::vector<double> const& v) {
  double acc = kind == ReduceKind::max ? -INFINITY : kind == ReduceKind::min ? INFINITY : 0.0;
  for (double x : v) {
    if (std::isnan(x) && kind != ReduceKind::sum && kind != ReduceKind::mean) return x;
    switch (kind) {
      case ReduceKind::sum:
      case ReduceKind::mean:
        acc += x;
        break;
      case ReduceKind::max:
        acc = std::max(acc, x);
        break;
      case ReduceKind::min:
        acc = std::min(acc, x);
        break;
      case ReduceKind::absmax:
        acc = std::max(acc, std::fabs(x));
        break;
    }
  }
  return kind == ReduceKind::mean ? acc / double(v.size()) : acc;
}

}  // namespace tftest
