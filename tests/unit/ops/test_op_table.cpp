// Op tables: the CPU backend's is complete and is what op_table() gives for the cpu device; a
// table that leaves any entry unset (or has no name) is refused naming it. (That check_complete
// lists every entry is enforced at compile time by its static_assert; the ctest entry
// ops_check_complete_lists_every_entry compiles dispatch.cpp against an OpTable with one more
// entry and expects that static_assert to fire.)
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "framework/backend/ops/op_table.hpp"
#include "tests/unit/ops/op_entries.hpp"

namespace strata::ops::test {
namespace {

TEST(OpTables, TheCpuTableIsCompleteAndServesTheCpuDevice) {
  EXPECT_NO_THROW(check_complete(cpu_op_table()));
  EXPECT_STREQ(cpu_op_table().name, "cpu");
  EXPECT_EQ(&op_table(Device::cpu()), &cpu_op_table());
}

TEST(OpTables, TheEntryListCoversEverySlot) {
  const std::vector<OpEntry> entries = op_entries();
  ASSERT_EQ(entries.size(), op_table_slots());
  std::set<std::size_t> offsets;
  for (const OpEntry& e : entries) offsets.insert(e.offset);
  EXPECT_EQ(offsets.size(), entries.size());
  EXPECT_EQ(*offsets.begin(), sizeof(const char*));
}

TEST(OpTables, ATableWithAnUnsetEntryIsRefusedNamingIt) {
  for (const OpEntry& e : op_entries()) {
    OpTable t = cpu_op_table();
    std::memset(reinterpret_cast<char*>(&t) + e.offset, 0, sizeof(void*));
    try {
      check_complete(t);
      ADD_FAILURE() << "a table without " << e.name << " was accepted";
    } catch (const Error& err) {
      const std::string want =
          std::string("[ops] the cpu backend's op table leaves ") + e.name + " unset";
      EXPECT_EQ(std::string(err.what()).rfind(want, 0), 0u) << err.what();
    }
  }
  OpTable nameless = cpu_op_table();
  nameless.name = nullptr;
  EXPECT_THROW(check_complete(nameless), Error);
}

}  // namespace
}  // namespace strata::ops::test
