#include <gtest/gtest.h>

#include "framework/data/inspect.hpp"
#include "framework/data/token_writer.hpp"
#include "temp_dir.hpp"

namespace strata::data {
namespace {

TEST(Inspect, DescribesHeaderAndDecodesByteText) {
  testing::TempDir dir;
  const std::string path = dir / "t.tok";
  TokenFileWriter w(path, 2, 256);
  for (unsigned char c : std::string("Hi \"you\"\n\x01 and more")) w.append(c);
  w.commit();
  const std::string s = describe_token_file(TokenFile(path), 10);
  EXPECT_NE(s.find("tokens      19\n"), std::string::npos) << s;
  EXPECT_NE(s.find("vocab_size  256\n"), std::string::npos) << s;
  EXPECT_NE(s.find("u16 (2 bytes per token)"), std::string::npos) << s;
  EXPECT_NE(s.find("[72, 105, 32, 34, 121, 111, 117, 34, 10, 1]"), std::string::npos) << s;
  EXPECT_NE(s.find("\"Hi \\\"you\\\"\\n\\x01\""), std::string::npos) << s;
}

TEST(Inspect, NoTextForOtherVocabularies) {
  testing::TempDir dir;
  const std::string path = dir / "t.tok";
  TokenFileWriter w(path, 4, 100000);
  w.append(std::vector<std::uint32_t>{99999, 5});
  w.commit();
  const std::string s = describe_token_file(TokenFile(path));
  EXPECT_NE(s.find("[99999, 5]"), std::string::npos) << s;
  EXPECT_EQ(s.find("as text"), std::string::npos) << s;
}

}  // namespace
}  // namespace strata::data
