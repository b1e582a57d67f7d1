// Invariant checks. ORRERY_ASSERT is on in Debug and sanitizer builds (ORRERY_ENABLE_ASSERTS) and
// compiles to nothing in Release; ORRERY_CHECK is always on. Both are for broken invariants inside
// orrery, never for bad user input (that is an InputError, see core/error.h).
#pragma once

namespace orrery::detail {
[[noreturn]] void assertion_failed(const char* expr, const char* file, int line);
}  // namespace orrery::detail

#define ORRERY_CHECK(expr) \
  ((expr) ? static_cast<void>(0) : ::orrery::detail::assertion_failed(#expr, __FILE__, __LINE__))

#if defined(ORRERY_ENABLE_ASSERTS)
#define ORRERY_ASSERT(expr) ORRERY_CHECK(expr)
#else
#define ORRERY_ASSERT(expr) static_cast<void>(0)
#endif
