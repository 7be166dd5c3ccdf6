// A user's own arrays (`npy:DIR`): NumPy .npy files, one per model input, in DIR/train/ and
// DIR/test/. Each file NAME.npy is the field NAME, its first dimension the examples.
#pragma once

#include <memory>

#include "runtime/Tensor.h"
#include "runtime/data/Dataset.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::data {

// One .npy file (format versions 1 to 3, C order, little-endian float32, float64, int32, int64
// or bool) as a tensor of its shape. Errors name the file and say how to write it instead.
llvm::Expected<Tensor> readNpy(llvm::StringRef path);

// Every DIR/{train,test}/NAME.npy of the split as field NAME; all with the same number of rows.
llvm::Expected<std::unique_ptr<TensorDataset>> loadNpyDirectory(llvm::StringRef dir, Split split);

} // namespace prism::runtime::data
