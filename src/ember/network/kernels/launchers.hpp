// Entry points of the network layer's CUDA kernels, callable from .cpp files: raw pointers, a
// run-time dtype and a stream. No CUDA header and no fmt here (included by .cu files too).
// Every launcher checks its launch (EMBER_CUDA_CHECK_LAUNCH) and returns without waiting.
//
// "T" below is the activation dtype (f32, f16 or bf16); parameters and their gradients are f32.
#pragma once

#include <cstdint>

#include "ember/core/device.hpp"
#include "ember/core/dtype.hpp"
#include "ember/optim/optimizer.hpp"
#include "ember/tensor/row_gather.hpp"

namespace ember::network::cuda {

// ---- elementwise (elementwise.cu) -----------------------------------------------------------
enum class Activation : std::uint8_t { Relu, Sigmoid, Elu };
// y = act(x); y may alias x. ReLU (both directions) moves 16-byte packs when the pointers are
// 16-byte aligned.
void activation_forward(Activation act, DType dtype, std::int64_t n, const void* x, void* y,
                        float alpha, StreamHandle stream);
// dx = dy * act'(x) (ReLU and Sigmoid read y; ELU reads x). dx may alias dy.
void activation_backward(Activation act, DType dtype, std::int64_t n, const void* x, const void* y,
                         const void* dy, void* dx, float alpha, StreamHandle stream);
// keep = uniform01(dropout_stream(seed, step), i) >= rate (DropoutMask, dropout_mask.hpp);
// y = keep ? x / (1 - rate) : 0. The backward recomputes the same mask from (seed, step); given
// `relu_input` (the backward over a ReLU layer's output), keep also needs relu_input[i] > 0.
void dropout(DType dtype, std::int64_t n, const void* x, void* y, float rate, std::uint64_t seed,
             std::uint64_t step, StreamHandle stream, const void* relu_input = nullptr);

// out = sum of inputs[0..count) (count <= kMaxOperands).
inline constexpr int kMaxOperands = 16;
void add_n(DType dtype, std::int64_t n, const void* const* inputs, int count, void* out,
           StreamHandle stream);
// out = a * alpha + b * beta (b may be null: out = a * alpha).
void axpby(DType dtype, std::int64_t n, const void* a, float alpha, const void* b, float beta,
           void* out, StreamHandle stream);
// out = product of inputs; backward: grads[i] = dy * product of the others (null grads skipped).
void multiply_n(DType dtype, std::int64_t n, const void* const* inputs, int count, void* out,
                StreamHandle stream);
void multiply_n_backward(DType dtype, std::int64_t n, const void* const* inputs, int count,
                         const void* dy, void* const* grads, StreamHandle stream);
// Scale layer: axis 0 repeats each element `factor` times in place ([b, n] -> [b, n * factor]);
// axis 1 repeats each row ([b, n] -> [b * factor, n]). Backward sums the copies.
void repeat_forward(DType dtype, std::int64_t rows, std::int64_t cols, int axis, int factor,
                    const void* x, void* y, StreamHandle stream);
void repeat_backward(DType dtype, std::int64_t rows, std::int64_t cols, int axis, int factor,
                     const void* dy, void* dx, StreamHandle stream);

// ---- bias, column reductions (elementwise.cu) ------------------------------------------------
// out[r, c] = act(out[r, c] + bias[c]) with act ReLU or identity; bias has out's dtype.
// 16-byte packs when cols is a multiple of 16 bytes and both pointers are 16-byte aligned.
void bias_activation(DType dtype, std::int64_t rows, std::int64_t cols, const void* bias, bool relu,
                     void* out, StreamHandle stream);
// out[c] = sum_r in[r, c] (f32 result, f32 accumulation), deterministic. `workspace` holds
// column_sum_workspace(rows, cols) floats. Rows are summed in chunks of kColumnChunkRows, then
// the chunks' partial sums; in 16-byte packs where cols is a multiple of 16 bytes and `in` is
// 16-byte aligned.
inline constexpr std::int64_t kColumnChunkRows = 256;
inline constexpr std::int64_t kMaxColumnChunks = 256;
inline std::int64_t column_chunks(std::int64_t rows) {
  const std::int64_t c = (rows + kColumnChunkRows - 1) / kColumnChunkRows;
  return c < 1 ? 1 : (c > kMaxColumnChunks ? kMaxColumnChunks : c);
}
// Rows per chunk (the last may have fewer), at least 1.
inline std::int64_t column_chunk_rows(std::int64_t rows) {
  const std::int64_t chunks = column_chunks(rows);
  const std::int64_t r = (rows + chunks - 1) / chunks;
  return r < 1 ? 1 : r;
}
inline std::int64_t column_sum_workspace(std::int64_t rows, std::int64_t cols) {
  return column_chunks(rows) * cols;
}
void column_sum(DType dtype, std::int64_t rows, std::int64_t cols, const void* in, float* out,
                float* workspace, StreamHandle stream);
// The FC layer's ReLU and bias gradients in one pass: dx = dy * (y > 0) (dx may alias dy) and
// sums[c] = sum_r dx[r, c] (f32, deterministic, workspace as column_sum's). 16-byte packs where
// cols is a multiple of 16 bytes and the pointers are 16-byte aligned; else the ReLU-gradient
// pass and column_sum.
void relu_backward_column_sum(DType dtype, std::int64_t rows, std::int64_t cols, const void* y,
                              const void* dy, void* dx, float* sums, float* workspace,
                              StreamHandle stream);

// ---- copies between layouts (shape_ops.cu) ---------------------------------------------------
// For b < batch, r < rows, c < cols:
//   dst[b * dst_bs + r * dst_rs + c] (=|+=) src[b * src_bs + r * src_rs + c]
void copy_3d(DType dtype, std::int64_t batch, std::int64_t rows, std::int64_t cols, const void* src,
             std::int64_t src_bs, std::int64_t src_rs, void* dst, std::int64_t dst_bs,
             std::int64_t dst_rs, bool accumulate, StreamHandle stream);
void fill_zero(DType dtype, std::int64_t n, void* out, StreamHandle stream);
// Pieces of the columns of a dense [rows, cols] matrix: piece p is a dense [rows, width] matrix
// at `data` that stands for columns [begin, begin + width). A launch takes kMaxColumnPieces of
// them; a join of more adds each further launch's sum to what the one before wrote.
inline constexpr int kMaxColumnPieces = 8;
struct ColumnPiece {
  void* data = nullptr;
  std::int64_t begin = 0, width = 0;
};
// dst[r, c] (=|+=) the sum, in f32 and in piece order, of piece[r, c - begin] over the pieces
// that cover column c (0 where none does): Concat's forward (disjoint pieces) and Slice's
// backward (pieces that may overlap or leave columns out) in one pass over dst. Reads the pieces.
void join_columns(DType dtype, std::int64_t rows, std::int64_t cols, const ColumnPiece* pieces,
                  int count, void* dst, bool accumulate, StreamHandle stream);
// piece[r, c - begin] = src[r, c] for every piece: Slice's forward and Concat's backward in one
// pass over src. Writes the pieces.
void split_columns(DType dtype, std::int64_t rows, std::int64_t cols, const void* src,
                   const ColumnPiece* pieces, int count, StreamHandle stream);
// dst [dst_rows, dst_cols] (dense) = src [src_rows, src_cols] with row stride src_ld, zero
// outside src: widens rows with zero columns / adds zero rows, or (dst smaller) cuts them.
void pad_copy_2d(DType dtype, std::int64_t src_rows, std::int64_t src_cols, const void* src,
                 std::int64_t src_ld, std::int64_t dst_rows, std::int64_t dst_cols, void* dst,
                 StreamHandle stream);
// Gather rows: out[j, :] = in[indices[j], :]; backward: din[r, :] = sum over j in
// inverse[offsets[r] .. offsets[r+1]) of dout[j, :] (indices inverted on the host).
void gather_rows(DType dtype, std::int64_t n_out, std::int64_t row_len, const std::int64_t* indices,
                 const void* in, void* out, StreamHandle stream);
void gather_rows_backward(DType dtype, std::int64_t n_in, std::int64_t row_len,
                          const std::int64_t* offsets, const std::int64_t* inverse,
                          const void* dout, void* din, StreamHandle stream);
// [outer, axis, inner] -> [outer, inner]: out = scale * sum over axis; backward broadcasts.
void reduce_axis(DType dtype, std::int64_t outer, std::int64_t axis, std::int64_t inner,
                 float scale, const void* in, void* out, StreamHandle stream);
void reduce_axis_backward(DType dtype, std::int64_t outer, std::int64_t axis, std::int64_t inner,
                          float scale, const void* dout, void* din, StreamHandle stream);
// Softmax over the last dimension of [rows, cols] (max-subtracted); backward
// dx = y * (dy - sum(dy * y)).
void softmax(DType dtype, std::int64_t rows, std::int64_t cols, const void* x, void* y,
             StreamHandle stream);
void softmax_backward(DType dtype, std::int64_t rows, std::int64_t cols, const void* y,
                      const void* dy, void* dx, StreamHandle stream);

// ---- interaction family (interaction.cu) -----------------------------------------------------
// DLRM dot interaction, HugeCTR layout: out[b] = [mlp[b] (w), dots (F1 (F1-1) / 2), 0] with
// F1 = num_emb + 1 rows (the MLP vector is row 0) and dot(i, j) for j < i at w + i(i-1)/2 + j.
// `allow_tf32` (the network's BuildOptions::allow_tf32) lets f32 activations take TF32 tensor
// cores (PyTorch's allow_tf32 does the same for DLRM's bmm); 16-bit activations ignore it.
// With `gather` defined, embedding i of sample b is read where code index[b * num_emb + i]
// says (row_gather.hpp: a row of gather.table, zeros, or a row of emb); only the 16-bit tensor
// cores read so (interaction_gathers), and the gradient still goes to demb's rows.
void interaction_forward(DType dtype, std::int64_t batch, std::int64_t num_emb, std::int64_t width,
                         const void* mlp, const void* emb, void* out, bool allow_tf32,
                         StreamHandle stream, const RowGather& gather = {});
// Gradients for the MLP vector (direct part plus its dots) and the embeddings; either may be
// null when not needed.
void interaction_backward(DType dtype, std::int64_t batch, std::int64_t num_emb, std::int64_t width,
                          const void* mlp, const void* emb, const void* dout, void* dmlp,
                          void* demb, bool allow_tf32, StreamHandle stream,
                          const RowGather& gather = {});
// Whether an interaction of this dtype and shape can read its embeddings through a RowGather
// (the 16-bit tensor cores fit it). Needs a current CUDA device.
bool interaction_gathers(DType dtype, std::int64_t num_emb, std::int64_t width);
// The kernels that run an interaction of this dtype and shape when its pointers are 16-byte
// aligned (the arena's are; unaligned ones take the generic kernels): 16-bit tensor cores for
// f16/bf16, F1 = num_emb + 1 <= 32 and widths that are a multiple of 16 (sm_80 or newer); TF32
// tensor cores for f32 with allow_tf32, F1 <= 32 and widths that are a multiple of 8 (sm_80 or
// newer); exact f32 CUDA-core kernels for F1 <= 32 and widths that are a multiple of 4; the
// generic kernels otherwise. For tests and benchmarks; needs a current CUDA device.
enum class InteractionKernel : std::uint8_t { TensorCores, Tf32TensorCores, CudaCores, Generic };
InteractionKernel interaction_kernel(DType dtype, std::int64_t num_emb, std::int64_t width,
                                     bool backward, bool allow_tf32);
const char* interaction_kernel_name(InteractionKernel kernel);
// FM order 2: in [batch, slots, width] -> out [batch, width] = 0.5 ((sum v)^2 - sum v^2).
void fm_order2_forward(DType dtype, std::int64_t batch, std::int64_t slots, std::int64_t width,
                       const void* in, void* out, StreamHandle stream);
void fm_order2_backward(DType dtype, std::int64_t batch, std::int64_t slots, std::int64_t width,
                        const void* in, const void* dout, void* din, StreamHandle stream);

// ---- layers with weights or statistics (dense_ops.cu) ---------------------------------------
// Activations (`dtype`: f32, f16 or bf16) are read and written in their own type; weights,
// statistics and every value in between are f32.
//
// The per-layer MultiCross path, for rows the fused kernels do not take (cross_fused false).
// One DCN cross layer: s[b] = x[b] . w; y[b] = x0[b] * s[b] + bias + x[b]. x0 has `dtype`; x and
// y have `x_dtype` / `y_dtype`, each `dtype` or f32 (a 16-bit layer keeps its hidden states
// between cross layers in f32).
void cross_forward(DType dtype, DType x_dtype, DType y_dtype, std::int64_t batch,
                   std::int64_t width, const void* x0, const void* x, const float* w,
                   const float* bias, float* s, void* y, StreamHandle stream);
// Backward of one cross layer l (layers run last to first). The running gradient dL/dy arrives
// in `g_in` (`g_dtype`: `dtype` or f32) and dL/dx leaves in `g_out` (f32; may alias g_in; unused
// when `last`). With t[b] = g[b] . x0[b]:
//   dw = sum_b t[b] x[b];  dbias = sum_b g[b];  g_out = g + t w
//   dx_out = g * s + (first ? 0 : dx_acc), and for the last layer (l = 0, x = x0) also + g + t w.
// dx_acc is f32 (may alias dx_out when that is f32); dx_out has `dx_dtype` (`dtype` or f32) and
// may be null (the bottom needs no gradient).
void cross_backward(DType dtype, DType g_dtype, DType x_dtype, DType dx_dtype, std::int64_t batch,
                    std::int64_t width, const void* x0, const void* x, const float* w,
                    const float* s, const void* g_in, float* g_out, const float* dx_acc,
                    void* dx_out, bool first, bool last, float* t, float* dw, float* dbias,
                    float* workspace, StreamHandle stream);
inline std::int64_t cross_workspace(std::int64_t batch, std::int64_t width) {
  return 2 * column_sum_workspace(batch, width);
}

// The fused MultiCross (multi_cross.cu): all `layers` cross layers of a row in one kernel each way,
// one warp per row holding the row in registers (cross_values_per_lane(width) f32 values per
// lane). Forward: y = x_L and s[l * batch + b] = x_l[b] . w_l (f32, [layers, batch]); nothing
// else is stored. Backward: recomputes x_l from x0 and s, writes dx (`dtype`; null when the
// bottom needs no gradient) and overwrites dw[l], dbias[l] (f32), deterministically (per-block
// partial sums in shared memory, summed in a fixed order; no atomics).
inline constexpr int kMaxCrossLayers = 64;
// Rows up to 1024 columns (32 values per lane) run fused while a block's shared memory
// (cross_weight_bytes + one warp's sums, cross_warp_bytes) stays within kCrossMaxBlockBytes
// (up to 25 layers at DCN's width, 12 at 1024 columns); other shapes take the per-layer kernels
// (cross_forward / cross_backward below).
inline constexpr std::int64_t kCrossFusedMaxWidth = 1024;
inline constexpr std::int64_t kCrossMaxBlockBytes = 160 * 1024;
// The backward's per-block partial sums are sized for at most this many blocks (the launch uses
// fewer: as many as are resident at once).
inline constexpr std::int64_t kCrossMaxBlocks = 1024;
inline constexpr int kCrossMaxWarpsPerBlock = 8;
inline int cross_values_per_lane(std::int64_t width) {
  int v = 1;
  while (v < 32 && static_cast<std::int64_t>(v) * 32 < width)
    v *= 2;
  return v;
}
// Every layer's weights and biases, staged in shared memory by each block (both directions).
inline std::int64_t cross_weight_bytes(std::int64_t width, int layers) {
  return 2 * static_cast<std::int64_t>(layers) * 32 * cross_values_per_lane(width) * 4;
}
// Shared memory of one backward warp: (layers + 1) x 32 x V column sums and `layers` sums.
inline std::int64_t cross_warp_bytes(std::int64_t width, int layers) {
  return (static_cast<std::int64_t>(layers + 1) * 32 * cross_values_per_lane(width) + layers) * 4;
}
inline bool cross_fused(std::int64_t width, int layers) {
  return width <= kCrossFusedMaxWidth && layers >= 1 && layers <= kMaxCrossLayers &&
         cross_weight_bytes(width, layers) + cross_warp_bytes(width, layers) <= kCrossMaxBlockBytes;
}
// Warps per backward block: as many as fit in 48 KiB of shared memory beside the weights, 1 to
// kCrossMaxWarpsPerBlock.
struct CrossBackwardGrid {
  int warps_per_block;
  std::int64_t max_blocks;
};
inline CrossBackwardGrid cross_backward_grid(std::int64_t batch, std::int64_t width, int layers) {
  const std::int64_t fit =
      (48 * 1024 - cross_weight_bytes(width, layers)) / cross_warp_bytes(width, layers);
  const int warps =
      static_cast<int>(fit < 1 ? 1 : (fit > kCrossMaxWarpsPerBlock ? kCrossMaxWarpsPerBlock : fit));
  std::int64_t blocks = (batch + warps - 1) / warps;
  blocks = blocks < 1 ? 1 : (blocks > kCrossMaxBlocks ? kCrossMaxBlocks : blocks);
  return {warps, blocks};
}
// Columns of one block's partial sums: dw_0 .. dw_{L-1}, sum of dy, sum of t_0 .. t_{L-1}.
inline std::int64_t cross_partial_columns(std::int64_t width, int layers) {
  return static_cast<std::int64_t>(layers + 1) * width + layers;
}
inline std::int64_t multi_cross_workspace(std::int64_t batch, std::int64_t width, int layers) {
  return (cross_backward_grid(batch, width, layers).max_blocks + 1) *
         cross_partial_columns(width, layers);
}
// w, bias, dw, dbias: `layers` pointers each (host arrays of device pointers).
void multi_cross_forward(DType dtype, std::int64_t batch, std::int64_t width, int layers,
                         const void* x0, const float* const* w, const float* const* bias, float* s,
                         void* y, StreamHandle stream);
void multi_cross_backward(DType dtype, std::int64_t batch, std::int64_t width, int layers,
                          const void* x0, const float* const* w, const float* const* bias,
                          const float* s, const void* dy, void* dx, float* const* dw,
                          float* const* dbias, float* workspace, StreamHandle stream);

// Fully connected layers with one output and no activation (DLRM's, DeepFM's and DCN's last
// layers), where a matrix product of one column leaves cuBLASLt's kernels mostly idle. x is
// [rows, in] (row length in), w [in] and b [1] of T, sums in f32.
// y[r] = b + sum_c x[r, c] w[c].
void single_output_forward(DType dtype, std::int64_t rows, std::int64_t in, const void* x,
                           const void* w, const void* b, void* y, StreamHandle stream);
// The backward in one pass: dw[c] = sum_r x[r, c] dz[r] and db = sum_r dz[r] (f32,
// deterministic; `workspace` holds column_sum_workspace(rows, in + 1) floats) and, where dx is
// not null, dx[r, c] = dz[r] w[c], or 0 where `mask` (the producing layer's ReLU bit mask: rows
// of mask_ld_bits bits, bit c set where its output (r, c) is positive; null for none) is clear.
void single_output_backward(DType dtype, std::int64_t rows, std::int64_t in, const void* x,
                            const void* dz, const void* w, const void* mask,
                            std::int64_t mask_ld_bits, void* dx, float* dw, float* db,
                            float* workspace, StreamHandle stream);

// WeightMultiply: out[b, i*v + j] = in[b, i] * W[i, j].
void weight_multiply_forward(DType dtype, std::int64_t batch, std::int64_t slots, std::int64_t vec,
                             const void* in, const float* w, void* out, StreamHandle stream);
void weight_multiply_backward(DType dtype, std::int64_t batch, std::int64_t slots, std::int64_t vec,
                              const void* in, const float* w, const void* dout, void* din,
                              float* dw, float* workspace, StreamHandle stream);
inline std::int64_t weight_multiply_workspace(std::int64_t batch, std::int64_t slots,
                                              std::int64_t vec) {
  return column_sum_workspace(batch, slots * vec);
}

// BatchNorm (per activation). Training: y = gamma (x - mean) / sqrt(var + eps) + beta with
// batch statistics; saves mean and inv_std; running = (1 - f) running + f stat (unbiased var).
void batch_norm_forward_train(DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                              const float* gamma, const float* beta, float eps, float factor,
                              void* y, float* save_mean, float* save_inv_std, float* running_mean,
                              float* running_var, float* workspace, StreamHandle stream);
void batch_norm_forward_eval(DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                             const float* gamma, const float* beta, float eps,
                             const float* running_mean, const float* running_var, void* y,
                             StreamHandle stream);
void batch_norm_backward(DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                         const float* gamma, const float* save_mean, const float* save_inv_std,
                         const void* dy, void* dx, float* dgamma, float* dbeta, float* workspace,
                         StreamHandle stream);
// Two column reductions' partial sums at a time.
inline std::int64_t batch_norm_workspace(std::int64_t rows, std::int64_t cols) {
  return 2 * column_sum_workspace(rows, cols) + 2 * cols;
}

// Dice (PReLU_Dice) with batch statistics (biased variance).
void dice_forward(DType dtype, std::int64_t rows, std::int64_t cols, const void* x, float alpha,
                  float eps, void* y, float* mean, float* var, float* workspace,
                  StreamHandle stream);
void dice_backward(DType dtype, std::int64_t rows, std::int64_t cols, const void* x,
                   const float* mean, const float* var, float alpha, float eps, const void* dy,
                   void* dx, float* workspace, StreamHandle stream);
inline std::int64_t dice_workspace(std::int64_t rows, std::int64_t cols) {
  return 2 * column_sum_workspace(rows, cols) + 2 * cols;
}

// ---- sequence layers (sequence_ops.cu) -------------------------------------------------------
// One GRU step for every sample, f32 (gru_layer.hpp has the equations): gx = x_t W [batch, 3 H]
// (rows ld_x apart, bias not added), gh = h_{t-1} R [batch, 3 H] or null (t = 0), h_prev rows
// ld_h apart or null (t = 0); writes h_t (rows ld_h apart) and gates r, z, n, h_{t-1} R_n
// [batch, 4 H] (rows ld_g apart).
void gru_forward_step(std::int64_t batch, std::int64_t hidden, const float* gx, std::int64_t ld_x,
                      const float* gh, const float* bias, const float* h_prev, std::int64_t ld_h,
                      float* h, float* gates, std::int64_t ld_g, StreamHandle stream);
// Backward of one step: dh = dy (rows ld_h apart) + dh_next ([batch, H], null at the last step);
// writes the gradient of x_t W + b (dgx, rows ld_x apart), of h_{t-1} R (dgh [batch, 3 H]) and
// dh_prev = dh z ([batch, H]; may alias dh_next).
void gru_backward_step(std::int64_t batch, std::int64_t hidden, const float* dy, std::int64_t ld_h,
                       const float* dh_next, const float* gates, std::int64_t ld_g,
                       const float* h_prev, float* dgx, std::int64_t ld_x, float* dgh,
                       float* dh_prev, StreamHandle stream);
// Attention softmax over rows of [batch, heads, from, to] f32 scores, minus 10000 (1 - mask)
// with the mask [batch, 1, from, to] in `dtype` (or null); probabilities in `dtype`.
void attention_softmax(DType dtype, std::int64_t rows, std::int64_t cols, std::int64_t heads,
                       std::int64_t from, const float* scores, const void* mask, void* probs,
                       StreamHandle stream);
// dscores = probs (dprobs - sum(dprobs probs)) per row; dprobs f32, the others in `dtype`.
void attention_softmax_backward(DType dtype, std::int64_t rows, std::int64_t cols,
                                const void* probs, const float* dprobs, void* dscores,
                                StreamHandle stream);

// ---- losses (losses.cu) ----------------------------------------------------------------------
enum class LossKind : std::uint8_t { BinaryCrossEntropy, CrossEntropy, MultiCrossEntropy };
// Writes the mean loss plus `extra` (the regulariser term, a device scalar or null) into
// *loss; with `grad` non-null also the logits' gradient, multiplied by `grad_scale` (scaler /
// (replicas * count)). Labels are f32; logits T. target_weight: MultiCrossEntropy only.
void loss_forward(LossKind kind, DType dtype, std::int64_t rows, std::int64_t cols,
                  const void* logits, const float* labels, const float* target_weight,
                  const float* extra, float* loss, float* workspace, StreamHandle stream);
void loss_backward(LossKind kind, DType dtype, std::int64_t rows, std::int64_t cols,
                   const void* logits, const float* labels, const float* target_weight,
                   float grad_scale, void* grad, StreamHandle stream);
// Partial sums of the deterministic two-stage reductions (losses, regulariser).
inline constexpr std::int64_t kReduceBlocks = 256;
inline std::int64_t loss_workspace() {
  return kReduceBlocks;
}
// *out = coef * sum w^2 (L2) or coef * sum |w| (L1) over n floats (deterministic).
void regularizer_term(bool l1, std::int64_t n, const float* w, float coef, float* out,
                      float* workspace, StreamHandle stream);

// ---- dense optimizer (optimizer.cu) ----------------------------------------------------------
// One launch over the whole weight block: g = grad (+ regulariser term, already multiplied by
// the loss scaler: reg_coef * w for L2 (regularizer 2), reg_coef * sign(w) for L1 (1)), then
// ember::optim::apply_update. `compute` (the f16/bf16 copy, may be null) receives the new weights.
void dense_optimizer_step(const optim::UpdateStep& step, int regularizer, float reg_coef,
                          std::int64_t n, float* weights, const float* grads, float* state0,
                          float* state1, DType compute_dtype, void* compute, StreamHandle stream);

}  // namespace ember::network::cuda
