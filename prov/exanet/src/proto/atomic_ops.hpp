// SPDX-License-Identifier: BSD-2-Clause
// The atomic operations a target performs for its initiators (fi_atomic(3)): which (operation,
// datatype) pairs exist, how large an element is, how many elements one operation may carry, and
// the element-wise arithmetic. ExaNeST has no atomic unit: the target's progress performs them
// (proto/atomic.cpp), one request at a time, and each element is updated with the CPU's own
// compare-and-swap when it is 1, 2, 4 or 8 bytes and aligned to its size (so the update is atomic
// against every other thread of the target process too), else under a striped spin lock that every
// such update of that element takes.
#pragma once
#include <rdma/fi_atomic.h>
#include <rdma/fi_domain.h>

#include <atomic>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace exanet::proto::atomics {

/// The three families of fi_atomic(3): base (fi_atomic), fetch (fi_fetch_atomic: returns the
/// target's initial value) and compare (fi_compare_atomic: a compare operand, and the result).
enum class family : std::uint8_t { base, fetch, compare };

/// Bytes one operation's operand buffer may hold (the compare family carries two buffers in
/// the same room). fi_query_atomic's count is this divided by the element size.
inline constexpr std::size_t max_bytes = 4096;

/// Element size of a datatype, 0 for one exanet does not know.
constexpr std::size_t datatype_size(int dt) noexcept {
  switch (dt) {
    case FI_INT8: case FI_UINT8: return 1;
    case FI_INT16: case FI_UINT16: return 2;
    case FI_INT32: case FI_UINT32: case FI_FLOAT: return 4;
    case FI_INT64: case FI_UINT64: case FI_DOUBLE: case FI_FLOAT_COMPLEX: return 8;
    case FI_DOUBLE_COMPLEX: return 16;
    case FI_LONG_DOUBLE: return sizeof(long double);
    case FI_LONG_DOUBLE_COMPLEX: return 2 * sizeof(long double);
    case FI_INT128: case FI_UINT128: return 16;
    default: return 0;
  }
}

/// The alignment a target address must have for the datatype (its C type's).
constexpr std::size_t datatype_align(int dt) noexcept {
  switch (dt) {
    case FI_FLOAT_COMPLEX: return alignof(float);
    case FI_DOUBLE_COMPLEX: return alignof(double);
    case FI_LONG_DOUBLE: case FI_LONG_DOUBLE_COMPLEX: return alignof(long double);
    case FI_INT128: case FI_UINT128: return alignof(__int128);
    default: return datatype_size(dt);
  }
}

constexpr bool is_integer(int dt) noexcept {
  return (dt >= FI_INT8 && dt <= FI_UINT64) || dt == FI_INT128 || dt == FI_UINT128;
}
constexpr bool is_complex(int dt) noexcept {
  return dt == FI_FLOAT_COMPLEX || dt == FI_DOUBLE_COMPLEX || dt == FI_LONG_DOUBLE_COMPLEX;
}

/// Whether exanet performs op on dt in this family. Ordering comparisons (min, max, the ordered
/// compare-swaps) have no meaning on complex numbers, bit operations (and the masked swap) none
/// on floating point: those pairs are refused, as libfabric's shm provider refuses them.
constexpr bool valid(int dt, int op, family f) noexcept {
  if (datatype_size(dt) == 0) return false;
  switch (op) {
    case FI_MIN: case FI_MAX:
      return f != family::compare && !is_complex(dt);
    case FI_SUM: case FI_PROD: case FI_LOR: case FI_LAND: case FI_LXOR: case FI_ATOMIC_WRITE:
      return f != family::compare;
    case FI_BOR: case FI_BAND: case FI_BXOR:
      return f != family::compare && is_integer(dt);
    case FI_ATOMIC_READ:
      return f == family::fetch;
    case FI_CSWAP: case FI_CSWAP_NE:
      return f == family::compare;
    case FI_CSWAP_LE: case FI_CSWAP_LT: case FI_CSWAP_GE: case FI_CSWAP_GT:
      return f == family::compare && !is_complex(dt);
    case FI_MSWAP:
      return f == family::compare && is_integer(dt);
    default:
      return false;
  }
}

