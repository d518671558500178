#include "ember/data/batch_assembly.hpp"

#include <utility>

namespace ember::data {

namespace {

Tensor view(const AllocationPtr& memory, DType dtype, const Shape& shape, std::size_t byte_offset) {
  return Tensor::from_allocation(memory, dtype, shape,
                                 static_cast<std::int64_t>(byte_offset / dtype_size(dtype)));
}

}  // namespace

BatchViews view_buffers(const AllocationPtr& memory, const BatchBufferPlan& plan,
                        const BatchLayout& layout, std::int64_t rows, const HostBatch& keys_of) {
  BatchViews v;
  v.label = view(memory, DType::F32, {rows, layout.label_dim}, plan.label);
  v.dense = view(memory, DType::F32, {rows, layout.dense_dim}, plan.dense);
  const std::int64_t samples = keys_of.size();
  for (int i = 0; i < keys_of.num_inputs(); ++i) {
    const auto si = static_cast<std::size_t>(i);
    const std::int64_t csr_rows = samples * layout.sparse[si].slot_num;
    const std::int64_t nnz = keys_of.nnz(i);
    v.sparse.emplace_back(view(memory, DType::I64, {csr_rows + 1}, plan.row_offsets[si]),
                          view(memory, layout.key_type, {nnz}, plan.values[si]), nnz);
  }
  return v;
}

DeviceBatch device_share(Tensor label, Tensor dense, std::vector<CsrTensor> sparse,
                         const Share& share, std::int64_t global_size, std::int64_t sequence,
                         Place place) {
  DeviceBatch db;
  db.label = std::move(label);
  db.dense = std::move(dense);
  db.sparse = std::move(sparse);
  db.global_size = global_size;
  db.local_offset = share.offset;
  db.local_size = share.size;
  db.sequence = sequence;
  db.place = place;
  return db;
}

Batch host_batch_views(std::shared_ptr<const HostBatch> host, const BatchLayout& layout,
                       const std::vector<Place>& devices, const BatchInfo& info,
                       const RankSlice& slice) {
  const HostBatch& hb = *host;
  const AllocationPtr memory =
      Allocation::borrow(hb.allocation()->data(), hb.allocation()->size(), hb.place(), host);
  const std::int64_t n = hb.size();
  const BatchViews v = view_buffers(memory, hb.plan(), layout, n, hb);
  Batch batch = empty_batch(info, n);
  const auto shares = local_shares(n, slice, static_cast<int>(devices.size()));
  for (std::size_t d = 0; d < devices.size(); ++d) {
    const Share& s = shares[d];
    batch.devices.push_back(device_share(v.label.slice(0, s.offset, s.offset + s.size),
                                         v.dense.slice(0, s.offset, s.offset + s.size), v.sparse, s,
                                         n, info.sequence, devices[d]));
    batch.devices.back().keys_from_ranks = info.keys_from_ranks;
  }
  return batch;
}

Batch empty_batch(const BatchInfo& info, std::int64_t global_size) {
  Batch batch;
  batch.sequence = info.sequence;
  batch.epoch = info.epoch;
  batch.global_size = global_size;
  batch.end_of_epoch = info.end_of_epoch;
  return batch;
}

}  // namespace ember::data
