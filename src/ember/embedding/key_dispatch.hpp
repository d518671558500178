// Calls f(TypeTag<Key>{}) for the key types embeddings store (u32 and i64), so that hash tables
// and embeddings instantiate their key-typed code for exactly the same types.
#pragma once

#include <cstdint>

#include "ember/core/dtype.hpp"
#include "ember/core/error.hpp"

namespace ember::embedding {

template <class F>
void dispatch_key(DType t, F&& f) {
  switch (t) {
    case DType::U32:
      f(TypeTag<std::uint32_t>{});
      return;
    case DType::I64:
      f(TypeTag<std::int64_t>{});
      return;
    default:
      EMBER_THROW("embedding keys must be u32 or i64, got ", dtype_name(t));
  }
}

}  // namespace ember::embedding
