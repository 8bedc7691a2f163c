// fgl_infer's exit codes (sysexits.h style, listed in the README) and the
// error that carries one up to main.
#pragma once

#include <stdexcept>
#include <string>

namespace fgl::app {

enum ExitCode : int {
  kExitOk = 0,
  kExitCheckFailed = 1,   // the run finished but fused != reference
  kExitUsage = 64,        // EX_USAGE: bad command line
  kExitDataErr = 65,      // EX_DATAERR: unreadable file, wrong shapes
  kExitNoInput = 66,      // EX_NOINPUT: an input file is missing
  kExitUnavailable = 69,  // EX_UNAVAILABLE: the requested device is absent
  kExitSoftware = 70,     // EX_SOFTWARE: an internal error (a bug)
  kExitCantCreate = 73,   // EX_CANTCREAT: the output cannot be written
};

/// Every exit code with what it means, for --help.
struct ExitCodeMeaning {
  ExitCode code;
  const char* meaning;
};
inline constexpr ExitCodeMeaning kExitCodes[] = {
    {kExitOk, "ok"},
    {kExitCheckFailed, "check failed"},
    {kExitUsage, "usage"},
    {kExitDataErr, "bad data"},
    {kExitNoInput, "missing input"},
    {kExitUnavailable, "device unavailable"},
    {kExitSoftware, "internal error"},
    {kExitCantCreate, "cannot create output"}};

/// An error meant for the user: what went wrong and what to do next.
class AppError : public std::runtime_error {
 public:
  AppError(ExitCode code, const std::string& what, std::string hint)
      : std::runtime_error(what), code_(code), hint_(std::move(hint)) {}
  ExitCode code() const { return code_; }
  const std::string& hint() const { return hint_; }

 private:
  ExitCode code_;
  std::string hint_;
};

/// `text` with control characters and invalid UTF-8 escaped as \xNN: error
/// messages quote names from damaged files, which may hold any bytes.
std::string printable(const std::string& text);

}  // namespace fgl::app
