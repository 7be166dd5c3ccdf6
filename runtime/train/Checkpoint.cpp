// Checkpoints. File layout: the magic line `PRISM-CHECKPOINT 1\n`, a JSON header line (the
// position and, per variable, name, dtype, shape, byte offset and size), then the raw tensor
// bytes, then an 8-byte FNV-1a checksum of everything before it.
#include "runtime/train/Checkpoint.h"

#include <cstring>
#include <fstream>

#include "ir/Diagnostic.h"
#include "nlohmann/json.hpp"
#include "runtime/CheckpointFile.h"
#include "runtime/JsonFields.h"
#include "runtime/SeedRule.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

namespace prism::runtime::train {
namespace {

constexpr llvm::StringLiteral kMagic = "PRISM-CHECKPOINT 1\n";

uint64_t fnv1a(const char *data, size_t size) {
  return fnv1a64(llvm::StringRef(data, size));
}

// Whether `shape` of `dtype` is exactly `bytes` long: no dimension negative, and no product
// larger than `bytes` (so none overflows).
bool fitsIn(const std::vector<int64_t> &shape, ir::DType dtype, int64_t bytes) {
  if (bytes < 0)
    return false;
  uint64_t total = static_cast<uint64_t>(ir::dtypeBytes(dtype));
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && total > static_cast<uint64_t>(bytes) / static_cast<uint64_t>(d)))
      return false;
    total *= static_cast<uint64_t>(d);
  }
  return total == static_cast<uint64_t>(bytes);
}

} // namespace

std::string checkpointPath(llvm::StringRef dir) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, "checkpoint.prism");
  return std::string(path);
}

llvm::Error saveCheckpoint(llvm::StringRef dir, const TrainingPosition &position,
                           const llvm::StringMap<Tensor> &variables) {
  if (auto ec = llvm::sys::fs::create_directories(dir))
    return ir::makeError("cannot create checkpoint directory " + dir + ": " + ec.message());
  // Variables in name order, so equal states give equal files.
  std::map<std::string, const Tensor *> sorted;
  // Variables held elsewhere (a worker's view of PS variables) have no value here.
  for (const auto &entry : variables)
    if (!entry.getValue().empty())
      sorted[entry.getKey().str()] = &entry.getValue();

  nlohmann::json header;
  header["global_step"] = position.globalStep;
  header["epoch"] = position.epoch;
  header["batch_in_epoch"] = position.batchInEpoch;
  header["seed"] = position.seed;
  header["batch_size"] = position.batchSize;
  header["model"] = position.model;
  header["data"] = position.data;
  int64_t offset = 0;
  for (const auto &[name, t] : sorted) {
    header["variables"].push_back({{"name", name},
                                   {"dtype", ir::dtypeName(t->dtype()).str()},
                                   {"shape", t->shape()},
                                   {"offset", offset},
                                   {"bytes", t->numBytes()}});
    offset += t->numBytes();
  }
  std::vector<const Tensor *> tensors;
  for (const auto &[name, t] : sorted)
    tensors.push_back(t);
  return writeChecksummedFile(checkpointPath(dir), kMagic.str() + header.dump() + "\n", tensors);
}

llvm::Expected<Checkpoint> loadCheckpoint(llvm::StringRef dir) {
  std::string path = checkpointPath(dir);
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return ir::makeError("cannot read checkpoint " + path + ": " + buffer.getError().message());
  llvm::StringRef bytes = (*buffer)->getBuffer();
  auto corrupt = [&](const llvm::Twine &why) {
    return ir::makeError("checkpoint " + path + " is corrupt: " + why);
  };
  if (!bytes.startswith(kMagic))
    return corrupt("it does not start with '" + kMagic.drop_back() + "'");
  if (bytes.size() < kMagic.size() + sizeof(uint64_t))
    return corrupt("it is truncated");
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - sizeof(stored), sizeof(stored));
  if (fnv1a(bytes.data(), bytes.size() - sizeof(stored)) != stored)
    return corrupt("its checksum does not match (truncated or modified)");
  size_t headerEnd = bytes.find('\n', kMagic.size());
  if (headerEnd == llvm::StringRef::npos)
    return corrupt("no header line");
  Checkpoint ckpt;
  try {
    auto header = nlohmann::json::parse(bytes.substr(kMagic.size(), headerEnd - kMagic.size()));
    TrainingPosition &p = ckpt.position;
    p.globalStep = jsonInteger(header, "global_step");
    p.epoch = jsonInteger(header, "epoch");
    p.batchInEpoch = jsonInteger(header, "batch_in_epoch");
    p.seed = static_cast<uint64_t>(jsonInteger(header, "seed"));
    p.batchSize = jsonInteger(header, "batch_size");
    p.model = header.at("model").get<std::string>();
    p.data = header.at("data").get<std::string>();
    size_t dataStart = headerEnd + 1;
    size_t dataSize = bytes.size() - sizeof(stored) - dataStart;
    for (const auto &v : header.value("variables", nlohmann::json::array())) {
      auto dtype = ir::parseDType(v.at("dtype").get<std::string>());
      if (!dtype)
        return corrupt("variable " + v.at("name").get<std::string>() + " has an unknown dtype");
      std::vector<int64_t> shape = jsonIntegers(v, "shape");
      int64_t offset = jsonInteger(v, "offset"), size = jsonInteger(v, "bytes");
      // The shape must fit the bytes the file holds before anything is allocated for it.
      if (!fitsIn(shape, *dtype, size) || offset < 0 || static_cast<uint64_t>(offset) > dataSize ||
          static_cast<uint64_t>(size) > dataSize - static_cast<uint64_t>(offset))
        return corrupt("variable " + v.at("name").get<std::string>() + " is out of bounds");
      Tensor t(*dtype, shape);
      std::memcpy(t.raw(), bytes.data() + dataStart + offset, static_cast<size_t>(size));
      ckpt.variables[v.at("name").get<std::string>()] = std::move(t);
    }
  } catch (const nlohmann::json::exception &e) {
    return corrupt(llvm::Twine("bad header: ") + e.what());
  }
  return ckpt;
}

} // namespace prism::runtime::train
