// bench_data's Parquet part. The DLRM set is written again as Parquet (Ember's writer, the same
// samples and keys): SNAPPY with INT64 keys (the writers' default), SNAPPY with INT32 keys,
// uncompressed, ZSTD, and SNAPPY with keys folded into vocabularies of 10000 (dictionary pages),
// each where this build writes it. Each is read by one thread and set
// against Norm's parser and against the limit its pages set: decoding the same pages with the
// codec alone (libsnappy, Ember's own SNAPPY decoder, libzstd) or, for uncompressed pages, one
// read of every byte. Then the pipeline into host batches (and cuda:0), and DuckDB reading the
// same files (SELECT into memory) as the peer.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#if EMBER_WITH_SNAPPY
#include <snappy-c.h>
#endif
#if EMBER_WITH_ZSTD
#include <zstd.h>
#endif

#include "data/bench_data_support.hpp"
#include "ember/core/error.hpp"
#include "ember/data/parquet/parquet_file.hpp"
#include "ember/data/parquet/parquet_reader.hpp"
#include "ember/data/parquet/parquet_source.hpp"
#include "ember/data/parquet/parquet_writer.hpp"
#include "ember/data/parquet/snappy_decoder.hpp"

#ifndef EMBER_WITH_SNAPPY
#define EMBER_WITH_SNAPPY 0
#endif
#ifndef EMBER_WITH_ZSTD
#define EMBER_WITH_ZSTD 0
#endif

