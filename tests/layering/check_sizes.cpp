// check_sizes: fails on a library file over 600 lines or a function over 100 lines, the house
// limits (docs/ARCHITECTURE.md, "Layers").
//
//   check_sizes <tree> <allow-list>
//
// Reads every .h/.cpp/.c/.cu/.cuh file under <tree>/{base,kernels,tensor,collectives,engine,models,capi,apps};
// .def lists (kernels/kernel_list.def) are data, not code, and are not read. A function is a
// brace block opened at file, namespace or class scope whose header (the code since the last
// ';', '{' or '}') has a parameter list: it ends with ')' after any trailing const, override,
// final, noexcept, mutable or "-> type". Its length runs from the line of its '{' to the line of
// its '}'. Namespace, class, struct, union, enum and extern blocks are scopes, not functions; a
// block whose header ends with '=' (a table's initializer) is neither. Comments, string and
// character literals and preprocessor lines are skipped.
//
// The allow-list names what may stay over a limit for now, each with its ceiling:
//   <path> <lines>             a file over 600 lines
//   <path>:<function> <lines>  a function over 100 lines
// ('#' starts a comment). An entry lets its file or function be at most <lines> long; longer
// fails ("grew past its ceiling"), and an entry that names nothing over its limit fails too
// (remove it), so the list only shrinks.
//
// Prints every violation and exits 1 when there is one; 0 and a summary line otherwise; 2 for a
// bad command line or an unreadable allow-list.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

constexpr int kMaxFileLines = 600;
constexpr int kMaxFunctionLines = 100;

struct Function {
  std::string name;
  int first_line, lines;
};

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether `word` occurs in `text` as a whole word.
bool has_word(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool start = at == 0 || !is_ident(text[at - 1]);
    const bool end = at + word.size() == text.size() || !is_ident(text[at + word.size()]);
    if (start && end) return true;
  }
  return false;
}

// A scope keyword outside parentheses and angle brackets (so that template <class T> void f()
// stays a function).
bool is_scope_header(const std::string& header) {
  std::string outside;
  int depth = 0;
  for (char c : header) {
    if (c == '(' || c == '<') ++depth;
    else if ((c == ')' || c == '>') && depth > 0) --depth;
    else if (depth == 0) outside += c;
  }
  for (const char* word : {"namespace", "class", "struct", "union", "enum", "extern"})
    if (has_word(outside, word)) return true;
  return false;
}

// The header with trailing qualifiers and a trailing return type removed ends with ')'.
bool is_function_header(std::string header) {
  header = trim(header);
  if (header.empty() || header.back() == '=' || header.find('(') == std::string::npos) return false;
  const size_t close = header.rfind(')');
  const size_t arrow = header.find("->", close == std::string::npos ? 0 : close);
  if (arrow != std::string::npos) header = trim(header.substr(0, arrow));
  for (bool cut = true; cut;) {
    cut = false;
    for (const char* word : {"const", "override", "final", "noexcept", "mutable", "try"}) {
      const std::string w(word);
      if (header.size() > w.size() && header.compare(header.size() - w.size(), w.size(), w) == 0 &&
          !is_ident(header[header.size() - w.size() - 1])) {
        header = trim(header.substr(0, header.size() - w.size()));
        cut = true;
      }
    }
  }
  return !header.empty() && header.back() == ')';
}

// The name before the header's first '(' (qualified names and operators included).
std::string function_name(const std::string& header) {
  const size_t paren = header.find('(');
  size_t end = paren;
  while (end > 0 && std::isspace(static_cast<unsigned char>(header[end - 1]))) --end;
  size_t begin = end;
  while (begin > 0 && (is_ident(header[begin - 1]) || header[begin - 1] == ':' || header[begin - 1] == '~'))
    --begin;
  std::string name = header.substr(begin, end - begin);
  return name.empty() ? "(unnamed)" : name;
}

// Code without comments, literals and preprocessor lines; newlines kept.
std::string strip(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  enum { Code, LineComment, BlockComment, String, Char, Preprocessor } state = Code;
  bool line_start = true;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i], next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c == '\n') {
      out += '\n';
      const bool continued = i > 0 && text[i - 1] == '\\';
      if (state == LineComment || (state == Preprocessor && !continued)) state = Code;
      line_start = true;
      continue;
    }
    switch (state) {
      case Code:
        if (line_start && c == '#') {
          state = Preprocessor;
        } else if (c == '/' && next == '/') {
          state = LineComment;
        } else if (c == '/' && next == '*') {
          state = BlockComment;
          ++i;
        } else if (c == 'R' && next == '"' && (i == 0 || !is_ident(text[i - 1]))) {
          const size_t open = text.find('(', i + 2);
          const std::string close = ")" + text.substr(i + 2, open - i - 2) + "\"";
          const size_t end = text.find(close, open);
          for (size_t k = i; k < (end == std::string::npos ? text.size() : end + close.size()); ++k)
            if (text[k] == '\n') out += '\n';
          out += "\"\"";
          i = end == std::string::npos ? text.size() : end + close.size() - 1;
        } else if (c == '"') {
          state = String;
          out += c;
        } else if (c == '\'' && !(i > 0 && std::isxdigit(static_cast<unsigned char>(text[i - 1])))) {
          state = Char;  // (a digit separator such as 1'000 is not a literal)
        } else {
          out += c;
        }
        break;
      case BlockComment:
        if (c == '*' && next == '/') {
          state = Code;
          ++i;
        }
        break;
      case String:
        if (c == '\\') ++i;
        else if (c == '"') {
          state = Code;
          out += c;
        }
        break;
      case Char:
        if (c == '\\') ++i;
        else if (c == '\'') state = Code;
        break;
      case LineComment:
      case Preprocessor: break;
    }
    if (!std::isspace(static_cast<unsigned char>(c))) line_start = false;
  }
  return out;
}

