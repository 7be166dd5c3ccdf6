# lit configuration for Prism's golden tests: textual IR in, FileCheck on what `prism` prints.
import os

import lit.formats

config.name = "prism"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".prism", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["Inputs", "lit.cfg.py", "Output"]
# Test outputs (%t) go to the build tree when ctest runs lit, not beside the sources.
if lit_config.params.get("exec_root"):
    config.test_exec_root = lit_config.params["exec_root"]

prism_bin_dir = lit_config.params.get("prism_bin_dir")
if not prism_bin_dir:
    lit_config.fatal("run lit with --param prism_bin_dir=<directory holding the prism tool>")
llvm_bin_dir = "/usr/lib/llvm-14/bin"
config.environment["PATH"] = os.pathsep.join(
    [prism_bin_dir, llvm_bin_dir, config.environment.get("PATH", "/usr/bin:/bin")])
config.substitutions.append(("%models", os.path.join(config.test_source_root, "..", "..", "models")))
# bf16 kernels need AVX512_BF16 (or AMX); tests that run them say `REQUIRES: bf16`.
try:
    with open("/proc/cpuinfo") as cpuinfo:
        flags = cpuinfo.read()
    if "avx512_bf16" in flags or "amx_bf16" in flags:
        config.available_features.add("bf16")
except OSError:
    pass
