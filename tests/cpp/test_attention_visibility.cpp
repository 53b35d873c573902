// The visibilities of ops::attention (attention_impl.h): a tile of keys is called whole (all) only
// where testing each key would find every one visible; the prompt tiers skip the per-key test
// there.
#include <tilefoundry/runtime.h>

#include <cstdint>
#include <vector>

#include "test_util.h"

namespace {

using namespace tilefoundry;

// Every span [first, last] of keys 0..19 against query positions -2..21: all() agrees with testing
// each key where it says yes, and for a causal mask (le, lt) it says yes wherever each key is.
template <class Cmp>
void check_index_visibility(bool exact) {
  std::vector<int32_t> positions = {0};
  auto const qpos = cute::make_tensor(positions.data(), cute::make_layout(cute::make_shape(1)));
  ops::attention_impl::visible_index<Cmp, decltype(qpos), int32_t> const visible{Cmp{}, qpos};
  for (int32_t pos = -2; pos < 22; ++pos) {
    for (int64_t first = 0; first < 20; ++first) {
      for (int64_t last = first; last < 20; ++last) {
        bool each = true;
        for (int64_t n = first; n <= last; ++n) each = each && visible.test(visible.key(n), pos);
        bool const whole = visible.all(first, last, pos);
        EXPECT_TRUE(!whole || each) << "pos " << pos << " keys " << first << ".." << last;
        if (exact) {
          EXPECT_EQ(whole, each) << "pos " << pos << " keys " << first << ".." << last;
        }
      }
    }
  }
}

TEST(AttentionVisibility, ACausalTileIsWholeExactlyWhereEveryKeyIsVisible) {
  check_index_visibility<ops::le_op>(true);
  check_index_visibility<ops::lt_op>(true);
}

TEST(AttentionVisibility, OtherComparisonsAreNeverCalledWhole) {
  check_index_visibility<ops::ge_op>(false);
  std::vector<int32_t> positions = {0};
  auto const pos = cute::make_tensor(positions.data(), cute::make_layout(cute::make_shape(1)));
  ops::attention_impl::visible_where<ops::le_op, decltype(pos), decltype(pos)> const where{
      ops::le_op{}, pos, pos};
  EXPECT_FALSE(where.all(0, 0, 5));  // positions read key by key: never known whole
  EXPECT_TRUE(ops::attention_impl::visible_always{}.all(0, 100, 0));
}

}  // namespace