namespace ember::benchdata {

namespace fs = std::filesystem;
using namespace ember::data;

namespace {

// The one-hot DLRM set again as Parquet in HugeCTR's layout (its own folder): the same samples
// and keys (stored as they are, no slot_size_array), Ember's writer with `codec`. With a
// `vocabulary`, slot s's keys are folded into [s * 100000, s * 100000 + vocabulary), so that they
// repeat and the writer stores dictionary pages.
Dataset write_parquet_dataset(const fs::path& dir, const std::string& name, std::int64_t samples,
                              int files, int threads, parquet::Codec codec,
                              parquet::PhysicalType key_type, std::int64_t vocabulary) {
  const fs::path folder = dir / name;
  fs::create_directories(folder);
  Dataset d;
  d.name = name;
  d.samples = samples;
  d.layout.label_dim = 1;
  d.layout.dense_dim = 13;
  d.layout.key_type = DType::U32;
  d.layout.sparse.push_back({"data1", 26, 26, 1});
  auto options = parquet::ParquetWriterOptions::with_default_names(1, 13, 26);
  options.codec = codec;
  options.key_type = key_type;
  std::vector<parquet::WrittenFile> written(static_cast<std::size_t>(files));
  std::vector<std::thread> pool;
  std::atomic<int> next{0};
  for (int t = 0; t < std::max(1, threads); ++t) {
    pool.emplace_back([&] {
      for (int f = next++; f < files; f = next++) {
        const std::string path = (folder / ("part_" + std::to_string(f) + ".parquet")).string();
        parquet::ParquetWriter w(path, options);
        std::vector<float> label(1), dense(13);
        std::vector<std::int32_t> nnz(26);
        std::vector<std::uint32_t> keys;
        std::vector<std::int64_t> keys64;
        const std::int64_t begin = samples * f / files, end = samples * (f + 1) / files;
        for (std::int64_t i = begin; i < end; ++i) {
          draw_sample(i, 1, label, dense, nnz, keys);
          keys64.assign(keys.begin(), keys.end());
          for (std::size_t k = 0; k < keys64.size() && vocabulary > 0; ++k) {
            const auto base = static_cast<std::int64_t>(k) * 100000;
            keys64[k] = base + (keys64[k] - base) % vocabulary;
          }
          w.write(label, dense, nnz, keys64);
        }
        w.close();
        written[static_cast<std::size_t>(f)] = {path, w.rows()};
      }
    });
  }
  for (auto& t : pool)
    t.join();
  d.list = (folder / "_file_list.txt").string();
  parquet::write_parquet_layout(folder.string(), d.list, written, options);
  for (const auto& w : written) {
    d.bytes += fs::file_size(w.path);
    d.files.push_back(w.path);
  }
  const std::string list = d.list;
  const BatchLayout layout = d.layout;
  d.make_source = [list, layout] {
    return std::make_shared<parquet::ParquetSource>(list, layout, std::vector<std::int64_t>{});
  };
  return d;
}

// One thread, ParquetFileReader straight into a batch buffer (decompressing and decoding every
// column); compared per CPU-second with the Norm parser on the same samples.
struct ParserRate {
  double wall = 0, cpu = 0;  // samples per second and per CPU-second
};

ParserRate bench_parquet_parser(const Dataset& d, double norm_samples_per_cpu_s,
                                std::vector<std::string>& summary) {
  parquet::ParquetFileReader reader(d.layout, {});
  HostBatch batch(d.layout, 65536);
  std::vector<parquet::HugeCtrMetadata> metadata;
  for (const auto& f : d.files)
    metadata.push_back(parquet::read_hugectr_metadata(parquet::metadata_path_for(f)));
  double best = 1e30, best_cpu = 1e30;
  std::int64_t samples = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    const double c0 = thread_cpu_seconds();
    samples = 0;
    for (std::size_t f = 0; f < d.files.size(); ++f) {
      reader.open(d.files[f], metadata[f]);
      while (!reader.done()) {
        batch.clear();
        samples += reader.read(batch);
      }
    }
    best = std::min(best, seconds_since(t0));
    best_cpu = std::min(best_cpu, thread_cpu_seconds() - c0);
  }
  const double rate = static_cast<double>(samples) / best_cpu;
  std::printf(
      "  parser, 1 thread           %8.2f M samples/s  %6.2f GB/s of file wall; %.2f M samples "
      "per CPU-second = %.2fx Norm's\n",
      static_cast<double>(samples) / best / 1e6, static_cast<double>(d.bytes) / best / 1e9,
      rate / 1e6, rate / norm_samples_per_cpu_s);
  char line[256];
  std::snprintf(line, sizeof line,
                "SUMMARY | data | Parquet parse 1 thread (%s) / Norm parse, per CPU-second | %.2fx "
                "| >= 1x | %s",
                d.name.c_str(), rate / norm_samples_per_cpu_s,
                rate >= norm_samples_per_cpu_s ? "yes" : "no");
  summary.emplace_back(line);
  return {static_cast<double>(samples) / best, rate};
}

// Where node finds @duckdb/node-api: EMBER_DUCKDB_NODE_MODULES, the build tree (CTest's setup
// step installs it there), or the test fixtures' folder.
std::string duckdb_node_modules() {
  std::vector<fs::path> homes;
  if (const char* e = std::getenv("EMBER_DUCKDB_NODE_MODULES")) homes.emplace_back(e);
  homes.emplace_back(fs::path(EMBER_BENCH_BUILD_DIR) / "duckdb-node" / "node_modules");
  homes.emplace_back(fs::path(EMBER_BENCH_DATA_DIR) / ".." / ".." / "tests" / "data" / "fixtures" /
                     "parquet" / "node_modules");
  for (const auto& h : homes) {
    if (fs::exists(h / "@duckdb" / "node-api")) return fs::canonical(h).string();
  }
  return {};
}

// The DuckDB peer: DuckDB's own Parquet reader materialising every column of the same files in
// memory with `threads` threads (best of its runs). Empty when node or the package is missing.
double run_duckdb_peer(const Dataset& d, int threads, double seconds) {
  const std::string modules = duckdb_node_modules();
  if (modules.empty() || std::system("node --version > /dev/null 2>&1") != 0) return 0;
  std::string cmd = "NODE_PATH='" + modules + "' node " + EMBER_BENCH_DATA_DIR +
                    "/parquet_duckdb_peer.mjs --threads " + std::to_string(threads) +
                    " --seconds " + std::to_string(seconds);
  for (const auto& f : d.files)
    cmd += " '" + f + "'";
  return run_peer_samples_per_s(cmd, "DuckDB peer");
}

// The pages of a dataset's files as the reader meets them: every page's stored bytes and the
// bytes they decode to (data pages v2: the values part; their levels are never compressed).
struct PageSet {
  std::vector<std::unique_ptr<parquet::ParquetFile>> files;  // the mappings the pages lie in
  struct Page {
    const std::byte* data = nullptr;
    std::size_t size = 0, decoded = 0;
  };
  std::vector<Page> pages;
  parquet::Codec codec = parquet::Codec::Uncompressed;
  std::size_t decoded_bytes = 0, largest = 0;
};

PageSet collect_pages(const Dataset& d) {
  PageSet set;
  for (const auto& path : d.files) {
    set.files.push_back(std::make_unique<parquet::ParquetFile>(path));
    const parquet::ParquetFile& f = *set.files.back();
    for (const auto& group : f.metadata().row_groups) {
      for (const auto& chunk : group.columns) {
        const parquet::ColumnMetaData& meta = *chunk.meta_data;
        set.codec = meta.codec;
        std::int64_t begin = meta.data_page_offset;
        if (meta.dictionary_page_offset && *meta.dictionary_page_offset > 0) {
          begin = std::min(begin, *meta.dictionary_page_offset);
        }
        const std::byte* p = f.data() + begin;
        const std::byte* end = p + meta.total_compressed_size;
        while (p < end) {
          std::size_t header = 0;
          const parquet::PageHeader h =
              parquet::parse_page_header(p, static_cast<std::size_t>(end - p), path, header);
          PageSet::Page page{p + header, static_cast<std::size_t>(h.compressed_page_size),
                             static_cast<std::size_t>(h.uncompressed_page_size)};
          p += header + page.size;
          if (h.data_page_v2) {
            const auto levels =
                static_cast<std::size_t>(h.data_page_v2->repetition_levels_byte_length +
                                         h.data_page_v2->definition_levels_byte_length);
            page.data += levels;
            page.size -= levels;
            page.decoded -= levels;
          }
          set.pages.push_back(page);
          set.decoded_bytes += page.decoded;
          set.largest = std::max(set.largest, page.decoded);
        }
      }
    }
  }
  return set;
}

// The elements of a snappy stream, found one after the other from their tags (no bytes copied).
std::size_t snappy_element_count(const std::byte* data, std::size_t size) {
  const auto* ip = reinterpret_cast<const std::uint8_t*>(data);
  const std::uint8_t* const end = ip + size;
  while (ip < end && (*ip & 0x80) != 0)  // the leading length
    ++ip;
  ++ip;
  std::size_t count = 0;
  while (ip < end) {
    const std::size_t tag = *ip;
    ++count;
    if ((tag & 3) != 0) {
      ip += (tag & 3) == 3 ? 5 : 1 + (tag & 3);
    } else if ((tag >> 2) < 60) {
      ip += (tag >> 2) + 2;
    } else {
      const std::size_t extra = (tag >> 2) - 59;
      std::uint32_t length = 0;
      std::memcpy(&length, ip + 1, extra);  // little-endian, as the format stores it
      ip += 1 + extra + length + 1;
    }
  }
  return count;
}

// Best of three: the thread's CPU seconds for one pass of `decode` over every page.
template <class Decode>
double decode_seconds(const PageSet& set, std::vector<std::byte>& out, Decode&& decode) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const double c0 = thread_cpu_seconds();
    for (const auto& page : set.pages)
      decode(page, out.data());
    best = std::min(best, thread_cpu_seconds() - c0);
  }
  return best;
}

