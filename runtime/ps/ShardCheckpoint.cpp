// Writing and reading a parameter server's checkpoint file.
#include "runtime/ps/ShardCheckpoint.h"

#include <algorithm>
#include <cstring>

#include "ir/Diagnostic.h"
#include "nlohmann/json.hpp"
#include "runtime/CheckpointFile.h"
#include "runtime/JsonFields.h"
#include "runtime/SeedRule.h"
#include "llvm/Support/MemoryBuffer.h"

namespace prism::runtime::ps {
namespace {

constexpr llvm::StringLiteral kMagic = "PRISM-PS-CHECKPOINT 1\n";

} // namespace

llvm::Error writeShardCheckpoint(llvm::StringRef path, int64_t version,
                                 llvm::ArrayRef<PsShard> shards,
                                 const runtime::VariableStore &variables) {
  nlohmann::json header;
  header["version"] = version;
  header["shards"] = nlohmann::json::array();
  std::vector<const Tensor *> values;
  int64_t offset = 0;
  for (const PsShard &shard : shards) {
    const Tensor *value = variables.find(shard.name);
    if (!value || value->shape() != shard.shape() || value->dtype() != shard.dtype)
      return ir::makeError("cannot save shard of " + shard.name +
                           ": the store does not hold it with the shard's shape and dtype");
    header["shards"].push_back({{"name", shard.name},
                                {"dtype", ir::dtypeName(shard.dtype).str()},
                                {"row_begin", shard.rowBegin},
                                {"row_end", shard.rowEnd},
                                {"full_shape", shard.fullShape},
                                {"offset", offset},
                                {"bytes", value->numBytes()}});
    values.push_back(value);
    offset += value->numBytes();
  }
  return writeChecksummedFile(path, std::string(kMagic) + header.dump() + "\n", values);
}

llvm::Expected<ShardCheckpoint> readShardCheckpoint(llvm::StringRef path,
                                                    llvm::ArrayRef<PsShard> shards) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return ir::makeError("cannot read parameter-server checkpoint " + path + ": " +
                         buffer.getError().message());
  llvm::StringRef bytes = (*buffer)->getBuffer();
  auto corrupt = [&](const llvm::Twine &why) {
    return ir::makeError("parameter-server checkpoint " + path + " is unusable: " + why);
  };
  uint64_t stored;
  if (!bytes.startswith(kMagic) || bytes.size() < kMagic.size() + sizeof(stored))
    return corrupt("it does not start with '" + kMagic.drop_back() + "' or is truncated");
  std::memcpy(&stored, bytes.data() + bytes.size() - sizeof(stored), sizeof(stored));
  llvm::StringRef body = bytes.drop_back(sizeof(stored));
  if (fnv1a64(body) != stored)
    return corrupt("its checksum does not match (truncated or modified)");
  size_t headerEnd = body.find('\n', kMagic.size());
  if (headerEnd == llvm::StringRef::npos)
    return corrupt("no header line");
  llvm::StringRef data = body.drop_front(headerEnd + 1);

  ShardCheckpoint checkpoint;
  try {
    auto header = nlohmann::json::parse(body.slice(kMagic.size(), headerEnd));
    checkpoint.version = jsonInteger(header, "version");
    const auto &entries = header.at("shards");
    if (entries.size() != shards.size())
      return corrupt("it holds " + llvm::Twine(entries.size()) + " shards, the server " +
                     llvm::Twine(shards.size()));
    for (const PsShard &shard : shards) {
      auto entry = std::find_if(entries.begin(), entries.end(), [&](const nlohmann::json &e) {
        return e.at("name").get<std::string>() == shard.name;
      });
      if (entry == entries.end())
        return corrupt("it has no shard of " + shard.name);
      if (entry->at("dtype").get<std::string>() != ir::dtypeName(shard.dtype) ||
          jsonInteger(*entry, "row_begin") != shard.rowBegin ||
          jsonInteger(*entry, "row_end") != shard.rowEnd ||
          jsonIntegers(*entry, "full_shape") != shard.fullShape)
        return corrupt("its shard of " + shard.name +
                       " has another dtype, row range or shape than the server's");
      Tensor value(shard.dtype, shard.shape());
      int64_t offset = jsonInteger(*entry, "offset");
      int64_t size = jsonInteger(*entry, "bytes");
      if (size != value.numBytes() || offset < 0 || static_cast<uint64_t>(offset) > data.size() ||
          static_cast<uint64_t>(size) > data.size() - static_cast<uint64_t>(offset))
        return corrupt("its shard of " + shard.name + " is out of bounds");
      if (size)
        std::memcpy(value.raw(), data.data() + offset, static_cast<size_t>(size));
      checkpoint.shards[shard.name] = std::move(value);
    }
  } catch (const nlohmann::json::exception &e) {
    return corrupt(llvm::Twine("bad header: ") + e.what());
  }
  return checkpoint;
}

} // namespace prism::runtime::ps
