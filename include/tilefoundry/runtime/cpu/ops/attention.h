// ops::attention and ops::attention_combine on the CPU target. Only the annotation is this
// target's: the bodies are attention_impl's general tier and combine, which the CUDA target's
// entries run too.
#pragma once

#include <tilefoundry/runtime/common/config.h>
#include <tilefoundry/runtime/common/ops/attention_impl.h>

#include <cstdint>

namespace tilefoundry {
namespace ops {

/// The attention family's entry: this CTA's slice `split` of `splits` of the keys, softmax(scores)
/// @ v for q (G x M x D) against keys k (D x N) and values v (N x Dv), the slice's state into part
/// (G x M x (Dv + 2) floats) for attention_combine. Every key visible.
template <class Acc, class Scores, class Q, class K, class V, class Part>
inline void attention(Scores scores, Q const& q, K const& k, V const& v, Part&& part, int64_t split,
                      int64_t splits) {
  attention_impl::general<Acc>(scores, attention_impl::visible_always{}, q, k, v, part, split,
                               splits);
}

/// ... key n visible to query row m where cmp(kpos(n), qpos(m)) (a causal mask from positions).
template <class Acc, class Scores, class Cmp, class QPos, class KPos, class Q, class K, class V,
          class Part>
inline void attention(Scores scores, Cmp cmp, QPos const& qpos, KPos const& kpos, Q const& q,
                      K const& k, V const& v, Part&& part, int64_t split, int64_t splits) {
  attention_impl::visible_where<Cmp, QPos, KPos> const visible{cmp, qpos, kpos};
  attention_impl::general<Acc>(scores, visible, q, k, v, part, split, splits);
}

/// The slices' states part (S x G x M x (Dv + 2)) merged into out (G x M x Dv).
template <class Part, class Out>
inline void attention_combine(Part const& part, Out&& out) {
  attention_impl::combine(part, out);
}

}  // namespace ops
}  // namespace tilefoundry
