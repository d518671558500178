// From run-time tags (dtype, op enum) to the functor types of op_functors.hpp, shared by the CPU
// and the CUDA halves so that both instantiate exactly the same (op, dtype) pairs. ops.cpp has
// already rejected unsupported pairs; reaching one here is an internal error.
//
// Free of fmt (included by .cu files).
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "ember/core/dtype.hpp"
#include "ember/tensor/op_functors.hpp"

namespace ember::ops::detail {

// Numeric dtypes: everything but bool.
template <class F>
decltype(auto) dispatch_numeric(DType t, const char* what, F&& f) {
  return dispatch_among<NumericTypes>(t, what, f);
}

// The unsigned integer type of a dtype's size: ops that only move bits (copy, fill, where) are
// instantiated once per element size, not once per dtype.
template <class F>
decltype(auto) dispatch_bits(DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1:
      return f(TypeTag<std::uint8_t>{});
    case 2:
      return f(TypeTag<std::uint16_t>{});
    case 4:
      return f(TypeTag<std::uint32_t>{});
    case 8:
      return f(TypeTag<std::uint64_t>{});
    default:
      break;
  }
  EMBER_THROW("no element loop for dtype ", dtype_name(t));
}

// The unsigned integer type of T's size.
template <std::size_t Bytes>
struct BitsOfSize;
template <>
struct BitsOfSize<1> {
  using type = std::uint8_t;
};
template <>
struct BitsOfSize<2> {
  using type = std::uint16_t;
};
template <>
struct BitsOfSize<4> {
  using type = std::uint32_t;
};
template <>
struct BitsOfSize<8> {
  using type = std::uint64_t;
};
template <class T>
using BitsOf = typename BitsOfSize<sizeof(T)>::type;

template <class T>
inline constexpr bool kIsFloatingType = std::is_floating_point_v<OpMath<T>>;

// Calls launch(UnaryFn<op, T>{}).
template <class T, class Launch>
void dispatch_unary_op(UnaryOp op, Launch&& launch) {
  switch (op) {
#define EMBER_UNARY_CASE(name)                                                  \
  case UnaryOp::name:                                                           \
    if constexpr (kIsFloatingType<T> || !unary_needs_floating(UnaryOp::name)) { \
      launch(UnaryFn<UnaryOp::name, T>{});                                      \
      return;                                                                   \
    }                                                                           \
    break;
    EMBER_UNARY_CASE(Neg)
    EMBER_UNARY_CASE(Abs)
    EMBER_UNARY_CASE(Exp)
    EMBER_UNARY_CASE(Log)
    EMBER_UNARY_CASE(Sqrt)
    EMBER_UNARY_CASE(Rsqrt)
    EMBER_UNARY_CASE(Tanh)
    EMBER_UNARY_CASE(Sigmoid)
    EMBER_UNARY_CASE(Relu)
    EMBER_UNARY_CASE(Square)
    EMBER_UNARY_CASE(Reciprocal)
    EMBER_UNARY_CASE(Sign)
#undef EMBER_UNARY_CASE
  }
  EMBER_THROW("internal: unary op ", static_cast<int>(op), " has no ", dtype_name(dtype_of<T>()),
              " kernel");
}

// Calls launch(BinaryFn<op, T>{}) for the arithmetic ops (comparisons go through CompareFn).
template <class T, class Launch>
void dispatch_arithmetic_op(BinaryOp op, Launch&& launch) {
  switch (op) {
    case BinaryOp::Add:
      launch(BinaryFn<BinaryOp::Add, T>{});
      return;
    case BinaryOp::Sub:
      launch(BinaryFn<BinaryOp::Sub, T>{});
      return;
    case BinaryOp::Mul:
      launch(BinaryFn<BinaryOp::Mul, T>{});
      return;
    case BinaryOp::Div:
      launch(BinaryFn<BinaryOp::Div, T>{});
      return;
    case BinaryOp::Max:
      launch(BinaryFn<BinaryOp::Max, T>{});
      return;
    case BinaryOp::Min:
      launch(BinaryFn<BinaryOp::Min, T>{});
      return;
    default:
      break;
  }
  EMBER_THROW("internal: ", static_cast<int>(op), " is not an arithmetic op");
}

// The bits of `value` converted to T, as the unsigned type of T's size (for fill).
template <class T>
BitsOf<T> value_bits(double value) {
  const T v = convert<T>(value);
  BitsOf<T> bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

}  // namespace ember::ops::detail
