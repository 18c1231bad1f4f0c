#include "framework/checkpoint/latest.hpp"

#include <filesystem>

#include "framework/checkpoint/checkpoint_error.hpp"
#include "framework/checkpoint/durable_fs.hpp"
#include "framework/checkpoint/naming.hpp"

namespace strata::checkpoint {

void update_latest_atomic(const std::string& root, const std::string& step_dir) {
  STRATA_CHECK(parse_step_dir_name(step_dir).has_value(), "checkpoint",
               "'{}' is not a step directory name", step_dir);
  write_file_atomic(join_path(root, kLatestName), step_dir + "\n");
}

std::optional<std::string> read_latest(const std::string& root) {
  const std::string path = join_path(root, kLatestName);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  std::string text = read_text_file(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.pop_back();
  if (!parse_step_dir_name(text))
    corrupt(path, "", "content '{}' is not a step directory name like step_00000100",
            text.size() > 64 ? text.substr(0, 64) + "..." : text);
  return text;
}

}  // namespace strata::checkpoint
