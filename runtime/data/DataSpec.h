// The --data option: which data set to train on, as one string, and opening it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/data/Dataset.h"
#include "runtime/data/TextCorpus.h"
#include "runtime/data/Zipf.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace prism::runtime::data {

enum class DataSource { FashionMnist, Zipf, Text, Npy };

// A parsed data spec. Syntax (docs/data.md):
//   fashion-mnist                 the files of Debian's dataset-fashion-mnist
//   fashion-mnist:DIR             the same files in DIR
//   zipf:VOCAB[,tokens=T][,classes=C][,exponent=S][,examples=N]
//   text:FILE[,tokens=T][,vocab=V]
//   npy:DIR                       DIR/train/NAME.npy and DIR/test/NAME.npy, one per model input
struct DataSpec {
  DataSource source = DataSource::FashionMnist;
  std::string path; // DIR or FILE (fashion-mnist, text, npy)
  ZipfOptions zipf;
  TextOptions text;

  // The canonical spelling, which parses back to the same spec.
  std::string str() const;
};

llvm::Expected<DataSpec> parseDataSpec(llvm::StringRef spec);

// The data set a spec names. `seed` decides synthetic data (the same seed gives the same data on
// every worker); real data ignores it.
llvm::Expected<std::unique_ptr<Dataset>> openDataset(const DataSpec &spec, Split split,
                                                     uint64_t seed);

} // namespace prism::runtime::data
