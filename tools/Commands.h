// The subcommands of the `prism` tool; each file registers one on the CLI11 app.
#pragma once

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "ir/Module.h"
#include "prism/Status.h"
#include "llvm/Support/Error.h"

namespace prism::tools {

void registerCheckCommand(CLI::App &app);
void registerDumpCommand(CLI::App &app);
void registerImportCommand(CLI::App &app);
void registerOptCommand(CLI::App &app);
void registerPartitionCommand(CLI::App &app);
void registerRunCommand(CLI::App &app);
void registerSimulateCommand(CLI::App &app);
void registerCalibrateCommand(CLI::App &app);
void registerBenchAllReduceCommand(CLI::App &app);
void registerOpsCommand(CLI::App &app);
void registerTraceCommand(CLI::App &app);
void registerTrainCommand(CLI::App &app);
void registerVerifyCommand(CLI::App &app);

// Reads a module from a file ('-' for standard input) and infers its types; every problem is a
// located error.
llvm::Expected<std::unique_ptr<ir::Module>> loadModule(const std::string &path, bool inferShapes);

// Prints `toString(err)` on stderr; returns the exit code for a failed command.
int reportError(llvm::Error err);
// The same for a failed library call (prism/Prism.h): its message, as reportError prints it.
int reportStatus(const api::Status &status);

} // namespace prism::tools
