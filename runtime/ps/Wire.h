// What the parameter-server client and server share on the wire: the job-token metadata key and
// tensors converted to and from their protobuf form.
#pragma once

#include "ir/Precision.h"
#include "runtime/Tensor.h"
#include "runtime/ps/ps.pb.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::ps {

// gRPC metadata every call carries (keys are lower case).
inline constexpr char kJobTokenKey[] = "prism-job-token";
// Compares a call's token with the job's in time independent of where they differ.
bool sameJobToken(llvm::StringRef given, llvm::StringRef expected);

// `encoding` BF16 or FP16 sends an f32 tensor's elements as 16-bit floats (--compress); other
// dtypes always travel as they are.
void toWire(const Tensor &tensor, ::prism::ps::Tensor *message,
            ir::ComputePrecision encoding = ir::ComputePrecision::F32);
// The same for `elements` elements of `dtype` at `data`, with the shape already set.
void setWireData(const void *data, int64_t elements, ir::DType dtype, ir::ComputePrecision encoding,
                 ::prism::ps::Tensor *message);
// Parses Tensor.encoding and PullRowsRequest.encoding: empty (none, as "f32"), "fp16" or "bf16".
llvm::Expected<ir::ComputePrecision> parseWireEncoding(const std::string &text);
// Checks dtype, shape, encoding and byte count; the tensor owns a copy of the elements (decoded
// to float32 when they came as 16-bit floats).
llvm::Expected<Tensor> fromWire(const ::prism::ps::Tensor &message);

} // namespace prism::runtime::ps