std::vector<Function> functions_of(const std::string& text) {
  enum Kind { Scope, Func, Other };
  struct Frame {
    Kind kind;
    std::string name;
    int line;
  };
  std::vector<Frame> stack;
  std::vector<Function> found;
  std::string header;
  int line = 1;
  for (char c : strip(text)) {
    const bool in_function = std::any_of(stack.begin(), stack.end(), [](const Frame& f) { return f.kind != Scope; });
    if (c == '\n') {
      ++line;
      header += ' ';
    } else if (c == '{') {
      Kind kind = Other;
      if (!in_function) kind = is_scope_header(header) ? Scope : is_function_header(header) ? Func : Other;
      stack.push_back({kind, kind == Func ? function_name(trim(header)) : "", line});
      header.clear();
    } else if (c == '}') {
      if (!stack.empty()) {
        const Frame f = stack.back();
        stack.pop_back();
        if (f.kind == Func) found.push_back({f.name, f.line, line - f.line + 1});
      }
      header.clear();
    } else if (c == ';') {
      if (!in_function) header.clear();
    } else if (!in_function) {
      header += c;
    }
  }
  return found;
}

int count_lines(const std::string& text) {
  int n = int(std::count(text.begin(), text.end(), '\n'));
  return (!text.empty() && text.back() != '\n') ? n + 1 : n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: check_sizes <tree> <allow-list>\n";
    return 2;
  }
  const fs::path root = argv[1];
  std::ifstream allow_file(argv[2]);
  if (!allow_file) {
    std::cerr << "check_sizes: cannot read the allow-list " << argv[2] << "\n";
    return 2;
  }
  std::map<std::string, int> ceilings;  // "path" or "path:function" -> lines
  std::map<std::string, bool> used;
  for (std::string raw; std::getline(allow_file, raw);) {
    const std::string entry = trim(raw.substr(0, raw.find('#')));
    if (entry.empty()) continue;
    std::istringstream fields(entry);
    std::string key;
    int lines = 0;
    if (!(fields >> key >> lines) || lines <= 0) {
      std::cerr << "check_sizes: bad allow-list line \"" << raw << "\" (want: <path>[:<function>] <lines>)\n";
      return 2;
    }
    ceilings[key] = lines;
    used[key] = false;
  }

  std::vector<std::string> violations;
  auto judge = [&](const std::string& key, const std::string& where, int lines, int limit, const char* what) {
    if (lines <= limit) return;
    const auto allowed = ceilings.find(key);
    if (allowed == ceilings.end()) {
      violations.push_back(where + ": " + what + " is " + std::to_string(lines) + " lines (limit " +
                           std::to_string(limit) + ")");
      return;
    }
    used[key] = true;
    if (lines > allowed->second)
      violations.push_back(where + ": " + what + " is " + std::to_string(lines) +
                           " lines, grew past its allow-list ceiling of " + std::to_string(allowed->second));
  };

  std::vector<fs::path> files;
  for (const char* folder : {"base", "kernels", "tensor", "collectives", "engine", "models", "capi", "apps"}) {
    if (!fs::is_directory(root / folder)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = entry.path().extension().string();
      if (entry.is_regular_file() && (ext == ".h" || ext == ".cpp" || ext == ".c" || ext == ".cu" || ext == ".cuh"))
        files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  int function_count = 0;
  for (const fs::path& path : files) {
    std::ifstream in(path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string rel = path.lexically_relative(root).generic_string();
    judge(rel, rel, count_lines(text), kMaxFileLines, "the file");
    for (const Function& f : functions_of(text)) {
      ++function_count;
      judge(rel + ":" + f.name, rel + ":" + std::to_string(f.first_line), f.lines, kMaxFunctionLines,
            ("function " + f.name).c_str());
    }
  }
  for (const auto& [key, was_used] : used)
    if (!was_used)
      violations.push_back("allow-list entry " + key + " names nothing over its limit: remove it");

  if (!violations.empty()) {
    std::cout << violations.size() << " violation(s) of the size limits (" << kMaxFileLines << " lines a file, "
              << kMaxFunctionLines << " a function):\n";
    for (const std::string& v : violations) std::cout << "  " << v << "\n";
    return 1;
  }
  std::cout << "sizes: " << files.size() << " files, " << function_count << " functions, all within "
            << kMaxFileLines << " lines a file and " << kMaxFunctionLines << " a function ("
            << ceilings.size() << " allow-listed)\n";
  return 0;
}
