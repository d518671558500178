// What the readers check in every sample's label and dense values before it goes into a batch,
// and what they do with a sample that fails (the Data layer's "bad_sample_policy").
//
// A NaN or an infinity in a dense feature or a label, or a label the loss cannot take (a
// binary cross entropy's label of 3), trains without a word otherwise: the loss becomes NaN or
// quietly wrong. The data layer knows nothing of losses, so the training layer says which labels
// are valid (LabelRange); finiteness is checked whatever the loss.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ember/data/data_config.hpp"

namespace ember::data {

// The labels a loss takes: every label in [min, max], or (masked_below) below that value, which
// the loss skips (MultiCrossEntropyLoss ignores labels below -0.5).
struct LabelRange {
  float min = 0.0f;
  float max = 1.0f;
  std::optional<float> masked_below;
  // Who takes these labels, for messages: e.g. "the BinaryCrossEntropyLoss layer 'loss'".
  std::string taken_by;
};

struct SampleChecks {
  BadSamplePolicy policy = BadSamplePolicy::Error;
  std::optional<LabelRange> labels;  // unset: any finite label
};

// The first value of a sample that fails: which part, which column, the value.
struct SampleProblem {
  bool in_label = false;
  std::int64_t column = 0;
  float value = 0.0f;
};

class SampleValidator {
 public:
  SampleValidator(SampleChecks checks, std::int64_t label_dim, std::int64_t dense_dim);

  // The sample's first bad value, if any (label columns first, then dense).
  std::optional<SampleProblem> find(const float* label, const float* dense) const {
    if (all_good(label, dense)) [[likely]]
      return std::nullopt;
    return locate(label, dense);
  }
  // "label column 0 is 2.5, outside [0, 1], the labels the BinaryCrossEntropyLoss layer 'loss'
  // takes" / "dense column 3 is NaN".
  std::string describe(const SampleProblem& problem) const;
  BadSamplePolicy policy() const { return checks_.policy; }
  const SampleChecks& checks() const { return checks_; }

 private:
  bool all_good(const float* label, const float* dense) const;
  std::optional<SampleProblem> locate(const float* label, const float* dense) const;
  bool label_ok(float v) const;

  SampleChecks checks_;
  std::int64_t label_dim_, dense_dim_;
};

// Says what happens next, for the end of messages about a bad sample under policy Error:
// `(the Data layer's "bad_sample_policy": "drop" drops such samples instead)`.
std::string bad_sample_hint();

}  // namespace ember::data
