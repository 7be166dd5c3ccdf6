// libFuzzer target: the IDX reader (Fashion-MNIST's files), plain and gzip-compressed. The bytes
// go to a file, as the reader takes a path; any bytes give an array or an error naming the
// defect, never a crash, an overread or an allocation the file cannot back.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "runtime/data/Idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string path = "/tmp/prism-fuzz-idx-" + std::to_string(getpid());
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  auto array = prism::runtime::data::readIdxFile(path);
  if (!array)
    llvm::consumeError(array.takeError());
  return 0;
}
