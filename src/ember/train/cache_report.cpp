#include "ember/train/cache_report.hpp"

#include <iomanip>
#include <sstream>

#include "ember/train/replica.hpp"

namespace ember::train {

bool CacheReport::wanted(const std::vector<std::unique_ptr<Replica>>& replicas) {
  for (const auto& r : replicas) {
    for (const auto& e : r->embeddings()) {
      if (e->location() == embedding::StorageLocation::Host) return true;
    }
  }
  return false;
}

std::optional<CacheFigures> CacheReport::report(
    std::int64_t iteration, const std::vector<std::unique_ptr<Replica>>& replicas,
    std::int64_t steps, RunLog& log, std::ostream& out) {
  embedding::CacheStats now;
  std::int64_t tables = 0;
  for (const auto& r : replicas) {
    for (const auto& e : r->embeddings()) {
      const auto s = e->cache_stats();
      if (!s) continue;
      ++tables;
      now.batches += s->batches;
      now.lookups += s->lookups;
      now.hits += s->hits;
      now.fetched += s->fetched;
      now.new_rows += s->new_rows;
      now.written_back += s->written_back;
      now.bytes_to_device += s->bytes_to_device;
      now.bytes_to_host += s->bytes_to_host;
      now.prefetched += s->prefetched;
      now.prefetch_ms += s->prefetch_ms;
      now.exposed_ms += s->exposed_ms;
      now.readback_ms += s->readback_ms;
    }
  }
  if (tables == 0) return std::nullopt;
  const embedding::CacheStats& was = last_;
  const double per = static_cast<double>(std::max<std::int64_t>(steps, 1) * tables);
  const std::int64_t lookups = now.lookups - was.lookups, batches = now.batches - was.batches;
  CacheFigures f;
  f.iteration = iteration;
  f.hit_rate =
      lookups > 0 ? static_cast<double>(now.hits - was.hits) / static_cast<double>(lookups) : 1.0;
  f.fetched_per_step = static_cast<double>(now.fetched - was.fetched) / per;
  f.written_back_per_step = static_cast<double>(now.written_back - was.written_back) / per;
  f.new_per_step = static_cast<double>(now.new_rows - was.new_rows) / per;
  f.mb_per_step = static_cast<double>(now.bytes_to_device - was.bytes_to_device +
                                      now.bytes_to_host - was.bytes_to_host) /
                  1e6 / per;
  f.prefetched = batches > 0 ? static_cast<double>(now.prefetched - was.prefetched) /
                                   static_cast<double>(batches)
                             : 0.0;
  f.exposed_ms_per_step = (now.exposed_ms - was.exposed_ms) / per;
  f.host_ms_per_step = (now.prefetch_ms - was.prefetch_ms) / per;
  f.readback_ms_per_step = (now.readback_ms - was.readback_ms) / per;
  last_ = now;
  std::ostringstream line;
  line << std::setprecision(4) << "cache iter=" << iteration << " hit_rate=" << f.hit_rate
       << " fetched/step=" << f.fetched_per_step << " written_back/step=" << f.written_back_per_step
       << " new/step=" << f.new_per_step << " MB/step=" << f.mb_per_step
       << " prefetched=" << f.prefetched << " exposed_ms/step=" << f.exposed_ms_per_step
       << " host_ms/step=" << f.host_ms_per_step << " readback_ms/step=" << f.readback_ms_per_step;
  out << line.str() << std::endl;
  log.add(iteration, "train", "cache_hit_rate", f.hit_rate);
  log.add(iteration, "train", "cache_fetched_per_step", f.fetched_per_step);
  log.add(iteration, "train", "cache_written_back_per_step", f.written_back_per_step);
  log.add(iteration, "train", "cache_mb_per_step", f.mb_per_step);
  log.add(iteration, "train", "cache_prefetched", f.prefetched);
  log.add(iteration, "train", "cache_exposed_ms_per_step", f.exposed_ms_per_step);
  log.add(iteration, "train", "cache_host_ms_per_step", f.host_ms_per_step);
  log.add(iteration, "train", "cache_readback_ms_per_step", f.readback_ms_per_step);
  return f;
}

}  // namespace ember::train
