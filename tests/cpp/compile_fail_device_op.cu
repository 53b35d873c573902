// Under the CUDA target the op entries are __device__ (spec 3, "Annotation convention"): host
// code calling one must not compile. CMakeLists.txt expects nvcc's refusal.
#include <tilefoundry/runtime.h>

void host_calls_a_device_op(float* p) {
  tilefoundry::ops::fill(cute::make_tensor(p, cute::make_shape(cute::Int<4>{})), 1.0f);
}
