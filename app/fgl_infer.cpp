// fgl_infer: batched inference of linear(cat(x.unbind(0), -1)) with the fused
// fgl::gather_linear op, checked against the reference path. Everything but
// the exit-code mapping lives in the fgl_infer library (app/).
#include <c10/util/Exception.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <iostream>
#include <string>

#include "errors.h"
#include "fgl/io/atomic_write.h"
#include "inference.h"
#include "log.h"
#include "options.h"
#include "report.h"

namespace {

// SIGINT and SIGTERM end the run as the shell expects (exit 128 + signal:
// 130, 143) without leaving a temporary output file behind.
extern "C" void on_interrupt(int signal) {
  fgl::io::remove_pending_output();
  static const char kMessage[] = "fgl_infer: interrupted\n";
  [[maybe_unused]] const ssize_t n =
      ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  ::_exit(128 + signal);
}

void handle_interrupts() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  for (const int signal : {SIGINT, SIGTERM}) {
    ::sigaction(signal, &action, nullptr);
  }
}

// Errors go to stderr as two lines, what went wrong and what to do next;
// --json runs also get them on stdout, so a summary is always there.
int fail(bool json, int code, const std::string& what,
         const std::string& hint) {
  std::cerr << "fgl_infer: error: " << fgl::app::printable(what) << "\n"
            << "fgl_infer: hint: " << fgl::app::printable(hint) << "\n";
  if (json) {
    fgl::app::print_json_error(code, what, hint, std::cout);
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fgl::app;
  handle_interrupts();
  // Known before parsing, so that usage errors come as JSON too.
  bool json = std::any_of(argv + 1, argv + argc, [](const char* arg) {
    return std::string(arg) == "--json";
  });
  try {
    const Command command = parse_command_line(argc, argv);
    if (command.kind != Command::Kind::kRun) {
      std::cout << command.text << "\n";
      return kExitOk;
    }
    const InferOptions& options = command.options;
    json = options.json;
    log::init(options.log_level);
    const InferReport report = run_inference(options);
    json ? print_json(report, std::cout) : print_text(report, std::cout);
    if (report.exit_code == kExitCheckFailed) {
      // The summary (JSON or table) is already on stdout.
      const auto failure = describe_check_failure(report);
      return fail(/*json=*/false, kExitCheckFailed, failure.what, failure.hint);
    }
    return report.exit_code;
  } catch (const AppError& e) {
    return fail(json, e.code(), e.what(), e.hint());
  } catch (const c10::Error& e) {
    return fail(json, kExitSoftware,
                std::string("internal error: ") + e.what_without_backtrace(),
                "please report this with the command line that caused it");
  } catch (const std::exception& e) {
    return fail(json, kExitSoftware, std::string("internal error: ") + e.what(),
                "please report this with the command line that caused it");
  }
}
