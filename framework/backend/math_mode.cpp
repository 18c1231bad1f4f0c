#include "framework/backend/math_mode.hpp"

#include <atomic>

namespace strata {

namespace {
std::atomic<bool> g_allow_tf32{false};
std::atomic<bool> g_allow_rounded_attention{false};
}  // namespace

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow, std::memory_order_relaxed); }
bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }

void set_allow_rounded_attention(bool allow) {
  g_allow_rounded_attention.store(allow, std::memory_order_relaxed);
}
bool allow_rounded_attention() {
  return g_allow_rounded_attention.load(std::memory_order_relaxed);
}

}  // namespace strata
