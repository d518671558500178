#include "ember/network/layer.hpp"

#include <sstream>

#include "ember/core/stream.hpp"

namespace ember::network {

Layer::Layer(const LayerSpec& spec, BuildContext& ctx)
    : options_(ctx.options()),
      name_(spec.name),
      type_(spec.type),
      bottoms_(spec.bottoms),
      top_names_(spec.top_names),
      parameter_dtype_(ctx.parameters().master_dtype()),
      ctx_(&ctx) {
  for (std::size_t i = 0; i < bottoms_.size(); ++i) {
    if (bottoms_[i] == nullptr) fail("bottom ", i, " is missing");
    if (bottoms_[i]->place() != options_.place) {
      fail("bottom ", bottoms_[i]->describe(), " is on ", bottoms_[i]->place(),
           " but the network runs on ", options_.place);
    }
  }
  tops_.resize(top_names_.size());
  top_slots_.resize(top_names_.size());
}

std::string Layer::describe() const {
  return cat("'", name_, "' (", type_, ")");
}

void Layer::require_bottoms(std::size_t min_count, std::size_t max_count) const {
  const std::size_t n = bottoms_.size();
  if (n < min_count || n > max_count) {
    if (min_count == max_count) fail("needs ", min_count, " bottom(s), got ", n);
    fail("needs ", min_count, " to ", max_count, " bottoms, got ", n);
  }
}

void Layer::require_tops(std::size_t count) const {
  if (top_names_.size() != count) {
    fail("needs ", count, " top(s), got ", top_names_.size());
  }
}

void Layer::require_rank(std::size_t i, int rank, const char* layout) const {
  const Blob& b = bottom(i);
  if (b.shape().size() != rank) {
    fail("bottom ", b.describe(), " must be ", rank, "-D ", layout, ", got shape ", b.shape());
  }
}

void Layer::require_dtype(std::size_t i, DType dtype) const {
  const Blob& b = bottom(i);
  if (b.dtype() != dtype) {
    fail("bottom ", b.describe(), " must be ", dtype_name(dtype), ", got ", dtype_name(b.dtype()));
  }
}

void Layer::require_supported_dtype(std::size_t i, bool half_ok) const {
  const DType d = bottom(i).dtype();
  if (on_cuda()) {
    const bool ok = d == DType::F32 || (half_ok && (d == DType::F16 || d == DType::BF16));
    if (!ok && half_ok) {
      fail("bottom ", bottom(i).describe(),
           ": on CUDA this layer computes in f32, f16 or bf16, not ", dtype_name(d));
    }
    if (!ok) {
      fail("bottom ", bottom(i).describe(), " is ", dtype_name(d),
           ", but on CUDA this layer computes in f32: build it with create_layer_with_casts "
           "(as DenseNetwork does), which casts its bottoms to f32 and its tops back");
    }
  } else if (d != DType::F32 && d != DType::F64) {
    fail("bottom ", bottom(i).describe(), ": the CPU computes in f32 (the reference), not ",
         dtype_name(d));
  }
}

bool Layer::any_bottom_requires_grad() const {
  for (const auto& b : bottoms_) {
    if (b->requires_grad()) return true;
  }
  return false;
}

BlobPtr Layer::add_top(std::size_t index, const Shape& shape, DType dtype) {
  if (index >= top_names_.size()) fail("internal: top ", index, " has no name");
  bool grad = any_bottom_requires_grad();
  for (const auto& p : parameters_)
    grad = grad || p->trainable();
  grad = grad && options_.build_gradients;
  auto blob = std::make_shared<Blob>(top_names_[index], shape, dtype, options_.place, grad);
  top_slots_[index].value = ctx_->reserve(shape, dtype);
  if (grad) top_slots_[index].grad = ctx_->reserve(shape, dtype);
  tops_[index] = blob;
  return blob;
}

BlobPtr Layer::add_view_top(std::size_t index, const Shape& shape, const BlobPtr& source) {
  if (index >= top_names_.size()) fail("internal: top ", index, " has no name");
  if (shape.numel() != source->shape().numel()) {
    fail("cannot view ", source->describe(), " (", source->shape().numel(), " elements) as ", shape,
         " (", shape.numel(), " elements)");
  }
  auto blob = std::make_shared<Blob>(top_names_[index], shape, source->dtype(), options_.place,
                                     source->requires_grad());
  top_slots_[index].view_source = source;
  tops_[index] = blob;
  return blob;
}

BlobPtr Layer::add_value_view_top(std::size_t index, const BlobPtr& source) {
  if (index >= top_names_.size()) fail("internal: top ", index, " has no name");
  const bool grad = source->requires_grad() && options_.build_gradients;
  auto blob = std::make_shared<Blob>(top_names_[index], source->shape(), source->dtype(),
                                     options_.place, grad);
  top_slots_[index].view_source = source;
  top_slots_[index].value_only_view = true;
  if (grad) top_slots_[index].grad = ctx_->reserve(source->shape(), source->dtype());
  tops_[index] = blob;
  return blob;
}

BlobPtr Layer::add_placeholder_top(std::size_t index) {
  if (index >= top_names_.size()) fail("internal: top ", index, " has no name");
  auto blob = std::make_shared<Blob>(top_names_[index], Shape{0}, DType::U8, options_.place, false);
  top_slots_[index].placeholder = true;
  tops_[index] = blob;
  return blob;
}

ParameterPtr Layer::add_parameter(const std::string& suffix, const Shape& shape,
                                  const InitSpec& init, bool trainable) {
  ParameterPtr p = ctx_->parameters().declare(name_ + "." + suffix, shape, init, trainable);
  parameters_.push_back(p);
  return p;
}

TensorSlot Layer::add_workspace(const Shape& shape, DType dtype) {
  return ctx_->reserve(shape, dtype);
}

void Layer::forward(bool training, StreamHandle stream) {
  EMBER_CHECK(bound_, "layer ", describe(), " runs before bind(): allocate the network first");
  do_forward(training, stream_or_default(stream));
}

void Layer::backward(StreamHandle stream) {
  EMBER_CHECK(bound_, "layer ", describe(), " runs before bind(): allocate the network first");
  EMBER_CHECK(options_.build_gradients, "layer ", describe(),
              ": backward() in a network built without gradients (an evaluation network)");
  do_backward(stream_or_default(stream));
}

void Layer::bind() {
  bound_ = true;
  for (std::size_t i = 0; i < tops_.size(); ++i) {
    if (tops_[i] == nullptr) fail("internal: top ", i, " was never created");
    if (tops_[i]->bound()) continue;
    const TopSlots& s = top_slots_[i];
    if (s.placeholder) {
      tops_[i]->bind(Tensor::empty({0}, DType::U8, options_.place));
    } else if (s.view_source && s.value_only_view) {
      tops_[i]->bind(s.view_source->value(), s.grad ? s.grad.tensor() : Tensor());
    } else if (s.view_source) {
      const Blob& src = *s.view_source;
      tops_[i]->bind(src.value().reshape(tops_[i]->shape()),
                     src.requires_grad() ? src.grad().reshape(tops_[i]->shape()) : Tensor());
    } else {
      tops_[i]->bind(s.value.tensor(), s.grad ? s.grad.tensor() : Tensor());
    }
  }
}

bool Layer::needs_backward() const {
  for (const auto& t : tops_) {
    if (t->requires_grad()) return true;
  }
  return false;
}

StreamHandle Layer::stream_or_default(StreamHandle stream) const {
  if (!on_cuda()) return nullptr;
  return stream != nullptr ? stream : current_stream(options_.place.device());
}

}  // namespace ember::network
