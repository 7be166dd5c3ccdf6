// Parsing and printing data specs; opening the data set one names.
#include "runtime/data/DataSpec.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "ir/Diagnostic.h"
#include "runtime/data/FashionMnist.h"
#include "runtime/data/Npy.h"
#include "llvm/ADT/SmallVector.h"

namespace prism::runtime::data {

namespace {

constexpr const char *kSyntax = "fashion-mnist, fashion-mnist:DIR, "
                                "zipf:VOCAB[,tokens=T][,classes=C][,exponent=S][,examples=N] or "
                                "text:FILE[,tokens=T][,vocab=V] or npy:DIR";

llvm::Error specError(llvm::StringRef spec, const llvm::Twine &message) {
  return ir::makeError("data spec '" + spec + "': " + message);
}

llvm::Expected<int64_t> parseCount(llvm::StringRef spec, llvm::StringRef key,
                                   llvm::StringRef text) {
  int64_t value = 0;
  if (text.getAsInteger(10, value) || value < 1)
    return specError(spec, key + " must be a positive integer, got '" + text + "'");
  return value;
}

// Applies `key=value` options after the first comma-separated part.
llvm::Error parseOptions(llvm::StringRef spec, llvm::ArrayRef<llvm::StringRef> parts,
                         DataSpec &out) {
  std::set<std::string> seen;
  for (llvm::StringRef part : parts) {
    auto [key, value] = part.split('=');
    key = key.trim();
    value = value.trim();
    if (!part.contains('=') || key.empty())
      return specError(spec, "expected key=value, got '" + part + "'");
    if (!seen.insert(key.str()).second)
      return specError(spec, "'" + key + "' is given twice");
    bool zipf = out.source == DataSource::Zipf;
    if (key == "tokens") {
      auto v = parseCount(spec, key, value);
      if (!v)
        return v.takeError();
      (zipf ? out.zipf.tokens : out.text.tokens) = *v;
    } else if (zipf && key == "classes") {
      auto v = parseCount(spec, key, value);
      if (!v)
        return v.takeError();
      out.zipf.classes = *v;
    } else if (zipf && key == "examples") {
      auto v = parseCount(spec, key, value);
      if (!v)
        return v.takeError();
      out.zipf.examples = *v;
    } else if (zipf && key == "exponent") {
      double s = 0;
      if (value.getAsDouble(s) || !std::isfinite(s) || s < 0)
        return specError(spec, "exponent must be a number >= 0, got '" + value + "'");
      out.zipf.exponent = s;
    } else if (!zipf && key == "vocab") {
      auto v = parseCount(spec, key, value);
      if (!v)
        return v.takeError();
      out.text.vocab = *v;
    } else {
      return specError(spec, "unknown option '" + key + "' (" +
                                 (zipf ? "zipf takes tokens, classes, exponent, examples"
                                       : "text takes tokens, vocab") +
                                 ")");
    }
  }
  return llvm::Error::success();
}

std::string formatDouble(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  // The shortest spelling that reads back exactly.
  for (int digits = 1; digits <= 17; ++digits) {
    char shorter[32];
    std::snprintf(shorter, sizeof shorter, "%.*g", digits, value);
    if (std::strtod(shorter, nullptr) == value)
      return shorter;
  }
  return buffer;
}

} // namespace

llvm::Expected<DataSpec> parseDataSpec(llvm::StringRef spec) {
  auto [kind, rest] = spec.split(':');
  bool hasArgument = spec.contains(':');
  DataSpec out;
  if (kind == "fashion-mnist") {
    out.source = DataSource::FashionMnist;
    out.path = hasArgument ? rest.str() : kFashionMnistDefaultDir;
    if (out.path.empty())
      return specError(spec, "expected a directory after 'fashion-mnist:'");
    return std::move(out);
  }
  if (kind == "npy") {
    out.source = DataSource::Npy;
    out.path = rest.str();
    if (out.path.empty())
      return specError(spec, "expected npy:DIR, the directory with train/ and test/");
    return std::move(out);
  }
  if (kind != "zipf" && kind != "text")
    return specError(spec, "unknown data source '" + kind + "' (expected " + kSyntax + ")");
  llvm::SmallVector<llvm::StringRef, 6> parts;
  rest.split(parts, ',');
  if (!hasArgument || parts.empty() || parts[0].trim().empty())
    return specError(spec, kind == "zipf" ? "expected zipf:VOCAB, the vocabulary size"
                                          : "expected text:FILE, the corpus file");
  if (kind == "zipf") {
    out.source = DataSource::Zipf;
    auto vocab = parseCount(spec, "VOCAB", parts[0].trim());
    if (!vocab)
      return vocab.takeError();
    out.zipf.vocab = *vocab;
  } else {
    out.source = DataSource::Text;
    out.path = parts[0].str();
  }
  if (auto err = parseOptions(spec, llvm::makeArrayRef(parts).drop_front(), out))
    return std::move(err);
  if (out.source == DataSource::Zipf)
    if (auto err = checkZipfOptions(out.zipf))
      return std::move(err);
  return std::move(out);
}

std::string DataSpec::str() const {
  switch (source) {
  case DataSource::FashionMnist:
    return path == kFashionMnistDefaultDir ? "fashion-mnist" : "fashion-mnist:" + path;
  case DataSource::Zipf:
    return "zipf:" + std::to_string(zipf.vocab) + ",tokens=" + std::to_string(zipf.tokens) +
           ",classes=" + std::to_string(zipf.classes) + ",exponent=" + formatDouble(zipf.exponent) +
           ",examples=" + std::to_string(zipf.examples);
  case DataSource::Text:
    return "text:" + path + ",tokens=" + std::to_string(text.tokens) +
           ",vocab=" + std::to_string(text.vocab);
  case DataSource::Npy:
    return "npy:" + path;
  }
  return "";
}

llvm::Expected<std::unique_ptr<Dataset>> openDataset(const DataSpec &spec, Split split,
                                                     uint64_t seed) {
  switch (spec.source) {
  case DataSource::FashionMnist: {
    auto d = loadFashionMnist(spec.path, split);
    if (!d)
      return d.takeError();
    return std::unique_ptr<Dataset>(std::move(*d));
  }
  case DataSource::Zipf: {
    auto d = makeZipfDataset(spec.zipf, split, seed);
    if (!d)
      return d.takeError();
    return std::unique_ptr<Dataset>(std::move(*d));
  }
  case DataSource::Text: {
    auto d = loadTextCorpus(spec.path, spec.text, split);
    if (!d)
      return d.takeError();
    return std::unique_ptr<Dataset>(std::move(*d));
  }
  case DataSource::Npy: {
    auto d = loadNpyDirectory(spec.path, split);
    if (!d)
      return d.takeError();
    return std::unique_ptr<Dataset>(std::move(*d));
  }
  }
  return ir::makeError("unknown data source");
}

} // namespace prism::runtime::data
