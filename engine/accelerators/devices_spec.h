// What the user asked for with `devices`, before an accelerator interprets it.
//
// Lightning accepts an int (3, -1), a string ("3", "1, 3", "-1", "auto") or a list ([0, 1]).
// DevicesSpec keeps which of the three the user wrote, so errors can echo it back exactly
// (`devices="1, 3"` vs `devices=[1, 3]`), and each Accelerator decides what it means.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

namespace tandem {

class DevicesSpec {
 public:
  enum class Kind { Int, String, List };

  DevicesSpec() : kind_(Kind::String), text_("auto") {}
  DevicesSpec(int n) : kind_(Kind::Int), number_(n) {}  // NOLINT: implicit like Lightning's int
  DevicesSpec(const char* s) : kind_(Kind::String), text_(s) {}  // NOLINT
  DevicesSpec(std::string s) : kind_(Kind::String), text_(std::move(s)) {}  // NOLINT
  DevicesSpec(std::vector<int> indices) : kind_(Kind::List), list_(std::move(indices)) {}  // NOLINT
  DevicesSpec(std::initializer_list<int> indices) : kind_(Kind::List), list_(indices) {}

  // A list as written in a config file or flag, whose items may not all be integers
  // (`[0, x]`). The accelerator's parser reports the first non-integer with the machine's
  // devices and the accepted forms, like every other devices error.
  static DevicesSpec list_of_text(const std::vector<std::string>& items);

  Kind kind() const { return kind_; }
  int as_int() const { return number_; }
  const std::string& as_string() const { return text_; }
  const std::vector<int>& as_list() const { return list_; }
  bool is_auto() const;  // the string "auto", any case, surrounding spaces ignored
  // For a list_of_text with an item that is not an integer: that item; else empty.
  const std::string& non_integer_item() const { return non_integer_item_; }

  // As the user would have written it: 3, "1, 3", [1, 3].
  std::string str() const;

 private:
  Kind kind_;
  int number_ = 0;
  std::string text_;
  std::vector<int> list_;
  std::vector<std::string> list_text_;  // list_of_text's items, for str()
  std::string non_integer_item_;
};

}  // namespace tandem
