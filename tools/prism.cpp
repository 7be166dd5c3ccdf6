// The `prism` command: check, optimize and inspect models (see `prism --help`).
#include <cstdio>

#include "tools/Commands.h"
#ifdef PRISM_WITH_CUDA
#include "runtime/cuda/CudaRuntimeDevice.h"
#endif

int main(int argc, char **argv) {
  CLI::App app{"prism: compiles single-device training models into distributed plans"};
  app.set_version_flag("--version", std::string("prism ") + PRISM_VERSION);
  app.require_subcommand(1);
#ifdef PRISM_WITH_CUDA
  prism::runtime::cuda::registerCudaDevice();
#endif
  app.fallthrough(false);
  prism::tools::registerCheckCommand(app);
  prism::tools::registerDumpCommand(app);
  prism::tools::registerOptCommand(app);
  prism::tools::registerOpsCommand(app);
  prism::tools::registerPartitionCommand(app);
  prism::tools::registerRunCommand(app);
  prism::tools::registerTrainCommand(app);
  prism::tools::registerVerifyCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  }
  return 0;
}
