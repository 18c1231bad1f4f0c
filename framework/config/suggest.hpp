// "Did you mean ...?": edit distance and the closest candidate to a misspelt word.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::config {

// Optimal-string-alignment distance (insert, delete, substitute, swap two neighbours), ignoring
// ASCII case.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to word when it is close enough to be a plausible typo (distance at
// most max(2, |word| / 3), or one is a prefix of the other of at least 4 characters); ties go
// to the earlier candidate.
std::optional<std::string> closest(std::string_view word,
                                   const std::vector<std::string>& candidates);

}  // namespace strata::config