constexpr bool is_compare_op(int op) noexcept { return op >= FI_CSWAP && op <= FI_MSWAP; }

/// Largest element count of one operation (what fi_query_atomic reports), 0 if not valid.
constexpr std::size_t max_count(int dt, int op, family f) noexcept {
  if (!valid(dt, op, f)) return 0;
  const std::size_t room = f == family::compare ? max_bytes / 2 : max_bytes;
  return room / datatype_size(dt);
}

/// Whether the operation changes the target (FI_ATOMIC_READ alone does not).
constexpr bool modifies(int op) noexcept { return op != FI_ATOMIC_READ; }

namespace detail {

template <class T> constexpr bool is_complex_v = false;
template <class T> constexpr bool is_complex_v<std::complex<T>> = true;

template <class T>
bool truth(const T& v) noexcept {
  if constexpr (is_complex_v<T>) return v.real() != 0 || v.imag() != 0;
  else return v != T{};
}

/// The new target value given the old one, per fi_atomic(3). Pairs valid() refuses never reach
/// here (the cases are compiled out for the types they make no sense on).
template <class T>
T combine(int op, const T& old, const T& operand, const T& compare) noexcept {
  constexpr bool cplx = is_complex_v<T>;
  constexpr bool integral = std::is_integral_v<T> || std::is_same_v<T, __int128> ||
                            std::is_same_v<T, unsigned __int128>;
  if constexpr (integral) {
    // Integers wrap (two's complement), signed ones too, without undefined behaviour.
    T out;
    if (op == FI_SUM) return (void)__builtin_add_overflow(old, operand, &out), out;
    if (op == FI_PROD) return (void)__builtin_mul_overflow(old, operand, &out), out;
  }
  switch (op) {
    case FI_SUM: return old + operand;
    case FI_PROD: return old * operand;
    case FI_LOR: return T(truth(old) || truth(operand));
    case FI_LAND: return T(truth(old) && truth(operand));
    case FI_LXOR: return T(truth(old) != truth(operand));
    case FI_ATOMIC_WRITE: return operand;
    case FI_CSWAP: return compare == old ? operand : old;
    case FI_CSWAP_NE: return compare != old ? operand : old;
    default: break;
  }
  if constexpr (!cplx) {
    switch (op) {
      case FI_MIN: return operand < old ? operand : old;
      case FI_MAX: return operand > old ? operand : old;
      case FI_CSWAP_LE: return compare <= old ? operand : old;
      case FI_CSWAP_LT: return compare < old ? operand : old;
      case FI_CSWAP_GE: return compare >= old ? operand : old;
      case FI_CSWAP_GT: return compare > old ? operand : old;
      default: break;
    }
  }
  if constexpr (integral) {
    switch (op) {
      case FI_BOR: return old | operand;
      case FI_BAND: return old & operand;
      case FI_BXOR: return old ^ operand;
      case FI_MSWAP: return (operand & compare) | (old & ~compare);
      default: break;
    }
  }
  return old;  // FI_ATOMIC_READ
}

template <std::size_t N> struct bits_of;
template <> struct bits_of<1> { using type = std::uint8_t; };
template <> struct bits_of<2> { using type = std::uint16_t; };
template <> struct bits_of<4> { using type = std::uint32_t; };
template <> struct bits_of<8> { using type = std::uint64_t; };

/// Elements that cannot be updated with one compare-and-swap (16 and 32 bytes, or misaligned)
/// take one of these by address; every update of the same element takes the same one.
inline std::atomic_flag stripe_locks[64];

template <class T>
void perform_one(int op, std::byte* target, const std::byte* operand, const std::byte* compare,
                 std::byte* result) noexcept {
  T arg{}, cmp{};
  if (operand) std::memcpy(static_cast<void*>(&arg), operand, sizeof(T));
  if (compare) std::memcpy(static_cast<void*>(&cmp), compare, sizeof(T));
  if constexpr (sizeof(T) <= 8) {
    using U = typename bits_of<sizeof(T)>::type;
    if (reinterpret_cast<std::uintptr_t>(target) % sizeof(T) == 0) {
      U* word = reinterpret_cast<U*>(target);
      U seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
      for (;;) {
        T old;
        std::memcpy(static_cast<void*>(&old), &seen, sizeof(T));
        if (!modifies(op)) {
          if (result) std::memcpy(result, static_cast<const void*>(&old), sizeof(T));
          return;
        }
        const T next = combine(op, old, arg, cmp);
        U want;
        std::memcpy(&want, static_cast<const void*>(&next), sizeof(T));
        if (__atomic_compare_exchange_n(word, &seen, want, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
          if (result) std::memcpy(result, static_cast<const void*>(&old), sizeof(T));
          return;
        }
      }
    }
  }
  std::atomic_flag& lock = stripe_locks[(reinterpret_cast<std::uintptr_t>(target) >> 4) % 64];
  while (lock.test_and_set(std::memory_order_acquire)) {
  }
  T old;
  std::memcpy(static_cast<void*>(&old), target, sizeof(T));
  if (modifies(op)) {
    const T next = combine(op, old, arg, cmp);
    std::memcpy(target, static_cast<const void*>(&next), sizeof(T));
  }
  lock.clear(std::memory_order_release);
  if (result) std::memcpy(result, static_cast<const void*>(&old), sizeof(T));
}

template <class T>
void perform_all(int op, std::byte* target, const std::byte* operand, const std::byte* compare,
                 std::byte* result, std::size_t count) noexcept {
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t at = i * sizeof(T);
    perform_one<T>(op, target + at, operand ? operand + at : nullptr,
                   compare ? compare + at : nullptr, result ? result + at : nullptr);
  }
}

}  // namespace detail

