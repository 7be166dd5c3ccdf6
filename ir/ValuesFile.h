// The values file: tensors' first values stored beside a model (written by `prism import`, read
// by the `values(file, offset)` initializer). The layout is in docs/import.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::ir {

// "PRISMVAL", then the version (u32 little-endian) and 4 reserved bytes.
inline constexpr char kValuesFileMagic[8] = {'P', 'R', 'I', 'S', 'M', 'V', 'A', 'L'};
inline constexpr uint32_t kValuesFileVersion = 1;
inline constexpr uint64_t kValuesFileHeaderBytes = 16;
// A record: element count (u64), element type (u32, 1 = float32), CRC-32 of the data (u32),
// then the elements; every record starts at a multiple of this.
inline constexpr uint64_t kValuesRecordAlignment = 64;
inline constexpr uint64_t kValuesRecordHeaderBytes = 16;
inline constexpr uint32_t kValuesFloat32 = 1;

// Builds a values file in memory: the header, then one record per append.
class ValuesFileWriter {
public:
  ValuesFileWriter();
  // Appends one tensor's elements; returns the record's offset (what `values(offset = N)` names).
  uint64_t append(llvm::ArrayRef<float> elements);
  const std::string &bytes() const { return bytes_; }

private:
  std::string bytes_;
};

// Reads the record at `offset` of the values file at `path`, which must hold `count` float32
// elements. Every problem (no file, bad magic or version, offset or record outside the file,
// another count or type, checksum mismatch) is an error naming the file.
llvm::Expected<std::vector<float>> readValuesRecord(llvm::StringRef path, uint64_t offset,
                                                    int64_t count);

} // namespace prism::ir
