// SwiGLU on separate gate and up activations: out = bf16(bf16(silu(gate)) * up), as torch
// computes F.silu(gate) * up on bf16 tensors. gate and up may be the two halves of one packed
// [M, 2I] projection (row stride 2I): only their last axis must be dense.
//
// Work split: a grid-stride loop over 16-byte words (8 values), at most four CTAs of 256 threads
// per SM. (The decode engine fuses SwiGLU into the gate/up GEMV's epilogue instead; this entry
// serves the paths that keep the two apart.)
#pragma once

#include "common.cuh"
#include "args.cuh"
#include "launch.cuh"

namespace tilefoundry {
namespace engine {
namespace swiglu {

constexpr int kThreads = 256;

struct Params {
  Word const* gate;
  Word const* up;
  Word* out;
  long long gate_stride, up_stride;  // words between rows
  int rows, words;                   // words per row
};

__global__ void __launch_bounds__(kThreads) swiglu_kernel(Params const p) {
  wait_for_inputs();
  release_dependents();
  long long const total = static_cast<long long>(p.rows) * p.words;
  for (long long i = blockIdx.x * static_cast<long long>(kThreads) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * kThreads) {
    long long const row = i / p.words, v = i % p.words;
    float g[kPerWord], u[kPerWord];
    unpack(load_input(p.gate + row * p.gate_stride + v), g);
    unpack(load_input(p.up + row * p.up_stride + v), u);
    CUTE_UNROLL
    for (int j = 0; j < kPerWord; ++j) g[j] = silu_bf16(g[j]) * u[j];
    p.out[i] = pack(g);
  }
}

inline void run(TensorView const& gate, TensorView const& up, TensorView const& out) {
  char const* entry = "swiglu";
  Args const a(entry);
  a.rank(gate, "gate", 2, "(rows, intermediate I)");
  a.bf16(gate, "gate");
  a.rank(up, "up", 2, "(rows, intermediate I)");
  a.bf16(up, "up");
  a.rank(out, "out", 2, "(rows, intermediate I)");
  a.bf16(out, "out");
  int64_t const m = gate.size(0), n = gate.size(1);
  a.range(m, "the row count (gate's axis 0)", 1, INT32_MAX);
  a.range(n, "the intermediate size I (gate's axis 1)", kPerWord, INT32_MAX);
  a.multiple(n, "the intermediate size I (gate's axis 1)", kPerWord,
             "values are read 8 bf16 at a time");
  a.extent(up, "up", 0, m, "gate's rows");
  a.extent(up, "up", 1, n, "gate's intermediate size I");
  a.extent(out, "out", 0, m, "gate's rows");
  a.extent(out, "out", 1, n, "gate's intermediate size I");
  a.dense_rows(gate, "gate");
  a.dense_rows(up, "up");
  a.contiguous(out, "out");
  for (auto [t, name] : {arg(gate, "gate"), arg(up, "up"), arg(out, "out")}) a.aligned(*t, name);
  a.disjoint(out, "out", gate, "gate");
  a.disjoint(out, "out", up, "up");
  int const device = a.cuda(arg(gate, "gate"), arg(up, "up"), arg(out, "out"));

  Params p = {};
  p.gate = data<Word const>(gate);
  p.up = data<Word const>(up);
  p.out = data<Word>(out);
  p.gate_stride = m > 1 ? gate.stride(0) / kPerWord : 0;
  p.up_stride = m > 1 ? up.stride(0) / kPerWord : 0;
  p.rows = int(m);
  p.words = int(n / kPerWord);
  long long const total = static_cast<long long>(m) * p.words;
  long long const ctas =
      std::min<long long>(ceil_div<long long>(total, kThreads), 4LL * sm_count(device));
  launch(entry, device, swiglu_kernel, dim3(unsigned(ctas)), dim3(kThreads), 0, p);
}

}  // namespace swiglu
}  // namespace engine
}  // namespace tilefoundry
