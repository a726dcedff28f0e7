// expect_error<E>(fn, {"a", "b"}): fn must throw exactly E (or a subclass) and the message must
// contain every fragment. Errors are part of the interface, so tests pin their content.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>

template <typename E>
std::string expect_error(const std::function<void()>& fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "missing '" << f << "' in: " << msg;
    return msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}
