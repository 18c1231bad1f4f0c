// Test helper: run a callable, expect a strata::UserError tagged "config" whose one-line message
// contains every given fragment.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "framework/core/error.hpp"

namespace strata::config::testing {

inline ::testing::AssertionResult fails_with(const std::function<void()>& f,
                                             const std::vector<std::string>& fragments) {
  try {
    f();
  } catch (const UserError& e) {
    const std::string what = e.what();
    if (e.tag() != "config")
      return ::testing::AssertionFailure() << "tag is '" << e.tag() << "': " << what;
    if (what.find('\n') != std::string::npos)
      return ::testing::AssertionFailure() << "message is not one line: " << what;
    for (const auto& frag : fragments)
      if (what.find(frag) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks «" << frag << "»: " << what;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "not a UserError: " << e.what();
  }
  return ::testing::AssertionFailure() << "no error was thrown";
}

}  // namespace strata::config::testing
