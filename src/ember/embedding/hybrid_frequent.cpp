#include "ember/embedding/hybrid_frequent.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

namespace ember::embedding {

double frequent_count_threshold(const HybridConfig& c, const FrequentChoiceInputs& in) {
  constexpr double kNever = std::numeric_limits<double>::infinity();
  const double B = static_cast<double>(in.batch_size), N = in.batches;
  if (B <= 0 || N <= 0) return kNever;
  if (c.rule == FrequentRule::Traffic) {
    if (in.ranks <= 1 || in.exchange_bytes <= 0) return kNever;
    constexpr double kSumBytes = 4.0;  // the frequent rows' gradient sums are all-reduced in f32
    return N * in.ranks * (kSumBytes / in.exchange_bytes) * c.max_all_to_all_bandwidth /
           c.max_all_reduce_bandwidth * c.efficiency_bandwidth_ratio;
  }
  if (c.communication == HybridCommunication::NVLink_SingleNode) {
    const double M = B / std::max(1, in.ranks);
    if (M * (M - 1) <= 0) return kNever;
    return B * N * std::sqrt(2.0 * c.p_dup_max / (M * (M - 1)));
  }
  const double n = in.processes;
  if (n <= 1) return kNever;
  return N * n * c.max_all_to_all_bandwidth / c.max_all_reduce_bandwidth *
         c.efficiency_bandwidth_ratio * n / (n - 1);
}

FrequentChoice choose_frequent_categories(std::vector<std::int64_t>& keys, const HybridConfig& c,
                                          const FrequentChoiceInputs& in) {
  FrequentChoice out;
  out.threshold = frequent_count_threshold(c, in);
  out.lookups = static_cast<std::int64_t>(keys.size());
  out.cap = c.max_num_frequent_categories * std::max(in.batch_size, in.batch_size_eval);
  std::sort(keys.begin(), keys.end());
  std::vector<std::pair<std::int64_t, std::int64_t>> counted;  // (count, key)
  for (std::size_t i = 0; i < keys.size();) {
    std::size_t j = i;
    while (j < keys.size() && keys[j] == keys[i])
      ++j;
    counted.emplace_back(static_cast<std::int64_t>(j - i), keys[i]);
    i = j;
  }
  out.distinct = static_cast<std::int64_t>(counted.size());
  // Most counted first, ties by the smaller key: the same order on every rank and process.
  std::sort(counted.begin(), counted.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  // The categories counted at least `threshold` times: a prefix of `counted`.
  const auto reaching = [&](double threshold) {
    const auto reaches = [threshold](const auto& x) {
      return static_cast<double>(x.first) >= threshold;
    };
    const auto end = std::partition_point(counted.begin(), counted.end(), reaches);
    return static_cast<std::int64_t>(end - counted.begin());
  };
  std::int64_t n = reaching(out.threshold);
  out.above_threshold = n;
  if (c.rule == FrequentRule::HugeCTR) {
    HybridConfig traffic = c;
    traffic.rule = FrequentRule::Traffic;
    out.traffic_rule_count = reaching(frequent_count_threshold(traffic, in));  // 0 on one rank
  }
  const std::int64_t ranks = std::max(1, in.ranks);
  if (n > 0) n = ((n - 1) / ranks + 1) * ranks;
  if (n > out.distinct) n -= ranks;
  out.capped = n > out.cap;
  n = std::clamp<std::int64_t>(n, 0, out.cap);
  for (std::int64_t i = 0; i < n; ++i) {
    out.keys.push_back(counted[i].second);
    out.frequent_lookups += counted[i].first;
  }
  std::sort(out.keys.begin(), out.keys.end());
  return out;
}

std::string FrequentChoice::describe(const HybridConfig& c) const {
  std::ostringstream s;
  s << keys.size() << " frequent categories (of " << distinct << " seen in " << lookups
    << " lookups; ";
  const bool traffic = c.rule == FrequentRule::Traffic;
  if (std::isinf(threshold)) {
    if (traffic) {
      s << "none can be frequent with frequent_rule " << frequent_rule_name(c.rule)
        << " on one rank: nothing is exchanged";
    } else {
      s << "none can be frequent with communication_type "
        << hybrid_communication_name(c.communication) << " on one process";
    }
  } else {
    s << above_threshold << " counted >= " << threshold << " times, "
      << (traffic ? std::string("frequent_rule ") + frequent_rule_name(c.rule)
                  : std::string(hybrid_communication_name(c.communication)));
  }
  if (capped) s << "; capped at max_num_frequent_categories x batch = " << cap;
  if (traffic_rule_count >= 0) {
    s << "; frequent_rule " << frequent_rule_name(FrequentRule::Traffic) << " would pick "
      << traffic_rule_count << ", the set that moves the fewest bytes";
  }
  s << "), " << (lookups > 0 ? 100.0 * static_cast<double>(frequent_lookups) / lookups : 0.0)
    << " % of the lookups";
  return s.str();
}

}  // namespace ember::embedding
