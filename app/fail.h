// Turning torch and std errors from a step into AppErrors with an exit code.
#pragma once

#include <c10/util/Exception.h>

#include <exception>
#include <string>

#include "errors.h"

namespace fgl::app {

/// Runs `fn`; a torch or std error from it becomes an AppError with `code`,
/// the context and the hint.
template <typename Fn>
auto or_fail(ExitCode code, const std::string& context, const std::string& hint,
             Fn&& fn) {
  try {
    return fn();
  } catch (const AppError&) {
    throw;
  } catch (const c10::Error& e) {
    throw AppError(code, context + ": " + e.what_without_backtrace(), hint);
  } catch (const std::exception& e) {
    throw AppError(code, context + ": " + e.what(), hint);
  }
}

}  // namespace fgl::app
