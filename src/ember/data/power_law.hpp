// Keys with a power-law popularity: rank r (0 = hottest) drawn with probability roughly
// proportional to (r + 1)^-alpha over a vocabulary of V ids, by inverting the continuous
// power-law CDF (O(1) time and memory whatever V is). Ranks are then scattered over the ids by a
// fixed bijection so the hot keys are not simply the smallest ids.
#pragma once

#include <cstdint>

namespace ember::data {

class PowerLawSampler {
 public:
  PowerLawSampler() = default;
  // `vocabulary` >= 1 ids; alpha >= 0 (0: uniform); `salt` picks the rank-to-id bijection.
  PowerLawSampler(std::int64_t vocabulary, double alpha, std::uint64_t salt);

  // Rank for a uniform u in [0, 1).
  std::int64_t rank(double u) const;
  // The id of a rank: a bijection of [0, vocabulary).
  std::int64_t id_of_rank(std::int64_t rank) const;
  std::int64_t sample(double u) const { return id_of_rank(rank(u)); }
  std::int64_t vocabulary() const { return vocabulary_; }

 private:
  std::int64_t vocabulary_ = 1;
  double alpha_ = 0;
  double span_ = 0;  // CDF normaliser
  std::int64_t multiplier_ = 1;
  std::int64_t shift_ = 0;
};

}  // namespace ember::data
