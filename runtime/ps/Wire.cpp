// Tensors to and from their protobuf form (raw little-endian bytes, which is host order here).
#include "runtime/ps/Wire.h"

#include <cstring>

#include "ir/Diagnostic.h"
#include "runtime/HalfFloat.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format is little-endian and tensors are copied as raw bytes");

namespace prism::runtime::ps {

bool sameJobToken(llvm::StringRef given, llvm::StringRef expected) {
  if (given.size() != expected.size())
    return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < expected.size(); ++i)
    difference |= static_cast<unsigned char>(given[i] ^ expected[i]);
  return difference == 0;
}

void setWireData(const void *data, int64_t elements, ir::DType dtype, ir::ComputePrecision encoding,
                 ::prism::ps::Tensor *message) {
  if (dtype != ir::DType::F32 || encoding == ir::ComputePrecision::F32) {
    message->set_data(data, static_cast<size_t>(elements * ir::dtypeBytes(dtype)));
    return;
  }
  message->set_encoding(ir::precisionName(encoding).str());
  std::string *bytes = message->mutable_data();
  bytes->resize(static_cast<size_t>(elements) * sizeof(uint16_t));
  encodeHalf(static_cast<const float *>(data), reinterpret_cast<uint16_t *>(bytes->data()),
             elements, encoding);
}

void toWire(const Tensor &tensor, ::prism::ps::Tensor *message, ir::ComputePrecision encoding) {
  message->set_dtype(ir::dtypeName(tensor.dtype()).str());
  message->mutable_shape()->Assign(tensor.shape().begin(), tensor.shape().end());
  setWireData(tensor.raw(), tensor.numElements(), tensor.dtype(), encoding, message);
}

llvm::Expected<ir::ComputePrecision> parseWireEncoding(const std::string &text) {
  if (text.empty())
    return ir::ComputePrecision::F32;
  auto precision = ir::parsePrecision(text);
  if (!precision)
    return ir::withContext(precision.takeError(), "encoding");
  return *precision;
}

llvm::Expected<Tensor> fromWire(const ::prism::ps::Tensor &message) {
  auto dtype = ir::parseDType(message.dtype());
  if (!dtype)
    return ir::makeError("tensor with unknown dtype '" + message.dtype() + "'");
  auto encoding = parseWireEncoding(message.encoding());
  if (!encoding)
    return ir::withContext(encoding.takeError(), "tensor");
  if (*encoding != ir::ComputePrecision::F32 && *dtype != ir::DType::F32)
    return ir::makeError("a " + message.dtype() + " tensor in " + message.encoding() +
                         " encoding: only f32 tensors travel compressed");
  std::vector<int64_t> shape(message.shape().begin(), message.shape().end());
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && elements > ir::kMaxElements / d))
      return ir::makeError("tensor with an invalid shape");
    elements *= d;
  }
  const int64_t elementBytes =
      *encoding == ir::ComputePrecision::F32 ? ir::dtypeBytes(*dtype) : sizeof(uint16_t);
  if (static_cast<int64_t>(message.data().size()) != elements * elementBytes)
    return ir::makeError("tensor of " + llvm::Twine(elements) + " elements carries " +
                         llvm::Twine(message.data().size()) + " bytes");
  Tensor tensor(*dtype, std::move(shape));
  if (message.data().empty())
    return tensor;
  if (*encoding == ir::ComputePrecision::F32)
    std::memcpy(tensor.raw(), message.data().data(), message.data().size());
  else
    decodeHalf(reinterpret_cast<const uint16_t *>(message.data().data()), tensor.data<float>(),
               elements, *encoding);
  return tensor;
}

} // namespace prism::runtime::ps
