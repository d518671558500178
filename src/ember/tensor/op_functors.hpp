// The element functions behind ops.hpp, compiled for the host and for CUDA kernels alike, so that
// the CPU reference and the GPU compute the same thing. Each functor works on OpMath<T> values
// (float for f16/bf16, T otherwise): the element loops convert what they load to OpMath and what
// the functor returns to the output's type.
//
// Integer semantics (the CPU and the GPU agree on every one of them):
//   - add, sub, mul, neg, square and axpy wrap modulo 2^bits (two's complement), as the hardware
//     does; computed in the unsigned type so that C++ has no undefined overflow;
//   - div truncates toward zero; x / 0 is 0; INT_MIN / -1 wraps to INT_MIN (no trap);
//   - abs(INT_MIN) is INT_MIN; neg, abs and sign of unsigned values are -x mod 2^bits, x, 0/1.
// Floating semantics: IEEE; max, min, relu and clamp propagate NaN; sign(±0) and sign(NaN) return
// their argument; relu(-0) is +0.
//
// Free of fmt (included by .cu files).
#pragma once

#include <math.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "ember/core/half.hpp"
#include "ember/tensor/convert.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::ops {

namespace fn {

template <class C>
inline constexpr bool kFloat = std::is_floating_point_v<C>;

template <class C>
EMBER_HOST_DEVICE inline bool is_nan(C x) {
  if constexpr (kFloat<C>) {
    return x != x;
  } else {
    return false;
  }
}

// ---- wrapping integer arithmetic -----------------------------------------------------------
template <class C>
using UnsignedOf = std::make_unsigned_t<C>;

template <class C>
EMBER_HOST_DEVICE inline C wrap_add(C a, C b) {
  using U = UnsignedOf<C>;
  return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <class C>
EMBER_HOST_DEVICE inline C wrap_sub(C a, C b) {
  using U = UnsignedOf<C>;
  return static_cast<C>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <class C>
EMBER_HOST_DEVICE inline C wrap_mul(C a, C b) {
  using U = UnsignedOf<C>;
  return static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}
template <class C>
EMBER_HOST_DEVICE inline C wrap_neg(C a) {
  return wrap_sub(C(0), a);
}
template <class C>
EMBER_HOST_DEVICE inline C int_div(C a, C b) {
  if (b == C(0)) return C(0);
  if constexpr (std::is_signed_v<C>) {
    if (b == C(-1)) return wrap_neg(a);
  }
  return static_cast<C>(a / b);
}

// ---- math on float / double ----------------------------------------------------------------
// The C library's functions, which CUDA also provides in device code for both precisions.
EMBER_HOST_DEVICE inline float m_exp(float x) {
  return ::expf(x);
}
EMBER_HOST_DEVICE inline double m_exp(double x) {
  return ::exp(x);
}
EMBER_HOST_DEVICE inline float m_log(float x) {
  return ::logf(x);
}
EMBER_HOST_DEVICE inline double m_log(double x) {
  return ::log(x);
}
EMBER_HOST_DEVICE inline float m_sqrt(float x) {
  return ::sqrtf(x);
}
EMBER_HOST_DEVICE inline double m_sqrt(double x) {
  return ::sqrt(x);
}
EMBER_HOST_DEVICE inline float m_tanh(float x) {
  return ::tanhf(x);
}
EMBER_HOST_DEVICE inline double m_tanh(double x) {
  return ::tanh(x);
}
EMBER_HOST_DEVICE inline float m_abs(float x) {
  return ::fabsf(x);
}
EMBER_HOST_DEVICE inline double m_abs(double x) {
  return ::fabs(x);
}
EMBER_HOST_DEVICE inline float m_rsqrt(float x) {
#if defined(__CUDA_ARCH__)
  return ::rsqrtf(x);
#else
  return 1.0f / ::sqrtf(x);
#endif
}
EMBER_HOST_DEVICE inline double m_rsqrt(double x) {
#if defined(__CUDA_ARCH__)
  return ::rsqrt(x);
#else
  return 1.0 / ::sqrt(x);
#endif
}

// NaN-propagating max / min (the first NaN argument wins).
template <class C>
EMBER_HOST_DEVICE inline C max_nan(C a, C b) {
  if (is_nan(a)) return a;
  if (is_nan(b)) return b;
  return a > b ? a : b;
}
template <class C>
EMBER_HOST_DEVICE inline C min_nan(C a, C b) {
  if (is_nan(a)) return a;
  if (is_nan(b)) return b;
  return a < b ? a : b;
}

}  // namespace fn

// ---- unary ---------------------------------------------------------------------------------
template <UnaryOp Op, class T>
struct UnaryFn {
  using C = OpMath<T>;
  static_assert(fn::kFloat<C> || !unary_needs_floating(Op), "floating-only unary op");
  EMBER_HOST_DEVICE C operator()(C x) const {
    if constexpr (Op == UnaryOp::Neg) {
      if constexpr (fn::kFloat<C>) {
        return -x;
      } else {
        return fn::wrap_neg(x);
      }
    } else if constexpr (Op == UnaryOp::Abs) {
      if constexpr (fn::kFloat<C>) {
        return fn::m_abs(x);
      } else if constexpr (std::is_signed_v<C>) {
        return x < C(0) ? fn::wrap_neg(x) : x;
      } else {
        return x;
      }
    } else if constexpr (Op == UnaryOp::Exp) {
      return fn::m_exp(x);
    } else if constexpr (Op == UnaryOp::Log) {
      return fn::m_log(x);
    } else if constexpr (Op == UnaryOp::Sqrt) {
      return fn::m_sqrt(x);
    } else if constexpr (Op == UnaryOp::Rsqrt) {
      return fn::m_rsqrt(x);
    } else if constexpr (Op == UnaryOp::Tanh) {
      return fn::m_tanh(x);
    } else if constexpr (Op == UnaryOp::Sigmoid) {
      return C(1) / (C(1) + fn::m_exp(-x));
    } else if constexpr (Op == UnaryOp::Relu) {
      if constexpr (std::is_unsigned_v<C>) {
        return x;
      } else {
        return x <= C(0) ? C(0) : x;  // NaN <= 0 is false: NaN propagates; -0 becomes +0
      }
    } else if constexpr (Op == UnaryOp::Square) {
      if constexpr (fn::kFloat<C>) {
        return x * x;
      } else {
        return fn::wrap_mul(x, x);
      }
    } else if constexpr (Op == UnaryOp::Reciprocal) {
      return C(1) / x;
    } else {
      static_assert(Op == UnaryOp::Sign);
      if constexpr (std::is_unsigned_v<C>) {
        return x > C(0) ? C(1) : C(0);
      } else {
        return x > C(0) ? C(1) : (x < C(0) ? C(-1) : x);
      }
    }
  }
};

// ---- binary --------------------------------------------------------------------------------
// Arithmetic (Add..Min) on OpMath<T>, returning OpMath<T>.
template <BinaryOp Op, class T>
struct BinaryFn {
  using C = OpMath<T>;
  static_assert(!is_comparison(Op), "comparisons use CompareFn");
  EMBER_HOST_DEVICE C operator()(C a, C b) const {
    if constexpr (Op == BinaryOp::Max) {
      return fn::max_nan(a, b);
    } else if constexpr (Op == BinaryOp::Min) {
      return fn::min_nan(a, b);
    } else if constexpr (fn::kFloat<C>) {
      if constexpr (Op == BinaryOp::Add) return a + b;
      if constexpr (Op == BinaryOp::Sub) return a - b;
      if constexpr (Op == BinaryOp::Mul) return a * b;
      if constexpr (Op == BinaryOp::Div) return a / b;
    } else {
      if constexpr (Op == BinaryOp::Add) return fn::wrap_add(a, b);
      if constexpr (Op == BinaryOp::Sub) return fn::wrap_sub(a, b);
      if constexpr (Op == BinaryOp::Mul) return fn::wrap_mul(a, b);
      if constexpr (Op == BinaryOp::Div) return fn::int_div(a, b);
    }
  }
};

// The six comparisons, chosen at run time (each is one instruction, so one kernel per dtype
// serves them all). NaN compares unequal to everything.
template <class T>
struct CompareFn {
  using C = OpMath<T>;
  BinaryOp op;
  EMBER_HOST_DEVICE bool operator()(C a, C b) const {
    switch (op) {
      case BinaryOp::Eq:
        return a == b;
      case BinaryOp::Ne:
        return a != b;
      case BinaryOp::Lt:
        return a < b;
      case BinaryOp::Le:
        return a <= b;
      case BinaryOp::Gt:
        return a > b;
      default:
        return a >= b;
    }
  }
};

// y + alpha * x.
template <class T>
struct AxpyFn {
  using C = OpMath<T>;
  C alpha;
  EMBER_HOST_DEVICE C operator()(C y, C x) const {
    if constexpr (fn::kFloat<C>) {
      return y + alpha * x;
    } else {
      return fn::wrap_add(y, fn::wrap_mul(alpha, x));
    }
  }
};

// min(max(x, low), high), NaN propagating. low <= high (checked by the caller).
template <class T>
struct ClampFn {
  using C = OpMath<T>;
  C low, high;
  EMBER_HOST_DEVICE C operator()(C x) const {
    if (fn::is_nan(x)) return x;
    return x < low ? low : (x > high ? high : x);
  }
};

// Element-wise conversion (copy between dtypes).
template <class Out, class In>
struct CastFn {
  EMBER_HOST_DEVICE Out operator()(OpMath<In> x) const { return convert<Out>(x); }
};

// cond ? a : b over raw bits (U is an unsigned type of the element size).
template <class U>
struct WhereFn {
  EMBER_HOST_DEVICE U operator()(bool cond, U a, U b) const { return cond ? a : b; }
};

// A constant (fill).
template <class U>
struct ConstantFn {
  U value;
  EMBER_HOST_DEVICE U operator()() const { return value; }
};

// The identity (same-dtype copy over raw bits).
template <class U>
struct IdentityFn {
  EMBER_HOST_DEVICE U operator()(U x) const { return x; }
};

}  // namespace ember::ops