// What the codec alone costs on the dataset's pages, into one reused buffer, next to the parser's
// rate (samples per CPU-second): the share of that limit the parser reaches.
void bench_page_limits(const Dataset& d, double parser_rate, std::vector<std::string>& summary) {
  const PageSet set = collect_pages(d);
  std::vector<std::byte> out(set.largest + 64);
  struct Limit {
    const char* name;
    double seconds;
  };
  std::vector<Limit> limits;
  const auto fail = [&](const char* who) {
    EMBER_THROW("bench_data: ", who, " could not decode a page of ", d.name);
  };
  if (set.codec == parquet::Codec::Snappy) {
#if EMBER_WITH_SNAPPY
    limits.push_back({"libsnappy alone", decode_seconds(set, out, [&](const auto& p, std::byte* o) {
                        std::size_t n = p.decoded;
                        if (snappy_uncompress(reinterpret_cast<const char*>(p.data), p.size,
                                              reinterpret_cast<char*>(o), &n) != SNAPPY_OK) {
                          fail("libsnappy");
                        }
                      })});
#endif
    limits.push_back(
        {"Ember's SNAPPY decoder alone", decode_seconds(set, out, [&](const auto& p, std::byte* o) {
           if (parquet::snappy_decode(p.data, p.size, o, p.decoded) != nullptr) fail("Ember");
         })});
    // Less than any snappy decoder can do: find where each element starts, copying nothing.
    // Each tag's load gives the next tag's address, a chain of a load and an add or two per
    // element, which no decoder shortens.
    std::size_t elements = 0;
    limits.push_back(
        {"finding the elements alone", decode_seconds(set, out, [&](const auto& p, std::byte* o) {
           elements += snappy_element_count(p.data, p.size);
           *o = static_cast<std::byte>(elements);
         })});
    std::printf("  (%.1f snappy elements per sample)\n",
                static_cast<double>(elements) / 3 / static_cast<double>(d.samples));
  } else if (set.codec == parquet::Codec::Zstd) {
#if EMBER_WITH_ZSTD
    ZSTD_DCtx* context = ZSTD_createDCtx();
    limits.push_back({"libzstd alone", decode_seconds(set, out, [&](const auto& p, std::byte* o) {
                        if (ZSTD_decompressDCtx(context, o, p.decoded, p.data, p.size) !=
                            p.decoded) {
                          fail("libzstd");
                        }
                      })});
    ZSTD_freeDCtx(context);
#endif
  } else if (set.codec == parquet::Codec::Uncompressed) {
    // The least any reader does with uncompressed pages: read every byte once.
    std::uint64_t sum = 0;
    limits.push_back(
        {"reading every page byte once", decode_seconds(set, out, [&](const auto& p, std::byte*) {
           std::uint64_t s = 0;
           for (std::size_t i = 0; i + 8 <= p.size; i += 8) {
             std::uint64_t v;
             std::memcpy(&v, p.data + i, 8);
             s += v;
           }
           sum += s;
         })});
    if (sum == 42) std::printf(" ");  // keeps the reads
  }
  for (const Limit& l : limits) {
    const double rate = static_cast<double>(d.samples) / l.seconds;
    std::printf(
        "  %-30s %8.2f M samples/s  %6.2f GB/s decoded per CPU-second; the parser reaches %.0f "
        "%% of it\n",
        l.name, rate / 1e6, static_cast<double>(set.decoded_bytes) / l.seconds / 1e9,
        100 * parser_rate / rate);
    char line[256];
    std::snprintf(line, sizeof line,
                  "SUMMARY | data | Parquet parse 1 thread (%s) / %s, per CPU-second | %.0f %% "
                  "| - | -",
                  d.name.c_str(), l.name, 100 * parser_rate / rate);
    summary.emplace_back(line);
  }
}

}  // namespace

