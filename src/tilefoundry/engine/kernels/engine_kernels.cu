// The decode engine's hand-written CUDA kernels, one translation unit, exported through tvm-ffi:
// the batch-1 GEMV with fused norm prologue and residual / SwiGLU / argmax / greedy epilogues,
// decode attention over the in-place cache, the fused q/k norm + RoPE + cache write, residual +
// RMSNorm, and SwiGLU. Every slot they serve also compiles from the DSL
// (engine/compiled_kernels.py, CompiledKernels), which is the engine's default since its decode
// reached 0.97x this set's tokens/s (bench/decode_qwen3_1.7b_kernel_sets_h200.json, later: 635.0
// against 645.4, 1.70x the torch static + compile + graph peer). This set runs where it is asked
// for (CudaKernels), as the benches' baseline, and for the slots where it is still faster. Measured
// on the H200 at Qwen3-1.7B's decode shape (2026-12-04, bench/engine_kernels.py, CUDA-graph
// medians, us, hand-written / compiled): q/k/v 7.60 / 7.19, o_proj 5.29 / 4.93, gate/up +
// SwiGLU 14.93 / 14.81, down 11.70 / 9.23: faster compiled. Still faster here: lm_head + the next
// token 155.12 / 159.46 (f5533a6: the compiled head's matmul one wave of 1056 CTAs, 156.7 alone;
// the rest is its argmax's merge and the step's two torch ops, which this kernel's epilogue does),
// and attention at context 128 6.19 / 6.83 (this kernel asks L2 for its slice's cached keys before
// its PDL wait, overlapping the kernel before; the compiled slot waits first: such a prefetch
// measured slower in the compiled step, codegen/cuda/emit.py). Attention at 1024, 4096 and 16384:
// 8.80 / 7.74, 14.88 / 14.39, 37.73 / 38.76 (55910e9, keys counted in int).
//
// Every entry checks its arguments (names, dtypes, shapes, layouts, one CUDA device) before it
// launches on the caller's current stream (what tvm-ffi takes from torch's current stream, also
// under CUDA-graph capture). Outputs are the trailing tensor parameters; scalars come last.
// Built by tilefoundry.engine.library with nvcc for sm_90a.
#include <tilefoundry/runtime.h>

#include "common.cuh"
#include "args.cuh"
#include "launch.cuh"
#include "gemv.cuh"
#include "attention.cuh"
#include "rope_cache.cuh"
#include "rmsnorm.cuh"
#include "swiglu.cuh"

