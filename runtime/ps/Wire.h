// What the parameter-server client and server share on the wire: the job-token metadata key and
// tensors converted to and from their protobuf form.
#pragma once

#include "runtime/Tensor.h"
#include "runtime/ps/ps.pb.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::ps {

// gRPC metadata every call carries (keys are lower case).
inline constexpr char kJobTokenKey[] = "prism-job-token";

void toWire(const Tensor &tensor, ::prism::ps::Tensor *message);
// Checks dtype, shape and byte count; the tensor owns a copy of the bytes.
llvm::Expected<Tensor> fromWire(const ::prism::ps::Tensor &message);

} // namespace prism::runtime::ps
