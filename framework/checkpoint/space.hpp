// Free space on the file system a checkpoint (or an exported file) goes to: a check before
// writing, and the one-line error for a full disk naming the directory and the bytes needed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace strata::checkpoint {

// Bytes this process may still write on the file system holding `dir`; nullopt if unknown.
std::optional<std::uint64_t> free_bytes(const std::string& dir);

// Throws NoSpaceError: "no space left on the file system of '<dir>' for <what>: it needs
// [at least] N bytes, F are free; free some space there or write somewhere else".
[[noreturn]] void no_space(const std::string& dir, const std::string& what, std::uint64_t need,
                           bool at_least);

// Throws no_space(...) now when `dir`'s file system has fewer than `need` bytes free.
void require_space(const std::string& dir, const std::string& what, std::uint64_t need);

}  // namespace strata::checkpoint