namespace {

using tilefoundry::engine::TensorView;
namespace gemv = tilefoundry::engine::gemv;
using gemv::Epilogue;
using gemv::Prologue;

void gemv_plain(TensorView x, TensorView weight, TensorView out, int64_t split_k) {
  gemv::run<Prologue::none, Epilogue::store>(
      "gemv", {x, nullptr, weight, nullptr, out, nullptr, nullptr, nullptr}, 0.0, split_k);
}

void gemv_residual(TensorView x, TensorView weight, TensorView residual, TensorView out,
                   int64_t split_k) {
  gemv::run<Prologue::none, Epilogue::residual>(
      "gemv_residual", {x, nullptr, weight, &residual, out, nullptr, nullptr, nullptr}, 0.0,
      split_k);
}

void gemv_swiglu(TensorView x, TensorView weight, TensorView out, int64_t split_k) {
  gemv::run<Prologue::none, Epilogue::swiglu>(
      "gemv_swiglu", {x, nullptr, weight, nullptr, out, nullptr, nullptr, nullptr}, 0.0, split_k);
}

void gemv_argmax(TensorView x, TensorView weight, TensorView logits, TensorView token,
                 TensorView workspace, int64_t split_k) {
  gemv::run<Prologue::none, Epilogue::argmax>(
      "gemv_argmax", {x, nullptr, weight, nullptr, logits, &token, &workspace, nullptr}, 0.0,
      split_k);
}

void gemv_greedy(TensorView x, TensorView weight, TensorView logits, TensorView result,
                 TensorView step, TensorView workspace) {
  gemv::run<Prologue::none, Epilogue::greedy>(
      "gemv_greedy", {x, nullptr, weight, nullptr, logits, &result, &workspace, &step}, 0.0, 0);
}

void rmsnorm_gemv(TensorView x, TensorView norm_weight, TensorView weight, TensorView out,
                  double eps, int64_t split_k) {
  gemv::run<Prologue::rmsnorm, Epilogue::store>(
      "rmsnorm_gemv", {x, &norm_weight, weight, nullptr, out, nullptr, nullptr, nullptr}, eps,
      split_k);
}

void rmsnorm_gemv_residual(TensorView x, TensorView norm_weight, TensorView weight,
                           TensorView residual, TensorView out, double eps, int64_t split_k) {
  gemv::run<Prologue::rmsnorm, Epilogue::residual>(
      "rmsnorm_gemv_residual", {x, &norm_weight, weight, &residual, out, nullptr, nullptr, nullptr},
      eps, split_k);
}

void rmsnorm_gemv_swiglu(TensorView x, TensorView norm_weight, TensorView weight, TensorView out,
                         double eps, int64_t split_k) {
  gemv::run<Prologue::rmsnorm, Epilogue::swiglu>(
      "rmsnorm_gemv_swiglu", {x, &norm_weight, weight, nullptr, out, nullptr, nullptr, nullptr},
      eps, split_k);
}

void rmsnorm_gemv_argmax(TensorView x, TensorView norm_weight, TensorView weight, TensorView logits,
                         TensorView token, TensorView workspace, double eps, int64_t split_k) {
  gemv::run<Prologue::rmsnorm, Epilogue::argmax>(
      "rmsnorm_gemv_argmax",
      {x, &norm_weight, weight, nullptr, logits, &token, &workspace, nullptr}, eps, split_k);
}

void rmsnorm_gemv_greedy(TensorView x, TensorView norm_weight, TensorView weight, TensorView logits,
                         TensorView result, TensorView step, TensorView workspace, double eps) {
  gemv::run<Prologue::rmsnorm, Epilogue::greedy>(
      "rmsnorm_gemv_greedy", {x, &norm_weight, weight, nullptr, logits, &result, &workspace, &step},
      eps, 0);
}

void decode_attention(TensorView q, TensorView cache_k, TensorView cache_v, TensorView position,
                      TensorView out, TensorView workspace, double scale, int64_t splits) {
  tilefoundry::engine::attention::run(q, cache_k, cache_v, position, out, workspace, scale, splits);
}

int64_t attention_workspace_bytes(int64_t tokens, int64_t heads, int64_t kv_heads, int64_t head_dim,
                                  int64_t splits, int64_t device) {
  return tilefoundry::engine::attention::workspace_bytes(tokens, heads, kv_heads, head_dim, splits,
                                                         device);
}

void qk_norm_rope_cache(TensorView qkv, TensorView q_norm, TensorView k_norm, TensorView cos,
                        TensorView sin, TensorView position, TensorView q_out, TensorView cache_k,
                        TensorView cache_v, double eps) {
  tilefoundry::engine::rope::run("qk_norm_rope_cache", qkv, &q_norm, &k_norm, cos, sin, position,
                                 q_out, cache_k, cache_v, eps);
}

void rope_cache(TensorView qkv, TensorView cos, TensorView sin, TensorView position,
                TensorView q_out, TensorView cache_k, TensorView cache_v) {
  tilefoundry::engine::rope::run("rope_cache", qkv, nullptr, nullptr, cos, sin, position, q_out,
                                 cache_k, cache_v, 0.0);
}

void rmsnorm(TensorView x, TensorView weight, TensorView out, double eps) {
  tilefoundry::engine::rmsnorm::run("rmsnorm", x, nullptr, weight, out, eps);
}

void add_rmsnorm(TensorView x, TensorView residual, TensorView weight, TensorView out, double eps) {
  tilefoundry::engine::rmsnorm::run("add_rmsnorm", x, &residual, weight, out, eps);
}

void swiglu(TensorView gate, TensorView up, TensorView out) {
  tilefoundry::engine::swiglu::run(gate, up, out);
}

void set_pdl(bool enabled) { tilefoundry::engine::pdl_enabled().store(enabled); }

bool pdl() { return tilefoundry::engine::pdl_enabled().load(); }

/// The tiled GEMV's grid (CTAs per SM; 0: one per row block) and early L2 prefetch (bytes per
/// CTA; 0: each warp's first words), for tuning runs; the defaults are 2 and 32 KiB
/// (gemv_tiled.cuh).
void set_gemv_tuning(int64_t ctas_per_sm, int64_t prefetch_bytes) {
  if (ctas_per_sm < 0 || ctas_per_sm > 64 || prefetch_bytes < 0 || prefetch_bytes > (1 << 24)) {
    TVM_FFI_THROW(ValueError) << "set_gemv_tuning: ctas_per_sm must lie in [0, 64] and "
                                 "prefetch_bytes in [0, 16 MiB]; got "
                              << ctas_per_sm << " and " << prefetch_bytes;
  }
  tilefoundry::engine::gemv::tuning().ctas_per_sm.store(static_cast<int>(ctas_per_sm));
  tilefoundry::engine::gemv::tuning().prefetch_bytes.store(static_cast<int>(prefetch_bytes));
}

/// The streamed GEMV's grid (CTAs per SM), weight ring (bytes of shared memory per CTA; 0: never
/// stream, every launch takes the tiled kernel), stage size (bytes) and the weight sizes it takes
/// (bytes, min to max; the others take the tiled kernel), for tuning runs; the defaults are 2,
/// 48 KiB, 16 KiB, 32 MiB and 128 MiB (gemv_common.cuh says why).
void set_gemv_stream(int64_t ctas_per_sm, int64_t ring_bytes, int64_t stage_bytes,
                     int64_t min_weight_bytes, int64_t max_weight_bytes) {
  if (ctas_per_sm < 1 || ctas_per_sm > 8 || ring_bytes < 0 || ring_bytes > (200 << 10) ||
      stage_bytes < 256 || stage_bytes > (64 << 10) || min_weight_bytes < 0 ||
      max_weight_bytes < min_weight_bytes) {
    TVM_FFI_THROW(ValueError) << "set_gemv_stream: ctas_per_sm must lie in [1, 8], ring_bytes in "
                                 "[0, 200 KiB], stage_bytes in [256, 64 KiB] and 0 <= "
                                 "min_weight_bytes <= max_weight_bytes; got "
                              << ctas_per_sm << ", " << ring_bytes << ", " << stage_bytes << ", "
                              << min_weight_bytes << " and " << max_weight_bytes;
  }
  auto& t = tilefoundry::engine::gemv::tuning();
  t.stream_ctas_per_sm.store(static_cast<int>(ctas_per_sm));
  t.stream_ring_bytes.store(static_cast<int>(ring_bytes));
  t.stream_stage_bytes.store(static_cast<int>(stage_bytes));
  t.stream_min_bytes.store(min_weight_bytes);
  t.stream_max_bytes.store(max_weight_bytes);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(gemv, gemv_plain);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gemv_residual, gemv_residual);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gemv_swiglu, gemv_swiglu);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gemv_argmax, gemv_argmax);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gemv_greedy, gemv_greedy);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(rmsnorm_gemv, rmsnorm_gemv);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(rmsnorm_gemv_residual, rmsnorm_gemv_residual);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(rmsnorm_gemv_swiglu, rmsnorm_gemv_swiglu);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(rmsnorm_gemv_argmax, rmsnorm_gemv_argmax);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(rmsnorm_gemv_greedy, rmsnorm_gemv_greedy);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(decode_attention, decode_attention);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(attention_workspace_bytes, attention_workspace_bytes);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(qk_norm_rope_cache, qk_norm_rope_cache);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(rope_cache, rope_cache);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(rmsnorm, rmsnorm);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_rmsnorm, add_rmsnorm);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(swiglu, swiglu);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(set_pdl, set_pdl);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(pdl, pdl);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(set_gemv_tuning, set_gemv_tuning);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(set_gemv_stream, set_gemv_stream);