/// Performs count elements of op on dt at target. operand (absent for FI_ATOMIC_READ) and compare
/// (compare family only) may be unaligned; result, when given, receives each element's initial
/// value. The caller has checked valid(dt, op, f) and the target's range and alignment.
inline void perform(int dt, int op, std::byte* target, const std::byte* operand,
                    const std::byte* compare, std::byte* result, std::size_t count) noexcept {
  using namespace detail;
  switch (dt) {
    case FI_INT8: return perform_all<std::int8_t>(op, target, operand, compare, result, count);
    case FI_UINT8: return perform_all<std::uint8_t>(op, target, operand, compare, result, count);
    case FI_INT16: return perform_all<std::int16_t>(op, target, operand, compare, result, count);
    case FI_UINT16: return perform_all<std::uint16_t>(op, target, operand, compare, result, count);
    case FI_INT32: return perform_all<std::int32_t>(op, target, operand, compare, result, count);
    case FI_UINT32: return perform_all<std::uint32_t>(op, target, operand, compare, result, count);
    case FI_INT64: return perform_all<std::int64_t>(op, target, operand, compare, result, count);
    case FI_UINT64: return perform_all<std::uint64_t>(op, target, operand, compare, result, count);
    case FI_FLOAT: return perform_all<float>(op, target, operand, compare, result, count);
    case FI_DOUBLE: return perform_all<double>(op, target, operand, compare, result, count);
    case FI_FLOAT_COMPLEX:
      return perform_all<std::complex<float>>(op, target, operand, compare, result, count);
    case FI_DOUBLE_COMPLEX:
      return perform_all<std::complex<double>>(op, target, operand, compare, result, count);
    case FI_LONG_DOUBLE:
      return perform_all<long double>(op, target, operand, compare, result, count);
    case FI_LONG_DOUBLE_COMPLEX:
      return perform_all<std::complex<long double>>(op, target, operand, compare, result, count);
    case FI_INT128: return perform_all<__int128>(op, target, operand, compare, result, count);
    case FI_UINT128:
      return perform_all<unsigned __int128>(op, target, operand, compare, result, count);
    default: return;
  }
}

}  // namespace exanet::proto::atomics
