// Typed errors. Every message says what was given, what is allowed, and what to do.
// The CLI maps ConfigError to exit code 2 and every other Error to exit code 1.
#pragma once
#include <stdexcept>
#include <string>

namespace tandem {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Invalid user configuration: flags, config files, devices strings, option values.
class ConfigError : public Error { public: using Error::Error; };
// Unreadable, truncated or malformed data or checkpoint files.
class DataError : public Error { public: using Error::Error; };
// A device that does not exist, is busy, or was not compiled in.
class DeviceError : public Error { public: using Error::Error; };
// A collective failed or timed out.
class CommError : public Error { public: using Error::Error; };
// Shapes that do not fit the operation (mismatch, bad dim, bad view).
class ShapeError : public Error { public: using Error::Error; };
// A dtype the operation does not support, or two operands of different dtypes.
class DTypeError : public Error { public: using Error::Error; };
// Misuse of autograd: backward through a freed graph, grad of a non-scalar, ...
class AutogradError : public Error { public: using Error::Error; };
// An argument value outside what an op or module accepts (p = 1.5 for dropout, ...).
class ValueError : public Error { public: using Error::Error; };
// load_state_dict with missing, unexpected or mis-shaped keys.
class StateDictError : public Error { public: using Error::Error; };

// Throws E with the message when cond is false; the message is built only on failure.
#define TANDEM_CHECK(cond, ErrorType, msg_expr)            \
  do {                                                     \
    if (!(cond)) throw ErrorType(std::string(msg_expr));   \
  } while (0)

}  // namespace tandem
