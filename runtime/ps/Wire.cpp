// Tensors to and from their protobuf form (raw little-endian bytes, which is host order here).
#include "runtime/ps/Wire.h"

#include <cstring>

#include "ir/Diagnostic.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the wire format is little-endian and tensors are copied as raw bytes");

namespace prism::runtime::ps {

void toWire(const Tensor &tensor, ::prism::ps::Tensor *message) {
  message->set_dtype(ir::dtypeName(tensor.dtype()).str());
  message->mutable_shape()->Assign(tensor.shape().begin(), tensor.shape().end());
  message->set_data(tensor.raw(), static_cast<size_t>(tensor.numBytes()));
}

llvm::Expected<Tensor> fromWire(const ::prism::ps::Tensor &message) {
  auto dtype = ir::parseDType(message.dtype());
  if (!dtype)
    return ir::makeError("tensor with unknown dtype '" + message.dtype() + "'");
  std::vector<int64_t> shape(message.shape().begin(), message.shape().end());
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && elements > ir::kMaxElements / d))
      return ir::makeError("tensor with an invalid shape");
    elements *= d;
  }
  if (static_cast<int64_t>(message.data().size()) != elements * ir::dtypeBytes(*dtype))
    return ir::makeError("tensor of " + llvm::Twine(elements) + " elements carries " +
                         llvm::Twine(message.data().size()) + " bytes");
  Tensor tensor(*dtype, std::move(shape));
  if (!message.data().empty())
    std::memcpy(tensor.raw(), message.data().data(), message.data().size());
  return tensor;
}

} // namespace prism::runtime::ps
