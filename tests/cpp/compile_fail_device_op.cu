// Under the CUDA target every public op entry is __device__ (spec 3, "Annotation convention"):
// host code calling one must not compile. CMakeLists.txt compiles this file once per entry, the
// entry picked by CASE_<ENTRY>, and expects nvcc's refusal naming that entry. Each call is
// otherwise well-formed (cuda_instantiate.cu makes the same calls from device code), so the
// refusal can only come from the call's host side.
#include <tilefoundry/runtime.h>

using namespace tilefoundry;
using cute::Int;

void host_calls_a_device_op(float* p, float* q) {
  auto x = cute::make_tensor(cute::make_gmem_ptr(p), cute::make_shape(Int<8>{}));
  auto y = cute::make_tensor(cute::make_gmem_ptr(q), cute::make_shape(Int<8>{}));
  (void)x;
  (void)y;
#if defined(CASE_FILL)
  ops::fill(y, 1.0f);
#elif defined(CASE_COPY)
  ops::copy(x, y);
#elif defined(CASE_UNARY)
  ops::unary(ops::relu_op{}, x, y);
#elif defined(CASE_BINARY)
  ops::binary(ops::add_op{}, x, x, y);
#elif defined(CASE_TERNARY)
  ops::ternary(ops::select_op{}, x, x, x, y);
#elif defined(CASE_REDUCE)
  auto r = cute::make_tensor(cute::make_gmem_ptr(q), cute::make_shape(Int<1>{}));
  ops::reduce<ops::sum_op, cute::seq<0> >(x, r);
#elif defined(CASE_SYNC)
  ops::sync<ops::SyncKind::cta>();
#elif defined(CASE_COPY_ASYNC)
  auto staged = cute::make_tensor(cute::make_smem_ptr(q), cute::make_shape(Int<8>{}));
  ops::copy_async(x, staged);
#elif defined(CASE_CP_ASYNC_COMMIT)
  ops::cp_async_commit();
#elif defined(CASE_CP_ASYNC_WAIT)
  ops::cp_async_wait<0>();
#else
#error "compile_fail_device_op.cu: define one CASE_<ENTRY>"
#endif
}
