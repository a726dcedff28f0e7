// Runs a shell command as a user would and keeps what it printed: stdout, stderr and the exit
// code. For the tests of the command-line programs (tandem, xpu_cli).
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

struct CommandResult {
  int exit_code = -1;  // -1 when the command could not be started or did not exit normally
  std::string out, err;
  bool out_has(const std::string& s) const { return out.find(s) != std::string::npos; }
  bool err_has(const std::string& s) const { return err.find(s) != std::string::npos; }
  int err_lines() const {
    int n = 0;
    for (char c : err) n += c == '\n';
    return n;
  }
};

// `command` goes to /bin/sh as written (quote its arguments); stderr is captured through a file
// named after this process, since ctest runs test cases as concurrent processes.
inline CommandResult run_command(const std::string& command) {
  const std::string err_path = testing::TempDir() + "tandem_command_stderr_" + std::to_string(getpid()) + ".txt";
  CommandResult r;
  FILE* pipe = popen(("{ " + command + " ; } 2>" + err_path).c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::remove(err_path.c_str());
  return r;
}
