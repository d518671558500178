// Simulated processes for shared reading tests (key_exchange.hpp): pipelines of one test, as
// threads, whose exchange is a rendezvous (data/thread_exchange.hpp).
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <vector>

#include "ember/data/data_source.hpp"
#include "ember/data/pipeline.hpp"
#include "ember/data/thread_exchange.hpp"

namespace ember::data::datatest {

// `processes` pipelines of simulated processes, made at once (their construction agrees on the
// reader worker count through the exchange): process p's with `options(p)` and an exchange
// among them.
inline std::vector<std::unique_ptr<Pipeline>> process_pipelines(
    int processes, const std::function<std::shared_ptr<DataSource>()>& source,
    const std::function<PipelineOptions(int)>& options) {
  auto hub = std::make_shared<ThreadRendezvous>(processes);
  std::vector<std::future<std::unique_ptr<Pipeline>>> made;
  for (int p = 0; p < processes; ++p) {
    made.push_back(std::async(std::launch::async, [&, p] {
      PipelineOptions o = options(p);
      o.exchange = std::make_shared<ThreadExchange>(hub, p);
      return std::make_unique<Pipeline>(source(), o);
    }));
  }
  std::vector<std::unique_ptr<Pipeline>> out;
  for (auto& f : made)
    out.push_back(f.get());
  return out;
}

// The next batch of every pipeline, in order.
inline std::vector<std::optional<Batch>> next_of_each(
    const std::vector<std::unique_ptr<Pipeline>>& pipelines) {
  std::vector<std::optional<Batch>> out;
  for (const auto& p : pipelines)
    out.push_back(p->next());
  return out;
}

}  // namespace ember::data::datatest
