#include "framework/config/suggest.hpp"

#include <algorithm>
#include <cctype>

namespace strata::config {

namespace {
char lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}
}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::optional<std::string> closest(std::string_view word,
                                   const std::vector<std::string>& candidates) {
  const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
  std::optional<std::string> best;
  std::size_t best_d = 0;
  for (const auto& c : candidates) {
    std::size_t dist = edit_distance(word, c);
    const std::size_t shorter = std::min(word.size(), c.size());
    const bool prefix = shorter >= 4 && edit_distance(word.substr(0, shorter),
                                                      std::string_view(c).substr(0, shorter)) == 0;
    if (dist > limit && !prefix) continue;
    if (prefix) dist = std::min(dist, limit);
    if (!best || dist < best_d) {
      best = c;
      best_d = dist;
    }
  }
  return best;
}

}  // namespace strata::config
