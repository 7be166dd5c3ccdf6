// libFuzzer target: the checkpoint readers, a task's variables file (runtime/train/Checkpoint.h)
// and a parameter server's shard file (runtime/ps/ShardCheckpoint.h), on the same bytes. Both
// end in a checksum that random bytes almost never match, so for inputs whose first byte is odd
// the checksum is made right first: the header and the offsets behind it get fuzzed too. Any
// bytes give a checkpoint or an error naming the file, never a crash or an overread.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/SeedRule.h"
#include "runtime/ps/ShardCheckpoint.h"
#include "runtime/train/Checkpoint.h"
#include "llvm/Support/FileSystem.h"

namespace {

void writeFile(const std::string &path, const std::string &bytes) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return;
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string dir = "/tmp/prism-fuzz-checkpoint-" + std::to_string(getpid());
  static bool made = !llvm::sys::fs::create_directories(dir);
  if (!made || size == 0)
    return 0;
  std::string bytes(reinterpret_cast<const char *>(data) + 1, size - 1);
  if ((data[0] & 1) && bytes.size() >= sizeof(uint64_t)) {
    uint64_t sum = prism::runtime::fnv1a64(llvm::StringRef(bytes).drop_back(sizeof(uint64_t)));
    std::memcpy(&bytes[bytes.size() - sizeof(uint64_t)], &sum, sizeof(sum));
  }
  writeFile(prism::runtime::train::checkpointPath(dir), bytes);
  auto checkpoint = prism::runtime::train::loadCheckpoint(dir);
  if (!checkpoint)
    llvm::consumeError(checkpoint.takeError());
  // The shard the seed (fuzz/seeds/checkpoint/ps-0.shards) holds: emb f32[16, 2], all rows.
  static const std::vector<prism::runtime::ps::PsShard> shards = {
      {"emb", prism::ir::DType::F32, 0, 16, {16, 2}}};
  const std::string shardPath = dir + "/ps-0.shards";
  writeFile(shardPath, bytes);
  auto shard = prism::runtime::ps::readShardCheckpoint(shardPath, shards);
  if (!shard)
    llvm::consumeError(shard.takeError());
  return 0;
}
