#include "ember/optim/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "ember/core/config_reader.hpp"
#include "ember/core/error.hpp"

namespace ember::optim {

const char* optimizer_name(OptimizerType type) {
  switch (type) {
    case OptimizerType::SGD:
      return "SGD";
    case OptimizerType::MomentumSGD:
      return "MomentumSGD";
    case OptimizerType::Nesterov:
      return "Nesterov";
    case OptimizerType::Adam:
      return "Adam";
    case OptimizerType::AdaGrad:
      return "AdaGrad";
    case OptimizerType::RMSProp:
      return "RMSProp";
    case OptimizerType::Ftrl:
      return "Ftrl";
  }
  return "?";
}

const char* update_type_name(UpdateType type) {
  switch (type) {
    case UpdateType::Local:
      return "Local";
    case UpdateType::Global:
      return "Global";
    case UpdateType::LazyGlobal:
      return "LazyGlobal";
  }
  return "?";
}

int OptimizerConfig::state_count() const {
  switch (type) {
    case OptimizerType::SGD:
      return 0;
    case OptimizerType::MomentumSGD:
    case OptimizerType::Nesterov:
    case OptimizerType::AdaGrad:
    case OptimizerType::RMSProp:
      return 1;
    case OptimizerType::Adam:
    case OptimizerType::Ftrl:
      return 2;
  }
  return 0;
}

float OptimizerConfig::initial_state(int slot) const {
  return (type == OptimizerType::AdaGrad && slot == 0) ? initial_accu_value : 0.0f;
}

void validate(const OptimizerConfig& c, const std::string& where, std::string_view key_prefix) {
  const auto& s = c.schedule;
  auto need = [&](bool ok, const char* key, auto value, const char* rule) {
    if (!ok) invalid_config(where, cat(key_prefix, key), rule, value);
  };
  need(s.base_lr >= 0 && std::isfinite(s.base_lr), "learning_rate", s.base_lr, ">= 0");
  need(s.warmup_steps >= 1, "warmup_steps", s.warmup_steps, ">= 1");
  need(s.decay_start >= 0, "decay_start", s.decay_start, ">= 0");
  need(s.decay_steps >= 1, "decay_steps", s.decay_steps, ">= 1");
  need(s.decay_power >= 1.0f, "decay_power", s.decay_power, ">= 1");
  need(s.end_lr >= 0, "end_lr", s.end_lr, ">= 0");
  if (c.type == OptimizerType::Adam) {
    need(c.beta1 >= 0 && c.beta1 < 1, "beta1", c.beta1, "in [0, 1)");
    need(c.beta2 >= 0 && c.beta2 < 1, "beta2", c.beta2, "in [0, 1)");
  }
  if (c.type == OptimizerType::RMSProp) {
    need(c.rmsprop_beta >= 0 && c.rmsprop_beta < 1, "beta", c.rmsprop_beta, "in [0, 1)");
  }
  if (c.type == OptimizerType::Adam || c.type == OptimizerType::AdaGrad ||
      c.type == OptimizerType::RMSProp) {
    need(c.epsilon > 0, "epsilon", c.epsilon, "> 0");
  }
  if (c.type == OptimizerType::AdaGrad) {
    need(c.initial_accu_value >= 0, "initial_accu_value", c.initial_accu_value, ">= 0");
  }
  if (c.type == OptimizerType::Ftrl) {
    // The rule divides by the rate: it must stay positive (warm-up starts above 0 already).
    need(s.base_lr > 0, "learning_rate", s.base_lr, "> 0 for Ftrl (its rule divides by the rate)");
    need(s.decay_start == 0 || s.end_lr > 0, "end_lr", s.end_lr,
         "> 0 for Ftrl when the rate decays (its rule divides by the rate)");
    need(c.ftrl_beta >= 0 && std::isfinite(c.ftrl_beta), "beta", c.ftrl_beta, ">= 0");
    need(c.lambda1 >= 0 && std::isfinite(c.lambda1), "lambda1", c.lambda1, ">= 0");
    need(c.lambda2 >= 0 && std::isfinite(c.lambda2), "lambda2", c.lambda2, ">= 0");
  }
}

float LearningRateSchedule::next() {
  ++step_;
  return at(step_);
}

float LearningRateSchedule::at(std::int64_t step) const {
  const auto& c = config_;
  if (step <= c.warmup_steps) {
    return static_cast<float>(static_cast<double>(step) * c.base_lr / c.warmup_steps);
  }
  if (c.decay_start == 0 || step <= c.decay_start) return c.base_lr;
  // HugeCTR computes the remaining fraction in unsigned arithmetic, which wraps past the end of
  // the decay; the intent (and what Ember does) is to stay at end_lr from then on.
  if (step >= c.decay_start + c.decay_steps) return c.end_lr;
  const double remaining = static_cast<double>(c.decay_start + c.decay_steps - step) /
                           static_cast<double>(c.decay_steps);
  const float lr = static_cast<float>(c.base_lr * std::pow(remaining, c.decay_power));
  return std::max(lr, c.end_lr);
}

UpdateStep store_sum_step() {
  UpdateStep u;
  u.type = OptimizerType::SGD;
  u.lr = -1.0f;
  u.inv_scaler = 1.0f;
  return u;
}

UpdateStep make_update_step(const OptimizerConfig& config, float lr, std::int64_t t, float scaler) {
  EMBER_CHECK(t >= 1, "optimizer step numbers start at 1, got ", t);
  EMBER_CHECK(scaler > 0, "loss scaler must be positive, got ", scaler);
  UpdateStep u;
  u.type = config.type;
  u.lr = lr;
  u.momentum = config.momentum_factor;
  u.beta1 = config.beta1;
  // RMSProp's mean square decays like Adam's second moment: the rule reads it from beta2.
  u.beta2 = config.type == OptimizerType::RMSProp ? config.rmsprop_beta : config.beta2;
  u.epsilon = config.epsilon;
  u.inv_scaler = 1.0f / scaler;
  if (config.type == OptimizerType::Ftrl) {
    EMBER_CHECK(lr > 0, "Ftrl needs a positive learning rate, got ", lr);
    u.lambda1 = config.lambda1;
    ftrl_rate_terms(lr, config.ftrl_beta, config.lambda2, u.inv_lr, u.ftrl_l2);
  }
  if (config.type == OptimizerType::Adam) {
    const double td = static_cast<double>(t);
    u.adam_alpha = static_cast<float>(lr * std::sqrt(1.0 - std::pow(config.beta2, td)) /
                                      (1.0 - std::pow(config.beta1, td)));
  }
  return u;
}

}  // namespace ember::optim
