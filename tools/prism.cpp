// The `prism` command: check, optimize and inspect models (see `prism --help`).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

#include "ir/Diagnostic.h"
#include "support/Memory.h"
#include "tools/Commands.h"
#ifdef PRISM_WITH_CUDA
#include "runtime/cuda/CudaElementwiseKernels.h"
#include "runtime/cuda/CudaRuntimeDevice.h"
#endif

int main(int argc, char **argv) {
  CLI::App app{"prism: compiles single-device training models into distributed plans"};
  app.set_version_flag("--version", std::string("prism ") + PRISM_VERSION);
  app.require_subcommand(1);
#ifdef PRISM_WITH_CUDA
  prism::runtime::cuda::registerCudaDevice();
  prism::runtime::cuda::registerCudaKernels();
#endif
  app.fallthrough(false);
  std::string memoryLimit;
  app.add_option("--memory-limit", memoryLimit,
                 "Memory a task may use (e.g. 8G; default: this machine's memory)")
      ->envname(prism::support::kMemoryLimitEnv)
      ->check([](const std::string &text) -> std::string {
        auto bytes = prism::support::parseByteSize(text);
        return bytes ? std::string() : llvm::toString(bytes.takeError());
      })
      ->each([](const std::string &text) {
        setenv(prism::support::kMemoryLimitEnv, text.c_str(), 1);
      });
  prism::tools::registerCheckCommand(app);
  prism::tools::registerDumpCommand(app);
  prism::tools::registerImportCommand(app);
  prism::tools::registerOptCommand(app);
  prism::tools::registerOpsCommand(app);
  prism::tools::registerPartitionCommand(app);
  prism::tools::registerRunCommand(app);
  prism::tools::registerSimulateCommand(app);
  prism::tools::registerCalibrateCommand(app);
  prism::tools::registerBenchAllReduceCommand(app);
  prism::tools::registerTraceCommand(app);
  prism::tools::registerTrainCommand(app);
  prism::tools::registerVerifyCommand(app);
  // `--memory-limit` may also come after these commands (their tasks inherit it). Not after
  // `opt`, whose other options go to the passes, or `task`, which takes it from the launcher.
  for (const char *name : {"check", "dump", "partition", "run", "train", "verify"})
    app.get_subcommand(name)->fallthrough(true);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  } catch (const std::bad_alloc &) {
    // Checks before every large allocation make this rare; it is still an error, not an abort.
    std::fprintf(stderr,
                 "error: out of memory (the machine has %s; --memory-limit sets what a "
                 "task may use)\n",
                 prism::support::formatBytes(double(prism::support::machineMemoryBytes())).c_str());
    return 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
