#include "ember/optim/optimizer_json.hpp"

#include <string>
#include <vector>

#include "ember/core/log.hpp"

namespace ember::optim {

namespace {

constexpr OptimizerType kOptimizerTypes[] = {OptimizerType::SGD,      OptimizerType::MomentumSGD,
                                             OptimizerType::Nesterov, OptimizerType::Adam,
                                             OptimizerType::AdaGrad,  OptimizerType::RMSProp,
                                             OptimizerType::Ftrl};
constexpr UpdateType kUpdateTypes[] = {UpdateType::Local, UpdateType::Global,
                                       UpdateType::LazyGlobal};

// The names come from optimizer_name() and update_type_name(), so they are spelled once.
template <class T, std::size_t N>
std::vector<Named<T>> named(const T (&values)[N], const char* (*name)(T)) {
  std::vector<Named<T>> out;
  for (T v : values)
    out.push_back({name(v), v});
  return out;
}

const char* hparam_block_name(OptimizerType type) {
  switch (type) {
    case OptimizerType::SGD:
      return "sgd_hparam";
    case OptimizerType::MomentumSGD:
      return "momentum_sgd_hparam";
    case OptimizerType::Nesterov:
      return "nesterov_hparam";
    case OptimizerType::Adam:
      return "adam_hparam";
    case OptimizerType::AdaGrad:
      return "adagrad_hparam";
    case OptimizerType::RMSProp:
      return "rmsprop_hparam";
    case OptimizerType::Ftrl:
      return "ftrl_hparam";
  }
  return "?";
}

// The keys of the type's own hparam block; a key of another type's block is unknown.
void read_hparams(ConfigReader& hp, OptimizerConfig& c) {
  auto& s = c.schedule;
  s.base_lr = static_cast<float>(hp.number_or("learning_rate", s.base_lr));
  s.warmup_steps = hp.integer_or("warmup_steps", s.warmup_steps);
  s.decay_start = hp.integer_or("decay_start", s.decay_start);
  s.decay_steps = hp.integer_or("decay_steps", s.decay_steps);
  s.decay_power = static_cast<float>(hp.number_or("decay_power", s.decay_power));
  s.end_lr = static_cast<float>(hp.number_or("end_lr", s.end_lr));
  switch (c.type) {
    case OptimizerType::SGD:
      if (hp.has("atomic_update")) {
        c.atomic_update = hp.boolean("atomic_update");
        log_once("sgd atomic_update", spdlog::level::info,
                 cat(hp.owner(), ": \"", hp.key_path("atomic_update"), "\" is ",
                     c.atomic_update ? "true" : "false",
                     ", which changes nothing in Ember: HugeCTR's flag picks atomic adds of the "
                     "sparse gradients; Ember always sums each row's gradients in a fixed order "
                     "and applies them once (deterministic, the same on every device)"));
      }
      break;
    case OptimizerType::MomentumSGD:
    case OptimizerType::Nesterov:
      c.momentum_factor = static_cast<float>(hp.number_or("momentum_factor", c.momentum_factor));
      break;
    case OptimizerType::Adam:
      c.beta1 = static_cast<float>(hp.number_or("beta1", c.beta1));
      c.beta2 = static_cast<float>(hp.number_or("beta2", c.beta2));
      c.epsilon = static_cast<float>(hp.number_or("epsilon", c.epsilon));
      break;
    case OptimizerType::AdaGrad:
      c.initial_accu_value =
          static_cast<float>(hp.number_or("initial_accu_value", c.initial_accu_value));
      c.epsilon = static_cast<float>(hp.number_or("epsilon", c.epsilon));
      break;
    case OptimizerType::RMSProp:
      c.rmsprop_beta = static_cast<float>(hp.number_or("beta", c.rmsprop_beta));
      c.epsilon = static_cast<float>(hp.number_or("epsilon", c.epsilon));
      break;
    case OptimizerType::Ftrl:
      c.ftrl_beta = static_cast<float>(hp.number_or("beta", c.ftrl_beta));
      c.lambda1 = static_cast<float>(hp.number_or("lambda1", c.lambda1));
      c.lambda2 = static_cast<float>(hp.number_or("lambda2", c.lambda2));
      break;
  }
}

}  // namespace

OptimizerConfig parse_optimizer(ConfigReader& r) {
  static const auto types = named(kOptimizerTypes, optimizer_name);
  static const auto update_types = named(kUpdateTypes, update_type_name);
  OptimizerConfig c;
  c.type = r.choice("type", std::span<const Named<OptimizerType>>(types));
  const bool global = r.boolean_or("global_update", false);
  c.update_type = r.choice_or("update_type", global ? UpdateType::Global : UpdateType::Local,
                              std::span<const Named<UpdateType>>(update_types));
  // Defaults follow HugeCTR's Python API.
  c.schedule.base_lr = (c.type == OptimizerType::Adam || c.type == OptimizerType::AdaGrad ||
                        c.type == OptimizerType::RMSProp)
                           ? 0.001f
                           : 0.01f;
  const std::string own_block = hparam_block_name(c.type);
  if (auto hp = r.optional_object(own_block)) read_hparams(*hp, c);
  // HugeCTR's files often carry every type's block; only the chosen type's is read.
  const std::string why = std::string("the optimizer type is ") + optimizer_name(c.type);
  std::vector<IgnoredKey> other_blocks;
  for (OptimizerType t : kOptimizerTypes) {
    if (t != c.type) other_blocks.push_back({hparam_block_name(t), why});
  }
  r.ignore(other_blocks);
  r.finish();
  validate(c, r.owner(), r.key_path(own_block) + ".");
  return c;
}

}  // namespace ember::optim
