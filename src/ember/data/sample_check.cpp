#include "ember/data/sample_check.hpp"

#include <cmath>
#include <cstring>

#include "ember/core/error.hpp"

namespace ember::data {

namespace {

// NaN and the infinities have every exponent bit set; a bit test vectorises where std::isfinite
// on a loop of floats may not.
bool finite_bits(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return (bits & 0x7f800000u) != 0x7f800000u;
}

std::string number(float v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+infinity" : "-infinity";
  return cat(v);
}

}  // namespace

SampleValidator::SampleValidator(SampleChecks checks, std::int64_t label_dim,
                                 std::int64_t dense_dim)
    : checks_(std::move(checks)), label_dim_(label_dim), dense_dim_(dense_dim) {
  if (checks_.labels) {
    const LabelRange& r = *checks_.labels;
    EMBER_CHECK(r.min <= r.max, "label range [", r.min, ", ", r.max, "] is empty");
  }
}

bool SampleValidator::label_ok(float v) const {
  if (!finite_bits(v)) return false;
  if (!checks_.labels) return true;
  const LabelRange& r = *checks_.labels;
  if (v >= r.min && v <= r.max) return true;
  return r.masked_below && v < *r.masked_below;
}

bool SampleValidator::all_good(const float* label, const float* dense) const {
  bool ok = true;
  for (std::int64_t j = 0; j < dense_dim_; ++j)
    ok &= finite_bits(dense[j]);
  for (std::int64_t j = 0; j < label_dim_; ++j)
    ok &= label_ok(label[j]);
  return ok;
}

std::optional<SampleProblem> SampleValidator::locate(const float* label, const float* dense) const {
  for (std::int64_t j = 0; j < label_dim_; ++j) {
    if (!label_ok(label[j])) return SampleProblem{true, j, label[j]};
  }
  for (std::int64_t j = 0; j < dense_dim_; ++j) {
    if (!finite_bits(dense[j])) return SampleProblem{false, j, dense[j]};
  }
  return std::nullopt;
}

std::string SampleValidator::describe(const SampleProblem& p) const {
  std::string out =
      cat(p.in_label ? "label" : "dense", " column ", p.column, " is ", number(p.value));
  if (p.in_label && finite_bits(p.value) && checks_.labels) {
    const LabelRange& r = *checks_.labels;
    out += cat(", outside [", r.min, ", ", r.max, "]");
    if (r.masked_below) out += cat(" (or below ", *r.masked_below, ", masked)");
    out +=
        cat(", the labels ", r.taken_by.empty() ? std::string("the loss") : r.taken_by, " takes");
  }
  return out;
}

std::string bad_sample_hint() {
  return "(the Data layer's \"bad_sample_policy\": \"drop\" drops such samples instead)";
}

}  // namespace ember::data
