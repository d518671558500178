#include "ember/train/metrics.hpp"

#include <cmath>

#include "ember/core/error.hpp"
#include "ember/data/auc.hpp"

namespace ember::train {

double binary_cross_entropy(double x, double y) {
  return std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::fabs(x)));
}

namespace {
double sigmoid(double x) {
  return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
}
}  // namespace

EvalAccumulator::EvalAccumulator(network::LossLayer::Kind kind, std::vector<float> target_weight,
                                 std::optional<double> hit_rate_threshold)
    : kind_(kind),
      target_weight_(std::move(target_weight)),
      hit_rate_threshold_(hit_rate_threshold) {}

void EvalAccumulator::add(std::span<const float> logits, std::span<const float> labels,
                          std::int64_t rows) {
  if (rows == 0) return;
  const std::size_t n = static_cast<std::size_t>(rows);
  EMBER_CHECK(logits.size() % n == 0 && labels.size() % n == 0, "evaluation: ", logits.size(),
              " logits and ", labels.size(), " labels do not split into ", rows, " rows");
  const std::size_t lc = logits.size() / n, yc = labels.size() / n;
  switch (kind_) {
    case network::LossLayer::Kind::BinaryCrossEntropy:
      EMBER_CHECK(lc == 1 && yc == 1,
                  "evaluation: BinaryCrossEntropy expects one logit and one "
                  "label per sample, got ",
                  lc, " and ", yc);
      for (std::size_t i = 0; i < n; ++i) {
        scores_.push_back(sigmoid(logits[i]));
        labels_.push_back(labels[i]);
        loss_sum_ += binary_cross_entropy(logits[i], labels[i]);
      }
      samples_ += rows;
      break;
    case network::LossLayer::Kind::CrossEntropy:
      EMBER_CHECK(lc == 2 && yc == 1,
                  "evaluation: CrossEntropy expects two logits and one label "
                  "per sample, got ",
                  lc, " and ", yc);
      for (std::size_t i = 0; i < n; ++i) {
        const double a = logits[2 * i], b = logits[2 * i + 1], m = std::max(a, b);
        const double log_z = m + std::log(std::exp(a - m) + std::exp(b - m));
        const bool positive = labels[i] >= 0.5f;
        scores_.push_back(std::exp(b - log_z));
        labels_.push_back(positive ? 1.0f : 0.0f);
        loss_sum_ += log_z - (positive ? b : a);
      }
      samples_ += rows;
      break;
    case network::LossLayer::Kind::MultiCrossEntropy: {
      EMBER_CHECK(lc == yc,
                  "evaluation: MultiCrossEntropy expects as many logits as labels per "
                  "sample, got ",
                  lc, " and ", yc);
      for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t c = 0; c < lc; ++c) {
          const float y = labels[i * yc + c];
          if (y < -0.5f) continue;  // a masked entry
          const double w = target_weight_.empty() ? 1.0 : target_weight_[c];
          scores_.push_back(sigmoid(logits[i * lc + c]));
          labels_.push_back(y);
          loss_sum_ += w * binary_cross_entropy(logits[i * lc + c], y) / static_cast<double>(lc);
        }
      }
      samples_ += rows;
      break;
    }
  }
}

EvalResult EvalAccumulator::finish() const {
  EvalResult r;
  r.samples = samples_;
  r.average_loss = samples_ > 0 ? loss_sum_ / static_cast<double>(samples_) : std::nan("");
  r.auc = data::exact_auc(scores_, labels_);
  r.nan_scores = static_cast<std::int64_t>(data::count_nan(scores_));
  if (hit_rate_threshold_) {
    // HugeCTR's HitRate: of the scores above the threshold, the fraction whose label is 1.
    std::int64_t predicted = 0, hits = 0;
    for (std::size_t i = 0; i < scores_.size(); ++i) {
      if (!(scores_[i] > *hit_rate_threshold_)) continue;
      ++predicted;
      if (labels_[i] > 0.5f) ++hits;
    }
    r.hit_rate =
        predicted > 0 ? static_cast<double>(hits) / static_cast<double>(predicted) : std::nan("");
  }
  return r;
}

}  // namespace ember::train
