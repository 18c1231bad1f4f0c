#include "framework/memory/ledger.hpp"

#include <algorithm>

#include "framework/memory/out_of_memory.hpp"
#include "framework/memory/size.hpp"

namespace strata {

MemoryLedger::MemoryLedger() : advisor_(default_oom_advice) {}

MemoryLedger& MemoryLedger::global() {
  static MemoryLedger ledger;
  return ledger;
}

void MemoryLedger::set_cap(Tier t, std::optional<std::uint64_t> bytes) {
  std::lock_guard lk(mu_);
  s_.cap[int(t)] = bytes;
}

std::optional<std::uint64_t> MemoryLedger::cap(Tier t) const {
  std::lock_guard lk(mu_);
  return s_.cap[int(t)];
}

void MemoryLedger::charge(Tier t, Category c, std::uint64_t bytes) {
  OomAdvisor advisor;
  OomContext ctx{};
  {
    std::lock_guard lk(mu_);
    const int ti = int(t), ci = int(c);
    const auto& cap = s_.cap[ti];
    if (!cap || s_.tier_current[ti] + bytes <= *cap) {
      s_.current[ti][ci] += bytes;
      s_.tier_current[ti] += bytes;
      s_.peak[ti][ci] = std::max(s_.peak[ti][ci], s_.current[ti][ci]);
      s_.tier_peak[ti] = std::max(s_.tier_peak[ti], s_.tier_current[ti]);
      return;
    }
    ctx = OomContext{t, c, bytes, *cap, s_, {}};
    advisor = advisor_;
  }
  throw OutOfMemory(ctx, advisor ? advisor(ctx) : default_oom_advice(ctx));
}

void MemoryLedger::throw_refused(Tier t, Category c, std::uint64_t requested,
                                 std::string refused_by) const {
  OomAdvisor advisor;
  OomContext ctx{};
  {
    std::lock_guard lk(mu_);
    ctx = OomContext{t, c, requested, s_.tier_current[int(t)], s_, std::move(refused_by)};
    advisor = advisor_;
  }
  throw OutOfMemory(ctx, advisor ? advisor(ctx) : default_oom_advice(ctx));
}

void MemoryLedger::release(Tier t, Category c, std::uint64_t bytes) {
  std::lock_guard lk(mu_);
  const int ti = int(t), ci = int(c);
  // Releasing more than was charged is an accounting bug; clamp so the report stays sane.
  const std::uint64_t b = std::min(bytes, s_.current[ti][ci]);
  s_.current[ti][ci] -= b;
  s_.tier_current[ti] -= b;
}

void MemoryLedger::reserve(Tier t, std::uint64_t bytes) {
  std::lock_guard lk(mu_);
  s_.reserved[int(t)] += bytes;
}

void MemoryLedger::unreserve(Tier t, std::uint64_t bytes) {
  std::lock_guard lk(mu_);
  s_.reserved[int(t)] -= std::min(bytes, s_.reserved[int(t)]);
}

std::uint64_t MemoryLedger::reserved(Tier t) const {
  std::lock_guard lk(mu_);
  return s_.reserved[int(t)];
}

std::uint64_t MemoryLedger::current(Tier t, Category c) const {
  std::lock_guard lk(mu_);
  return s_.current[int(t)][int(c)];
}
std::uint64_t MemoryLedger::current(Tier t) const {
  std::lock_guard lk(mu_);
  return s_.tier_current[int(t)];
}
std::uint64_t MemoryLedger::peak(Tier t, Category c) const {
  std::lock_guard lk(mu_);
  return s_.peak[int(t)][int(c)];
}
std::uint64_t MemoryLedger::peak(Tier t) const {
  std::lock_guard lk(mu_);
  return s_.tier_peak[int(t)];
}
MemorySnapshot MemoryLedger::snapshot() const {
  std::lock_guard lk(mu_);
  return s_;
}

void MemoryLedger::reset_peaks() {
  std::lock_guard lk(mu_);
  s_.peak = s_.current;
  s_.tier_peak = s_.tier_current;
}

void MemoryLedger::set_advisor(OomAdvisor advisor) {
  std::lock_guard lk(mu_);
  advisor_ = std::move(advisor);
}

OomAdvisor MemoryLedger::advisor() const {
  std::lock_guard lk(mu_);
  return advisor_;
}

std::string MemoryLedger::report() const { return format_memory_report(snapshot()); }

std::string format_memory_report(const MemorySnapshot& s) {
  std::string out = fmt::format("{:<8} {:<13} {:>12} {:>12}\n", "tier", "category", "current", "peak");
  for (std::size_t t = 0; t < kNumTiers; ++t) {
    const Tier tier = static_cast<Tier>(t);
    bool any = s.tier_peak[t] > 0 || s.cap[t].has_value() || s.reserved[t] > 0;
    if (!any) continue;
    for (std::size_t c = 0; c < kNumCategories; ++c) {
      if (s.peak[t][c] == 0) continue;
      out += fmt::format("{:<8} {:<13} {:>12} {:>12}\n", tier_name(tier),
                         category_name(static_cast<Category>(c)), format_bytes(s.current[t][c]),
                         format_bytes(s.peak[t][c]));
    }
    out += fmt::format("{:<8} {:<13} {:>12} {:>12}{}\n", tier_name(tier), "total",
                       format_bytes(s.tier_current[t]), format_bytes(s.tier_peak[t]),
                       s.cap[t] ? fmt::format("   (cap {})", format_bytes(*s.cap[t])) : "");
    if (s.reserved[t] > 0)
      out += fmt::format("{:<8} {:<13} {:>12}   (free, kept for reuse by the caching allocator)\n",
                         tier_name(tier), "cached", format_bytes(s.reserved[t]));
  }
  if (out.find('\n') == out.size() - 1) out += "(nothing allocated)\n";
  return out;
}

LedgerCharge::LedgerCharge(MemoryLedger& l, Tier t, Category c, std::uint64_t bytes)
    : tier_(t), cat_(c), bytes_(bytes) {
  l.charge(t, c, bytes);
  ledger_ = &l;
}
LedgerCharge::LedgerCharge(LedgerCharge&& o) noexcept
    : ledger_(o.ledger_), tier_(o.tier_), cat_(o.cat_), bytes_(o.bytes_) {
  o.ledger_ = nullptr;
}
LedgerCharge& LedgerCharge::operator=(LedgerCharge&& o) noexcept {
  if (this != &o) {
    reset();
    ledger_ = o.ledger_;
    tier_ = o.tier_;
    cat_ = o.cat_;
    bytes_ = o.bytes_;
    o.ledger_ = nullptr;
  }
  return *this;
}
LedgerCharge::~LedgerCharge() { reset(); }
void LedgerCharge::reset() {
  if (ledger_) ledger_->release(tier_, cat_, bytes_);
  ledger_ = nullptr;
}

}  // namespace strata
