// Page compression: UNCOMPRESSED, SNAPPY, ZSTD (libzstd) and GZIP (zlib), the codecs Parquet
// writers use for Criteo-sized data. SNAPPY pages are decoded by Ember itself (snappy_decoder.hpp:
// faster than Debian's libsnappy, and there in every build); libsnappy is needed only to write
// them. One Decompressor per reader thread keeps the codecs' contexts between pages.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "ember/data/parquet/parquet_metadata.hpp"

namespace ember::data::parquet {

// Whether this build reads pages of `codec`: UNCOMPRESSED, SNAPPY and GZIP always, ZSTD where
// libzstd was found at build time.
bool codec_readable(Codec codec);
// Whether it reads and writes them: writing SNAPPY needs libsnappy, ZSTD libzstd.
bool codec_supported(Codec codec);
// "" when readable (`writing`: supported), else why not, for error messages.
std::string codec_support_problem(Codec codec, bool writing = true);
// The writers' default: SNAPPY (HugeCTR's and most writers' choice) where this build has it, else
// UNCOMPRESSED.
inline Codec default_write_codec() {
  return codec_supported(Codec::Snappy) ? Codec::Snappy : Codec::Uncompressed;
}

class Decompressor {
 public:
  Decompressor();
  ~Decompressor();
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;

  // Decompresses [src, src + size) into exactly `expected` bytes at dst. Bytes the codec rejects,
  // or that decompress to another size, are a DataError naming `what`.
  void decompress(Codec codec, const std::byte* src, std::size_t size, std::byte* dst,
                  std::size_t expected, const std::string& what);
  // Before the caller allocates `expected` bytes: the size the compressed data declares
  // (SNAPPY, ZSTD) must be `expected`, and GZIP cannot grow past deflate's 1032:1. A damaged
  // page header then fails here instead of asking for gigabytes.
  static void check_size(Codec codec, const std::byte* src, std::size_t size, std::size_t expected,
                         const std::string& what);

 private:
  struct Contexts;
  std::unique_ptr<Contexts> contexts_;
};

// Appends the compressed form of [src, src + size) to `out` (UNCOMPRESSED copies). ZSTD uses
// level 3 (libzstd's default), GZIP zlib's default level.
void compress(Codec codec, const std::byte* src, std::size_t size, std::vector<std::byte>& out);

}  // namespace ember::data::parquet
