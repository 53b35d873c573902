// CuTe's own tensor algorithms, which spec 3.1 and 3.2 name as cute::copy and cute::fill, made
// reachable through <tilefoundry/runtime.h> (CuTe's other algorithms, such as cute::clear, come
// with them). They are CuTe's, unchanged. cute/tensor.hpp is the one CuTe header that includes
// them in an order that compiles: they refer to each other's types.
//
// cute::copy between two tensors with static layouts assumes both pointers 16-byte aligned
// (CuTe's choice, made for register fragments). ops::copy checks alignment at run time; it is
// the entry generated code calls.
#pragma once

#include <tilefoundry/runtime/common/config.h>

#include <cute/tensor.hpp>