void bench_parquet(const fs::path& dir, double norm_rate, const Args& a,
                   std::vector<std::string>& summary) {
  // The writers' default first (SNAPPY where this build writes it; the GPU machines lack
  // libsnappy and write uncompressed), then INT32 keys, uncompressed, ZSTD, and keys from
  // vocabularies of 10000 (dictionary pages).
  struct Case {
    const char* name;
    parquet::Codec codec;
    parquet::PhysicalType keys = parquet::PhysicalType::Int64;
    std::int64_t vocabulary = 0;
  };
  const parquet::Codec codec = parquet::default_write_codec();
  std::vector<Case> cases = {{"dlrm_parquet", codec},
                             {"dlrm_parquet_int32", codec, parquet::PhysicalType::Int32}};
  if (codec != parquet::Codec::Uncompressed) {
    cases.push_back({"dlrm_parquet_uncompressed", parquet::Codec::Uncompressed});
  }
  if (parquet::codec_supported(parquet::Codec::Zstd)) {
    cases.push_back({"dlrm_parquet_zstd", parquet::Codec::Zstd});
  }
  cases.push_back({"dlrm_parquet_dictionary", codec, parquet::PhysicalType::Int64, 10000});
  const auto t0 = Clock::now();
  std::vector<Dataset> sets;
  for (const Case& c : cases) {
    sets.push_back(write_parquet_dataset(dir, c.name, a.samples, 16, a.threads, c.codec, c.keys,
                                         c.vocabulary));
    std::printf("generated %s: %.0f MB\n", c.name, static_cast<double>(sets.back().bytes) / 1e6);
  }
  std::printf("(Parquet sets written in %.1f s)\n", seconds_since(t0));
  ParserRate default_rate;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Dataset& d = sets[i];
    std::printf("%s (%.0f bytes/sample, %s, %s keys%s%s):\n", d.name.c_str(),
                static_cast<double>(d.bytes) / static_cast<double>(d.samples),
                std::string(parquet::to_string(cases[i].codec)).c_str(),
                cases[i].keys == parquet::PhysicalType::Int32 ? "INT32" : "INT64",
                cases[i].vocabulary > 0 ? " in dictionary pages (10000 per slot)" : "",
                i == 0 ? ", Ember's writer default" : "");
    const ParserRate rate = bench_parquet_parser(d, norm_rate, summary);
    if (i == 0) default_rate = rate;
    bench_page_limits(d, rate.cpu, summary);
  }
  if (a.parsers_only) return;
  for (std::size_t i = 0; i < 2; ++i) {
    std::printf("%s pipeline:\n", sets[i].name.c_str());
    bench_host_pipeline(sets[i], a, summary);
    if (a.gpu) bench_gpu_pipeline(sets[i], a, summary, false);
  }
  const Dataset& snappy = sets[0];
  char line[256];
  if (duckdb_node_modules().empty()) {
    std::printf(
        "  DuckDB peer: skipped (node or npm's @duckdb/node-api not found; "
        "EMBER_DUCKDB_NODE_MODULES names its node_modules)\n");
    return;
  }
  const double seconds = a.quick ? 0.5 : 2.0;
  const double duck1 = run_duckdb_peer(snappy, 1, seconds);
  if (duck1 > 0) {
    std::printf(
        "  DuckDB peer, 1 thread (read_parquet into a table): %.2f M samples/s; Ember's "
        "parser / DuckDB = %.2fx\n",
        duck1 / 1e6, default_rate.wall / duck1);
    std::snprintf(
        line, sizeof line,
        "SUMMARY | data | Parquet parse 1 thread / DuckDB 1 thread (%s) | %.2fx | >= 1x | %s",
        snappy.name.c_str(), default_rate.wall / duck1, default_rate.wall >= duck1 ? "yes" : "no");
    summary.emplace_back(line);
  }
  const double duck_n = run_duckdb_peer(snappy, a.threads, seconds);
  if (duck_n > 0) {
    const double ember_n = host_pipeline_rate(snappy, a.threads, seconds);
    std::printf(
        "  DuckDB peer, %d threads: %.2f M samples/s; Ember's pipeline -> host, %d threads: "
        "%.2f M samples/s = %.2fx\n",
        a.threads, duck_n / 1e6, a.threads, ember_n / 1e6, ember_n / duck_n);
    std::snprintf(
        line, sizeof line,
        "SUMMARY | data | Parquet pipeline -> host / DuckDB, %d threads (%s) | %.2fx | - | -",
        a.threads, snappy.name.c_str(), ember_n / duck_n);
    summary.emplace_back(line);
  }
}

}  // namespace ember::benchdata
