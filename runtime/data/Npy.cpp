// Reading .npy files and directories of them (see Npy.h). The format: the magic "\x93NUMPY",
// a major and a minor version byte, the header's length (2 bytes little-endian in version 1, 4
// in versions 2 and 3), the header (a Python dict literal: descr, fortran_order, shape), then
// the data.
#include "runtime/data/Npy.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "ir/Diagnostic.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace prism::runtime::data {
namespace {

constexpr llvm::StringLiteral kMagic("\x93NUMPY");

// The value after `'key':` in the header dict, up to the next top-level ',' or '}'.
std::optional<llvm::StringRef> headerValue(llvm::StringRef header, llvm::StringRef key) {
  for (llvm::StringRef quote : {"'", "\""}) {
    size_t at = header.find(quote.str() + key.str() + quote.str());
    if (at == llvm::StringRef::npos)
      continue;
    llvm::StringRef rest = header.drop_front(at + key.size() + 2).ltrim();
    if (!rest.consume_front(":"))
      return std::nullopt;
    rest = rest.ltrim();
    size_t end = rest.startswith("(") ? rest.find(')') + 1 : rest.find_first_of(",}");
    if (end == llvm::StringRef::npos || end == 0)
      return std::nullopt;
    return rest.take_front(end).trim();
  }
  return std::nullopt;
}

struct NpyDType {
  ir::DType dtype;
  size_t bytes;
};

// '<f4' and the like: the dtypes Prism computes in, little-endian (or one byte).
llvm::Expected<NpyDType> parseDescr(llvm::StringRef path, llvm::StringRef descr) {
  descr = descr.trim("'\"");
  if (descr.size() >= 2 && descr[0] == '>' && descr.substr(1) != "b1" && descr.substr(1) != "u1")
    return ir::makeError(path + ": big-endian data ('" + descr +
                         "'): save it little-endian (a.astype(a.dtype.newbyteorder('<')))");
  llvm::StringRef kind = descr.drop_while([](char c) { return c == '<' || c == '|' || c == '='; });
  if (kind == "f4")
    return NpyDType{ir::DType::F32, 4};
  if (kind == "f8")
    return NpyDType{ir::DType::F64, 8};
  if (kind == "i4")
    return NpyDType{ir::DType::I32, 4};
  if (kind == "i8")
    return NpyDType{ir::DType::I64, 8};
  if (kind == "b1")
    return NpyDType{ir::DType::Bool, 1};
  return ir::makeError(path + ": holds '" + descr +
                       "' values; Prism reads float32, float64, int32, int64 and bool arrays: "
                       "convert it (e.g. a.astype(np.float32) or a.astype(np.int32))");
}

llvm::Expected<std::vector<int64_t>> parseShape(llvm::StringRef path, llvm::StringRef text) {
  if (!text.consume_front("(") || !text.consume_back(")"))
    return ir::makeError(path + ": the header's shape '" + text + "' is not a tuple");
  llvm::SmallVector<llvm::StringRef, 8> parts;
  text.split(parts, ',', -1, /*KeepEmpty=*/false);
  std::vector<int64_t> shape;
  for (llvm::StringRef part : parts) {
    part = part.trim();
    if (part.empty())
      continue;
    int64_t d = 0;
    if (part.getAsInteger(10, d) || d < 0)
      return ir::makeError(path + ": the header's shape has a bad dimension '" + part + "'");
    shape.push_back(d);
  }
  return shape;
}

} // namespace

