// MemoryLedger: current and peak bytes per tier × category, optional caps per tier, and the
// out-of-memory error that explains itself. Every allocation in Strata is charged here.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "framework/memory/tier.hpp"

namespace strata {

// A consistent copy of the ledger's counters.
struct MemorySnapshot {
  std::array<std::array<std::uint64_t, kNumCategories>, kNumTiers> current{};
  std::array<std::array<std::uint64_t, kNumCategories>, kNumTiers> peak{};
  std::array<std::uint64_t, kNumTiers> tier_current{};
  std::array<std::uint64_t, kNumTiers> tier_peak{};  // peak of the tier's total
  std::array<std::optional<std::uint64_t>, kNumTiers> cap{};
  // Free blocks the process's caching allocators keep for reuse, per tier (PyTorch's
  // memory_reserved minus memory_allocated): memory the OS sees in use, no storage holds.
  std::array<std::uint64_t, kNumTiers> reserved{};
};

// What was asked for when a cap was exceeded, or when the memory itself refused; given to the
// advisor.
struct OomContext {
  Tier tier;
  Category category;
  std::uint64_t requested;
  // The tier's cap; when the memory itself refused, what storages held on the tier then (all
  // that fit: the request was short by all of it).
  std::uint64_t cap;
  MemorySnapshot snapshot;
  // Empty when a cap was exceeded; else who refused the memory below every cap ("the GPU cuda:0
  // itself (...)"): the device is full, not the cap.
  std::string refused_by = {};
};

// What an advisor says about an out-of-memory error.
struct OomAdvice {
  // What a whole training step needs on the tier, when known (a memory plan's peak, rounded
  // up): not just the allocation that failed.
  std::optional<std::uint64_t> step_needs;
  // Changes that make it fit, each naming exact config keys and values, the first the one to
  // try first.
  std::vector<std::string> changes;
  // The config assignments ("key=value", in order) of each change that is one, by the index of
  // its line in `changes` (an advisor that only describes leaves this empty): what a program
  // applies to its config to follow the advice literally (the Python package's
  // OutOfMemory.advice).
  std::vector<std::vector<std::string>> sets;
};

// Produces the advice for an out-of-memory error. The default advisor reasons from categories
// (it knows neither the config nor the step); parallel::Training installs the memory planner's
// (parallel/plan/oom_advice.hpp), which knows both.
using OomAdvisor = std::function<OomAdvice(const OomContext&)>;
OomAdvice default_oom_advice(const OomContext& ctx);

class MemoryLedger {
 public:
  MemoryLedger();

  // The process-wide ledger that allocations use unless told otherwise.
  static MemoryLedger& global();

  // Caps a tier (nullopt removes the cap).
  void set_cap(Tier t, std::optional<std::uint64_t> bytes);
  std::optional<std::uint64_t> cap(Tier t) const;

  // Charges bytes; throws OutOfMemory (and charges nothing) if the tier's cap would be exceeded.
  void charge(Tier t, Category c, std::uint64_t bytes);
  // Returns bytes charged earlier.
  void release(Tier t, Category c, std::uint64_t bytes);
  // Throws the OutOfMemory for `requested` bytes of (t, c) that `refused_by` refused although no
  // cap stood in the way (a GPU's caching allocator emptied its cache and cudaMalloc still
  // failed): its message says who refused, what storages hold and the allocators keep on the
  // tier, and the advisor's advice. Charges nothing.
  [[noreturn]] void throw_refused(Tier t, Category c, std::uint64_t requested,
                                  std::string refused_by) const;
  // Bytes a caching allocator keeps (free) for reuse on tier t, and gives back.
  void reserve(Tier t, std::uint64_t bytes);
  void unreserve(Tier t, std::uint64_t bytes);
  std::uint64_t reserved(Tier t) const;

  std::uint64_t current(Tier t, Category c) const;
  std::uint64_t current(Tier t) const;
  std::uint64_t peak(Tier t, Category c) const;
  std::uint64_t peak(Tier t) const;
  MemorySnapshot snapshot() const;

  // Starts a new peak window (e.g. per step): peaks become the current values.
  void reset_peaks();

  void set_advisor(OomAdvisor advisor);
  OomAdvisor advisor() const;

  // Human-readable table tier × category with current and peak, plus caps.
  std::string report() const;

 private:
  mutable std::mutex mu_;
  MemorySnapshot s_;
  OomAdvisor advisor_;
};

// Formats a snapshot as the memory report table.
std::string format_memory_report(const MemorySnapshot& s);

// RAII charge: charges on construction, releases on destruction.
class LedgerCharge {
 public:
  LedgerCharge() = default;
  LedgerCharge(MemoryLedger& l, Tier t, Category c, std::uint64_t bytes);
  LedgerCharge(LedgerCharge&& o) noexcept;
  LedgerCharge& operator=(LedgerCharge&& o) noexcept;
  ~LedgerCharge();
  void reset();
  // The ledger charged (nullptr when nothing is).
  MemoryLedger* ledger() const { return ledger_; }

 private:
  MemoryLedger* ledger_ = nullptr;
  Tier tier_ = Tier::device;
  Category cat_ = Category::other;
  std::uint64_t bytes_ = 0;
};

}  // namespace strata
