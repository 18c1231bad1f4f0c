// Test helper: f must throw a strata::UserError whose message is one line containing `fragment`.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "framework/core/error.hpp"

namespace strata::test {

inline void expect_user_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error (expected one saying: " << fragment << ")";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(fragment), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "not one line: " << what;
  }
}

}  // namespace strata::test