llvm::Expected<Tensor> readNpy(llvm::StringRef path) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!file)
    return ir::makeError(path + ": " + file.getError().message());
  llvm::StringRef bytes = (*file)->getBuffer();
  if (!bytes.startswith(kMagic) || bytes.size() < 10)
    return ir::makeError(path + ": not a .npy file (no \\x93NUMPY magic; write it with np.save)");
  const auto *b = reinterpret_cast<const unsigned char *>(bytes.data());
  int major = b[6];
  size_t headerLength = 0, headerStart = 0;
  if (major == 1) {
    headerLength = b[8] | (size_t(b[9]) << 8);
    headerStart = 10;
  } else if ((major == 2 || major == 3) && bytes.size() >= 12) {
    headerLength = b[8] | (size_t(b[9]) << 8) | (size_t(b[10]) << 16) | (size_t(b[11]) << 24);
    headerStart = 12;
  } else {
    return ir::makeError(path + ": .npy format version " + llvm::Twine(major) +
                         " (Prism reads versions 1 to 3)");
  }
  if (headerLength > bytes.size() - headerStart)
    return ir::makeError(path + ": the header runs past the end of the file");
  llvm::StringRef header = bytes.substr(headerStart, headerLength);
  auto descr = headerValue(header, "descr");
  auto order = headerValue(header, "fortran_order");
  auto shapeText = headerValue(header, "shape");
  if (!descr || !order || !shapeText)
    return ir::makeError(path + ": the header lacks descr, fortran_order or shape");
  auto dtype = parseDescr(path, *descr);
  if (!dtype)
    return dtype.takeError();
  auto shape = parseShape(path, *shapeText);
  if (!shape)
    return shape.takeError();
  if (shape->empty())
    return ir::makeError(path + ": holds one value; it needs one row per example (shape (N, ...))");
  if (*order == "True" && shape->size() > 1)
    return ir::makeError(path + ": is in Fortran order: save np.ascontiguousarray(a)");
  uint64_t elements = 1;
  for (int64_t d : *shape) {
    if (d != 0 && elements > std::numeric_limits<uint64_t>::max() / dtype->bytes / uint64_t(d))
      return ir::makeError(path + ": the header's shape is too large");
    elements *= uint64_t(d);
  }
  uint64_t dataBytes = elements * dtype->bytes;
  uint64_t present = bytes.size() - headerStart - headerLength;
  if (present != dataBytes)
    return ir::makeError(
        path + ": " + ir::dtypeName(dtype->dtype) + " of shape (" +
        llvm::join(llvm::map_range(*shape, [](int64_t d) { return std::to_string(d); }), ", ") +
        ") needs " + llvm::Twine(dataBytes) + " bytes of data, the file has " +
        llvm::Twine(present));
  if ((*shape)[0] == 0)
    return ir::makeError(path + ": has no examples (its first dimension is 0)");
  Tensor values(dtype->dtype, *shape);
  std::memcpy(values.raw(), bytes.data() + headerStart + headerLength, dataBytes);
  if (dtype->dtype == ir::DType::Bool) {
    auto *v = static_cast<uint8_t *>(values.raw());
    for (uint64_t i = 0; i < elements; ++i)
      v[i] = v[i] != 0;
  }
  return values;
}

llvm::Expected<std::unique_ptr<TensorDataset>> loadNpyDirectory(llvm::StringRef dir, Split split) {
  llvm::SmallString<256> splitDir(dir);
  llvm::sys::path::append(splitDir, splitName(split));
  if (!llvm::sys::fs::is_directory(splitDir))
    return ir::makeError("npy:" + dir + ": " + splitDir +
                         " is not a directory (npy:DIR reads DIR/train/NAME.npy and "
                         "DIR/test/NAME.npy, one file per model input)");
  std::vector<std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(splitDir, ec), end; it != end && !ec; it.increment(ec))
    if (llvm::StringRef(it->path()).endswith(".npy"))
      files.push_back(it->path());
  if (ec)
    return ir::makeError(splitDir + ": " + ec.message());
  if (files.empty())
    return ir::makeError(splitDir + ": no .npy files (one NAME.npy per model input)");
  std::sort(files.begin(), files.end());
  auto dataset = std::make_unique<TensorDataset>("npy:" + dir.str() + " " + splitName(split).str());
  std::string first;
  for (const std::string &file : files) {
    auto values = readNpy(file);
    if (!values)
      return values.takeError();
    if (!first.empty() && values->dim(0) != dataset->size())
      return ir::makeError(file + " has " + llvm::Twine(values->dim(0)) + " rows and " + first +
                           " " + llvm::Twine(dataset->size()) +
                           ": every array of a split needs one row per example");
    FieldInfo info;
    info.name = llvm::sys::path::stem(file).str();
    info.file = file;
    info.dtype = values->dtype();
    info.exampleShape.assign(values->shape().begin() + 1, values->shape().end());
    if (auto e = dataset->addField(std::move(info), std::move(*values)))
      return std::move(e);
    if (first.empty())
      first = file;
  }
  return std::move(dataset);
}

} // namespace prism::runtime::data
